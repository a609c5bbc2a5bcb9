//! Reading a GGUF file front to back: header, metadata, tensor infos, then the
//! layout checks on the data section.

use std::collections::HashSet;

use super::cursor::Cursor;
use super::error::{GgufError, Result};
use super::metadata::{MetaValue, ValueType, read_type, read_value};
use super::tensor::{MAX_DIMS, TensorInfo, byte_size};

/// `GGUF` as the first four bytes.
const MAGIC: [u8; 4] = *b"GGUF";
/// The alignment when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u32 = 32;
/// The fewest bytes of a tensor info: name length, dim count, type, offset.
const MIN_TENSOR_INFO: usize = 8 + 4 + 4 + 8;
/// The fewest bytes of a metadata entry: key length, value type, a one-byte value.
const MIN_KV: usize = 8 + 4 + 1;

/// A metadata entry: its key and where its value lies in the file.
#[derive(Clone, Debug)]
pub(crate) struct KvEntry {
    pub(crate) key: String,
    pub(crate) ty: ValueType,
    /// The file offset of the value.
    pub(crate) offset: usize,
}

/// What the header, metadata and tensor infos say, all checked.
#[derive(Clone, Debug)]
pub(crate) struct Index {
    pub(crate) version: u32,
    pub(crate) alignment: u32,
    pub(crate) data_start: usize,
    pub(crate) kvs: Vec<KvEntry>,
    pub(crate) tensors: Vec<TensorInfo>,
}

impl Index {
    /// The metadata entries of `buf` (the bytes this index was read from) in file
    /// order.
    pub(crate) fn metadata<'a>(
        &'a self,
        buf: &'a [u8],
    ) -> impl Iterator<Item = (&'a str, MetaValue<'a>)> + 'a {
        self.kvs.iter().filter_map(move |kv| {
            let mut cur = Cursor::at(buf, kv.offset);
            // Read once already when the file was checked: cannot fail here.
            let value = read_value(&mut cur, kv.ty, &kv.key, 0).ok()?;
            Some((kv.key.as_str(), value))
        })
    }

    /// The value of `key` in `buf` (the bytes this index was read from).
    pub(crate) fn get<'a>(&'a self, buf: &'a [u8], key: &str) -> Option<MetaValue<'a>> {
        self.metadata(buf).find(|(k, _)| *k == key).map(|(_, v)| v)
    }
}

/// Reads and checks everything but the tensor data itself.
pub(crate) fn parse(buf: &[u8]) -> Result<Index> {
    let mut cur = Cursor::at(buf, 0);
    let version = header(&mut cur)?;
    let n_tensors = cur.count("tensor", MIN_TENSOR_INFO)?;
    let n_kvs = cur.count("metadata key", MIN_KV)?;
    let (kvs, alignment) = metadata(&mut cur, n_kvs)?;
    let tensors = tensor_infos(&mut cur, n_tensors)?;
    // The data section starts at the next multiple of the alignment (none past the
    // end of the address space: then the section is empty).
    let data_start = cur
        .pos()
        .checked_next_multiple_of(alignment as usize)
        .unwrap_or(usize::MAX);
    let data_len = buf.len().saturating_sub(data_start) as u64;
    check_layout(&tensors, alignment, data_len)?;
    Ok(Index {
        version,
        alignment,
        data_start,
        kvs,
        tensors,
    })
}

/// Magic and version (2 or 3; both share this layout).
fn header(cur: &mut Cursor<'_>) -> Result<u32> {
    // A file shorter than the magic is not a GGUF file either.
    let magic = cur.take(cur.remaining().min(4) as u64, "magic")?;
    if magic != MAGIC {
        return Err(GgufError::BadMagic {
            found: magic.to_vec(),
        });
    }
    let version = cur.u32("version")?;
    match version {
        2 | 3 => Ok(version),
        v if matches!(v.swap_bytes(), 2 | 3) => Err(GgufError::BigEndian {
            version: v.swap_bytes(),
        }),
        v => Err(GgufError::UnsupportedVersion { version: v }),
    }
}

/// The metadata entries and `general.alignment`.
fn metadata(cur: &mut Cursor<'_>, n_kvs: u64) -> Result<(Vec<KvEntry>, u32)> {
    let mut kvs = Vec::new();
    let mut seen = HashSet::new();
    let mut alignment = DEFAULT_ALIGNMENT;
    for _ in 0..n_kvs {
        let key = cur.utf8("metadata key")?;
        let ty = read_type(cur, key)?;
        let offset = cur.pos();
        let value = read_value(cur, ty, key, 0)?;
        if !seen.insert(key) {
            return Err(GgufError::DuplicateKey {
                key: key.to_owned(),
            });
        }
        if key == "general.alignment" {
            alignment = checked_alignment(value)?;
        }
        kvs.push(KvEntry {
            key: key.to_owned(),
            ty,
            offset,
        });
    }
    Ok((kvs, alignment))
}

/// `general.alignment`: a u32, nonzero, a power of two.
fn checked_alignment(value: MetaValue<'_>) -> Result<u32> {
    match value {
        MetaValue::U32(a) if a.is_power_of_two() => Ok(a),
        MetaValue::U32(a) => Err(GgufError::BadAlignment { alignment: a }),
        v => Err(GgufError::AlignmentType {
            found: v.value_type().name(),
        }),
    }
}

/// The tensor infos, each with its byte size checked.
fn tensor_infos(cur: &mut Cursor<'_>, n_tensors: u64) -> Result<Vec<TensorInfo>> {
    let mut tensors = Vec::new();
    let mut seen = HashSet::new();
    for _ in 0..n_tensors {
        let name = cur.utf8("tensor name")?;
        let n_dims = cur.u32("tensor dimension count")?;
        if n_dims as usize > MAX_DIMS {
            return Err(GgufError::TooManyDims {
                name: name.to_owned(),
                n_dims,
            });
        }
        let ne = (0..n_dims)
            .map(|_| cur.u64("tensor dimension"))
            .collect::<Result<Vec<_>>>()?;
        let type_id = cur.u32("tensor type")?;
        let offset = cur.u64("tensor offset")?;
        if !seen.insert(name) {
            return Err(GgufError::DuplicateTensor {
                name: name.to_owned(),
            });
        }
        let size = byte_size(name, &ne, type_id)?;
        tensors.push(TensorInfo {
            name: name.to_owned(),
            ne,
            type_id,
            offset,
            size,
            part: 0,
        });
    }
    Ok(tensors)
}

/// Every tensor aligned, inside the data section, and no two overlapping.
fn check_layout(tensors: &[TensorInfo], alignment: u32, data_len: u64) -> Result<()> {
    let mut spans = Vec::with_capacity(tensors.len());
    for t in tensors {
        if !t.offset.is_multiple_of(u64::from(alignment)) {
            return Err(GgufError::MisalignedTensor {
                name: t.name.clone(),
                offset: t.offset,
                alignment,
            });
        }
        let size = t.size.unwrap_or(0) as u64;
        let end = t.offset.checked_add(size).filter(|&e| e <= data_len);
        let Some(end) = end else {
            return Err(GgufError::DataOutOfFile {
                name: t.name.clone(),
                offset: t.offset,
                size,
                data_len,
            });
        };
        if size > 0 {
            spans.push((t.offset, end, t.name.as_str()));
        }
    }
    spans.sort_unstable();
    for w in spans.windows(2) {
        if w[1].0 < w[0].1 {
            return Err(GgufError::Overlap {
                first: w[0].2.to_owned(),
                second: w[1].2.to_owned(),
            });
        }
    }
    Ok(())
}
