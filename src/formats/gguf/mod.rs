//! GGUF (llama.cpp) files, versions 2 and 3: header, metadata of every value type,
//! tensor infos and the data section, read zero-copy from a memory map or a byte
//! slice, plus the reference decoders of the block types ([`mod@reference`]).
//!
//! ```
//! use dq::formats::gguf::{Gguf, GgmlType, MetaValue};
//! let file = Gguf::open("tests/fixtures/gguf/metadata.gguf")?;
//! assert_eq!(file.version(), 3);
//! assert_eq!(file.alignment(), 64);
//! assert_eq!(file.get("test.u32"), Some(MetaValue::U32(u32::MAX)));
//! let t = file.tensor("small.q8_0").expect("listed");
//! assert_eq!((t.ggml_type(), t.shape()), (Some(GgmlType::Q8_0), vec![1, 32]));
//! let mut out = vec![0f32; t.element_count() as usize];
//! file.dequantize_reference(t, &mut out)?;
//! assert_eq!(out[0], -16.0);
//! # Ok::<(), dq::formats::gguf::GgufError>(())
//! ```
//!
//! # Checks
//! Every count, length and offset is checked against the bytes left before it is
//! used: a truncated or forged file is a [`GgufError`], never a panic, and nothing is
//! allocated in proportion to a count before the file was seen to hold that many
//! items. Rejected: a bad magic, versions other than 2 and 3, big-endian files,
//! unknown metadata value types, bools other than 0/1, arrays nested deeper than
//! [`MAX_NESTING`], duplicate keys or tensor names, a `general.alignment` that is not
//! a nonzero power-of-two u32, more than 4 dims, element or byte counts that
//! overflow, rows that are not whole blocks, and tensor data that is misaligned,
//! outside the data section or overlapping another tensor's. A tensor type id that
//! ggml does not define is not a read error: the tensor is listed, unsupported, with
//! no byte size.
//!
//! # Why not a crate
//! The crates on crates.io each miss something this reader must do: `gguf-rs-lib`
//! 0.3 reads version 3 only and its memory-map mode checks only the magic and
//! version; `ggus` 0.5 borrows the bytes but reads version 3 only and sizes maps by
//! the file's counts before checking them; `gguf-rs` and `gguf` copy everything into
//! owned values; candle's reader copies too. The format is small, so dq parses it
//! itself (one cursor type holds every bounds check) and tests it with mutations.

mod cursor;
mod decode;
mod error;
mod metadata;
mod parse;
pub mod reference;
mod tensor;
mod types;
mod write;

use std::path::Path;

use super::input::{self, FileBytes};

pub use decode::check_backend;
pub use error::{GgufError, Result};
pub use metadata::{MAX_NESTING, MetaArray, MetaValue, ValueType};
pub use parse::DEFAULT_ALIGNMENT;
pub use tensor::{MAX_DIMS, TensorInfo};
pub use types::{GgmlType, TypeTraits};
pub use write::one_tensor_file;

use cursor::Cursor;
use parse::Index;

/// A parsed GGUF file over its bytes `B`: a file read into memory ([`Gguf::open`]) or
/// mapped ([`Gguf::map`]), a slice ([`Gguf::from_bytes`]) or any owned buffer
/// ([`Gguf::parse`]).
#[derive(Debug)]
pub struct Gguf<B = FileBytes> {
    buf: B,
    index: Index,
}

impl Gguf<FileBytes> {
    /// Reads a GGUF file into memory and checks it. Only regular files are read
    /// (symlinks followed): a FIFO or device is an [`GgufError::Io`] error.
    ///
    /// # Errors
    /// [`GgufError::Io`] when the file cannot be opened or read; any other variant
    /// for a file that is not a valid GGUF file.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let bytes = input::read_aligned(path).map_err(|source| GgufError::Io {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(bytes)
    }

    /// Maps a GGUF file into memory (nothing is copied) and checks it against the
    /// file's size as mapped.
    ///
    /// # Safety
    /// The file must not be modified or truncated while the returned value lives
    /// (see [`input::map`]): a file cut short under the map ends the process with
    /// `SIGBUS`. [`Gguf::open`] is the safe path.
    ///
    /// # Errors
    /// As [`Gguf::open`].
    pub unsafe fn map(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        // SAFETY: the caller keeps the file unmodified while mapped (this fn's contract).
        let bytes = unsafe { input::map(path) }.map_err(|source| GgufError::Io {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(bytes)
    }
}

impl<'a> Gguf<&'a [u8]> {
    /// Parses and checks GGUF bytes in memory.
    ///
    /// # Errors
    /// Any [`GgufError`] but `Io` for bytes that are not a valid GGUF file.
    pub fn from_bytes(bytes: &'a [u8]) -> Result<Self> {
        Self::parse(bytes)
    }
}

impl<B: AsRef<[u8]>> Gguf<B> {
    /// Parses and checks GGUF bytes held by `buf`.
    ///
    /// # Errors
    /// Any [`GgufError`] but `Io` for bytes that are not a valid GGUF file.
    pub fn parse(buf: B) -> Result<Self> {
        let index = parse::parse(buf.as_ref())?;
        Ok(Gguf { buf, index })
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        self.buf.as_ref()
    }

    /// The format version (2 or 3).
    pub fn version(&self) -> u32 {
        self.index.version
    }

    /// The data alignment (`general.alignment`, default 32).
    pub fn alignment(&self) -> u32 {
        self.index.alignment
    }

    /// The file offset of the data section.
    pub fn data_offset(&self) -> usize {
        self.index.data_start
    }

    /// The number of metadata entries.
    pub fn metadata_len(&self) -> usize {
        self.index.kvs.len()
    }

    /// The metadata entries in file order.
    pub fn metadata(&self) -> impl Iterator<Item = (&str, MetaValue<'_>)> {
        self.index.kvs.iter().filter_map(|kv| {
            let mut cur = Cursor::at(self.bytes(), kv.offset);
            // Read once already when the file was checked: cannot fail here.
            let value = metadata::read_value(&mut cur, kv.ty, &kv.key, 0).ok()?;
            Some((kv.key.as_str(), value))
        })
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<MetaValue<'_>> {
        self.metadata().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// `general.architecture`, when it is a UTF-8 string.
    pub fn architecture(&self) -> Option<&str> {
        self.get("general.architecture")?.as_str()
    }

    /// The tensors in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.index.tensors
    }

    /// The tensor called `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.index.tensors.iter().find(|t| t.name == name)
    }

    /// A tensor's bytes, borrowed from the file.
    ///
    /// # Errors
    /// [`GgufError::UnsupportedType`] for a type id ggml does not define (its size is
    /// unknown); [`GgufError::DataOutOfFile`] for a `TensorInfo` of another file that
    /// does not fit this one.
    pub fn tensor_data(&self, t: &TensorInfo) -> Result<&[u8]> {
        let size = t.size.ok_or_else(|| t.unsupported())?;
        let data = self
            .bytes()
            .get(self.index.data_start..)
            .unwrap_or_default();
        usize::try_from(t.offset)
            .ok()
            .and_then(|start| data.get(start..start.checked_add(size)?))
            .ok_or_else(|| GgufError::DataOutOfFile {
                name: t.name.clone(),
                offset: t.offset,
                size: size as u64,
                data_len: data.len() as u64,
            })
    }

    /// Decodes a tensor into `out` (its element count) with the reference decoder.
    ///
    /// # Errors
    /// [`GgufError::UnsupportedType`] for a type dq does not decode;
    /// [`GgufError::Length`] when `out` does not hold the tensor's element count.
    pub fn dequantize_reference(&self, t: &TensorInfo, out: &mut [f32]) -> Result<()> {
        let ty = t
            .ggml_type()
            .filter(|ty| ty.is_supported())
            .ok_or_else(|| t.unsupported())?;
        reference::dequantize(ty, self.tensor_data(t)?, out)
    }
}
