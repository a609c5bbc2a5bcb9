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
//!
//! # Split sets
//! [`Gguf::open`] and [`Gguf::map`] given any part of a gguf-split set
//! (`NAME-00002-of-00003.gguf`, keys `split.no`, `split.count`,
//! `split.tensors.count`) read every part: the metadata is part 1's, the tensors
//! those of all parts in part order ([`TensorInfo::part`] says whose bytes).
//! [`Gguf::open_part`] reads one part alone. See [`mod@split`] for the checks.
//!
//! ```
//! use dq::formats::gguf::Gguf;
//! let set = Gguf::open("tests/fixtures/gguf/split/model-00002-of-00003.gguf")?;
//! let whole = Gguf::open("tests/fixtures/gguf/split/model.gguf")?;
//! assert_eq!(set.part_count(), 3);
//! assert_eq!(set.tensors().len(), whole.tensors().len());
//! let t = set.tensors().last().expect("tensors");
//! assert_eq!(t.part(), 2);
//! assert_eq!(set.tensor_data(t)?, whole.tensor_data(whole.tensor(t.name()).unwrap())?);
//! let part = Gguf::open_part("tests/fixtures/gguf/split/model-00002-of-00003.gguf")?;
//! assert_eq!(part.split().map(|s| (s.part(), s.count)), Some((2, 3)));
//! # Ok::<(), dq::formats::gguf::GgufError>(())
//! ```

mod cursor;
mod decode;
mod error;
mod metadata;
mod parse;
pub mod reference;
pub mod split;
mod tensor;
mod types;
mod write;

use std::path::{Path, PathBuf};

use super::input::{self, FileBytes};

pub use decode::{check_backend, dequantize_blocks};
pub use error::{GgufError, Result};
pub use metadata::{MAX_NESTING, MetaArray, MetaValue, ValueType};
pub use parse::DEFAULT_ALIGNMENT;
pub use split::Split;
pub use tensor::{MAX_DIMS, TensorInfo};
pub use types::{GgmlType, TypeTraits};
pub use write::one_tensor_file;

use parse::Index;

/// A parsed GGUF file, or split set, over its bytes `B`: a file read into memory
/// ([`Gguf::open`]) or mapped ([`Gguf::map`]), a slice ([`Gguf::from_bytes`]), any
/// owned buffer ([`Gguf::parse`]), or the parts of a split set ([`Gguf::from_parts`]).
#[derive(Debug)]
pub struct Gguf<B = FileBytes> {
    /// The files read, part 1 first: one for a single file or a part read alone.
    parts: Vec<Part<B>>,
    /// The tensors of every part, in part order.
    tensors: Vec<TensorInfo>,
    /// The split keys of the first file read.
    split: Option<Split>,
}

/// One file: its bytes and what its header says (its tensors moved to the `Gguf`).
#[derive(Debug)]
struct Part<B> {
    buf: B,
    index: Index,
}

impl<B: AsRef<[u8]>> Part<B> {
    fn new(buf: B) -> Result<Self> {
        let index = parse::parse(buf.as_ref())?;
        Ok(Part { buf, index })
    }
}

impl Gguf<FileBytes> {
    /// Reads a GGUF file into memory and checks it; given a part of a split set,
    /// reads and checks every part ([`mod@split`]). Only regular files are read
    /// (symlinks followed): a FIFO or device is an [`GgufError::Io`] error.
    ///
    /// # Errors
    /// [`GgufError::Io`] when the file cannot be opened or read,
    /// [`GgufError::SplitPartIo`] when another part cannot (a missing part); any
    /// other variant for a file or set that is not valid.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_set(path.as_ref(), input::read_aligned)
    }

    /// Reads one GGUF file into memory and checks it, as it is: a part of a split
    /// set alone, with its own metadata and tensors ([`Gguf::split`] places it).
    ///
    /// # Errors
    /// As [`Gguf::open`], for this file.
    pub fn open_part(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        Self::parse(input::read_aligned(path).map_err(|source| io_error(path, source))?)
    }

    /// Maps a GGUF file into memory (nothing is copied) and checks it against the
    /// file's size as mapped; given a part of a split set, maps every part.
    ///
    /// # Safety
    /// The files must not be modified or truncated while the returned value lives
    /// (see [`input::map`]): a file cut short under the map ends the process with
    /// `SIGBUS`. [`Gguf::open`] is the safe path.
    ///
    /// # Errors
    /// As [`Gguf::open`].
    pub unsafe fn map(path: impl AsRef<Path>) -> Result<Self> {
        // SAFETY: the caller keeps the files unmodified while mapped (this fn's contract).
        Self::open_set(path.as_ref(), |p| unsafe { input::map(p) })
    }

    /// Maps one GGUF file, as it is (see [`Gguf::open_part`]).
    ///
    /// # Safety
    /// As [`Gguf::map`].
    ///
    /// # Errors
    /// As [`Gguf::open_part`].
    pub unsafe fn map_part(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        // SAFETY: the caller keeps the file unmodified while mapped (this fn's contract).
        let bytes = unsafe { input::map(path) }.map_err(|source| io_error(path, source))?;
        Self::parse(bytes)
    }

    /// The file at `path` and, when it is a part of a split set, every other part
    /// of the set, each read by `read`.
    fn open_set(path: &Path, read: impl Fn(&Path) -> std::io::Result<FileBytes>) -> Result<Self> {
        let given = Part::new(read(path).map_err(|source| io_error(path, source))?)?;
        let split = match split::keys(given.buf.as_ref(), &given.index)? {
            None => return Ok(Self::single(given, None)),
            Some(s) if s.count == 1 => return Self::join(vec![given], s, None),
            Some(s) => s,
        };
        let paths = split::part_paths(path, split).ok_or(GgufError::SplitName {
            part: split.part(),
            count: split.count,
        })?;
        let mut given = Some(given);
        let mut parts = Vec::with_capacity(paths.len());
        for (k, p) in paths.iter().enumerate() {
            let part = k as u32 + 1;
            if k == usize::from(split.no)
                && let Some(g) = given.take()
            {
                parts.push(g);
                continue;
            }
            let bytes = read(p).map_err(|source| GgufError::SplitPartIo {
                part,
                count: split.count,
                path: p.clone(),
                source,
            })?;
            let wrap = |e| split::in_part(part, split.count, Some(p.clone()), e);
            let read = Part::new(bytes).map_err(wrap)?;
            // Checked before the next part is read: a foreign part stops the reading.
            split::check_place(k, read.buf.as_ref(), &read.index, split, Some(p))?;
            parts.push(read);
        }
        Self::join(parts, split, Some(&paths))
    }
}

/// The `Io` error of `path`.
fn io_error(path: &Path, source: std::io::Error) -> GgufError {
    GgufError::Io {
        path: path.to_owned(),
        source,
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
    ///
    /// A part of a split set is read alone, as [`Gguf::open_part`] does.
    pub fn parse(buf: B) -> Result<Self> {
        let part = Part::new(buf)?;
        let split = split::keys(part.buf.as_ref(), &part.index)?;
        Ok(Self::single(part, split))
    }

    /// Parses and checks the parts of a split set, in part order (part 1 first),
    /// as [`Gguf::open`] checks the files of a set: one buffer of a file that is
    /// not split is that file.
    ///
    /// # Errors
    /// Any [`GgufError`] but the `Io` ones: a part that is not valid
    /// ([`GgufError::SplitPart`]), that is not in its place
    /// ([`GgufError::ForeignPart`]), more or fewer tensors than the set says.
    pub fn from_parts(bufs: Vec<B>) -> Result<Self> {
        let n = bufs.len();
        let count = u16::try_from(n).ok().filter(|&c| c > 0);
        let count = count.ok_or(GgufError::SplitRange {
            no: 0,
            count: n as u64,
        })?;
        let mut parts = Vec::with_capacity(n);
        for (k, buf) in bufs.into_iter().enumerate() {
            let wrap = |e| match n {
                1 => e,
                _ => split::in_part(k as u32 + 1, count, None, e),
            };
            parts.push(Part::new(buf).map_err(wrap)?);
        }
        let first = split::keys(parts[0].buf.as_ref(), &parts[0].index)?;
        let expected = Split {
            no: 0,
            count,
            tensors: first.map_or(0, |s| s.tensors),
        };
        if first.is_none() && n == 1 {
            return Ok(Self::single(parts.remove(0), None));
        }
        Self::join(parts, expected, None)
    }

    /// One file as it is.
    fn single(mut part: Part<B>, split: Option<Split>) -> Self {
        let tensors = std::mem::take(&mut part.index.tensors);
        Gguf {
            parts: vec![part],
            tensors,
            split,
        }
    }

    /// The parts of set `split` (part k at index k), checked ([`split::join`]).
    fn join(mut parts: Vec<Part<B>>, split: Split, paths: Option<&[PathBuf]>) -> Result<Self> {
        let mut views: Vec<(&[u8], &mut Index)> = (parts.iter_mut())
            .map(|Part { buf, index }| {
                let buf: &B = buf;
                (buf.as_ref(), index)
            })
            .collect();
        let tensors = split::join(&mut views, split, paths)?;
        let split = Some(Split { no: 0, ..split });
        Ok(Gguf {
            parts,
            tensors,
            split,
        })
    }

    /// The first file read: part 1 of a split set.
    fn head(&self) -> &Part<B> {
        &self.parts[0]
    }

    /// The bytes of the first file (part 1 of a split set).
    pub fn bytes(&self) -> &[u8] {
        self.head().buf.as_ref()
    }

    /// The files read: the parts of a split set, or 1.
    pub fn part_count(&self) -> usize {
        self.parts.len()
    }

    /// The split keys: of part 1 for a split set read whole (`no` 0), of the part
    /// for one read alone; `None` for a file that is not split.
    pub fn split(&self) -> Option<Split> {
        self.split
    }

    /// The format version (2 or 3) of the first file.
    pub fn version(&self) -> u32 {
        self.head().index.version
    }

    /// The data alignment (`general.alignment`, default 32) of the first file.
    pub fn alignment(&self) -> u32 {
        self.head().index.alignment
    }

    /// The file offset of the first file's data section.
    pub fn data_offset(&self) -> usize {
        self.head().index.data_start
    }

    /// The number of metadata entries.
    pub fn metadata_len(&self) -> usize {
        self.head().index.kvs.len()
    }

    /// The metadata entries in file order (part 1's for a split set).
    pub fn metadata(&self) -> impl Iterator<Item = (&str, MetaValue<'_>)> {
        self.head().index.metadata(self.bytes())
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<MetaValue<'_>> {
        self.head().index.get(self.bytes(), key)
    }

    /// `general.architecture`, when it is a UTF-8 string.
    pub fn architecture(&self) -> Option<&str> {
        self.get("general.architecture")?.as_str()
    }

    /// The tensors in file order (of every part, in part order).
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The tensor called `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// A tensor's bytes, borrowed from the file (of its part).
    ///
    /// # Errors
    /// [`GgufError::UnsupportedType`] for a type id ggml does not define (its size is
    /// unknown); [`GgufError::DataOutOfFile`] for a `TensorInfo` of another file that
    /// does not fit this one.
    pub fn tensor_data(&self, t: &TensorInfo) -> Result<&[u8]> {
        let size = t.size.ok_or_else(|| t.unsupported())?;
        let data = (self.parts.get(t.part))
            .and_then(|p| p.buf.as_ref().get(p.index.data_start..))
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
