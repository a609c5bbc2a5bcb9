//! One `.safetensors` file, read or memory-mapped, its header checked against the
//! file's size before any view is made.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::formats::input::{self, FileBytes};
use safetensors::tensor::{Metadata, TensorInfo};
use safetensors::{Dtype, SafeTensorError, SafeTensors};

use super::error::{HfError, Result};

/// The safetensors crate's cap on the JSON header (checked before it allocates).
pub(crate) const MAX_HEADER: u64 = 100_000_000;

/// A file's bytes and its validated header.
pub(crate) struct Shard {
    /// The file.
    pub path: PathBuf,
    /// Its bytes.
    map: FileBytes,
    /// Where the data section starts (8 + header length).
    data_start: usize,
    /// `__metadata__`.
    pub metadata: HashMap<String, String>,
}

/// A tensor's place in a shard: its bytes are `shard.data()[start..end]`.
pub(crate) struct Entry {
    /// Index of the shard in the checkpoint.
    pub shard: usize,
    /// Element type.
    pub dtype: Dtype,
    /// Shape.
    pub shape: Vec<usize>,
    /// Byte range in the data section, validated against it.
    pub start: usize,
    /// End of that range.
    pub end: usize,
}

impl Shard {
    /// Reads (`mapped == false`) or maps `path` and validates its header: every tensor's
    /// offsets lie inside the data section, which they cover exactly, and each tensor's
    /// size matches dtype × shape.
    ///
    /// # Safety
    /// With `mapped`, the file must not be modified while the `Shard` lives
    /// ([`input::map`]'s contract).
    pub unsafe fn open(path: &Path, mapped: bool) -> Result<(Shard, Vec<(String, TensorInfo)>)> {
        let io = |source| HfError::Io {
            path: path.to_owned(),
            source,
        };
        let map = if mapped {
            // SAFETY: the caller keeps the file unmodified while the `Shard` lives.
            unsafe { input::map(path) }
        } else {
            input::read_aligned(path)
        }
        .map_err(io)?;
        let (n, metadata) = read_header(path, map.as_ref())?;
        let data_start = 8 + n;
        let mut tensors: Vec<(String, TensorInfo)> = metadata
            .tensors()
            .into_iter()
            .map(|(name, info)| (name, info.clone()))
            .collect();
        tensors.sort_by(|a, b| a.0.cmp(&b.0));
        let shard = Shard {
            path: path.to_owned(),
            map,
            data_start,
            metadata: metadata.metadata().clone().unwrap_or_default(),
        };
        Ok((shard, tensors))
    }

    /// The data section (after the header).
    pub fn data(&self) -> &[u8] {
        &self.map.as_ref()[self.data_start..]
    }
}

/// Validates the header; `(header length, metadata)`.
fn read_header(path: &Path, bytes: &[u8]) -> Result<(usize, Metadata)> {
    let file_len = bytes.len() as u64;
    let Some(len_bytes) = bytes.first_chunk::<8>() else {
        return Err(HfError::TruncatedHeader {
            path: path.to_owned(),
            file_len,
            needed: 8,
        });
    };
    let header_len = u64::from_le_bytes(*len_bytes);
    if header_len > MAX_HEADER {
        return Err(HfError::HeaderTooLarge {
            path: path.to_owned(),
            header_len,
            limit: MAX_HEADER,
        });
    }
    if 8 + header_len > file_len {
        return Err(HfError::TruncatedHeader {
            path: path.to_owned(),
            file_len,
            needed: 8 + header_len,
        });
    }
    match SafeTensors::read_metadata(bytes) {
        Ok(ok) => Ok(ok),
        Err(SafeTensorError::MetadataIncompleteBuffer) => {
            Err(data_length_error(path, bytes, header_len as usize))
        }
        Err(source) => Err(HfError::Safetensors {
            path: path.to_owned(),
            source,
        }),
    }
}

/// The tensors' offsets are consistent but do not end where the file does: name the first
/// tensor that runs past the end, or report trailing bytes.
fn data_length_error(path: &Path, bytes: &[u8], header_len: usize) -> HfError {
    let data_len = (bytes.len() - 8 - header_len) as u64;
    // `read_metadata` parsed and validated this header before it compared lengths.
    let parsed: std::result::Result<Metadata, _> =
        serde_json::from_slice(&bytes[8..8 + header_len]);
    let Ok(metadata) = parsed else {
        return HfError::Safetensors {
            path: path.to_owned(),
            source: SafeTensorError::MetadataIncompleteBuffer,
        };
    };
    let past_end = metadata
        .tensors()
        .into_iter()
        .map(|(name, info)| (info.data_offsets, name))
        .filter(|((_, end), _)| *end as u64 > data_len)
        .min();
    match past_end {
        Some(((_, end), tensor)) => HfError::OffsetsPastEnd {
            path: path.to_owned(),
            tensor,
            end: end as u64,
            data_len,
        },
        None => HfError::TrailingData {
            path: path.to_owned(),
            end: metadata.data_len() as u64,
            data_len,
        },
    }
}
