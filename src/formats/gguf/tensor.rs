//! Tensor infos: name, `ne`, type and where the bytes are.

use super::error::{GgufError, Result};
use super::types::GgmlType;

/// Most dimensions a GGUF tensor has (`GGML_MAX_DIMS`).
pub const MAX_DIMS: usize = 4;

/// One tensor of a GGUF file, as its tensor info describes it (checked).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub(crate) name: String,
    pub(crate) ne: Vec<u64>,
    pub(crate) type_id: u32,
    pub(crate) offset: u64,
    pub(crate) size: Option<usize>,
    /// The file of a split set holding the data (0-based; 0 for a single file).
    pub(crate) part: usize,
}

impl TensorInfo {
    /// The tensor's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// ggml's `ne`: the dims with the fastest-varying first, as stored.
    pub fn ne(&self) -> &[u64] {
        &self.ne
    }

    /// The row-major shape: `ne` reversed (the last dim is the row, `ne[0]`).
    pub fn shape(&self) -> Vec<u64> {
        self.ne.iter().rev().copied().collect()
    }

    /// The number of elements (checked not to overflow when the file was read).
    pub fn element_count(&self) -> u64 {
        self.ne.iter().product()
    }

    /// The raw type id.
    pub fn type_id(&self) -> u32 {
        self.type_id
    }

    /// The type, when ggml defines the id.
    pub fn ggml_type(&self) -> Option<GgmlType> {
        GgmlType::from_id(self.type_id)
    }

    /// The type's name, or `id <id>` for an id ggml does not define.
    pub fn type_name(&self) -> String {
        match self.ggml_type() {
            Some(t) => t.name().to_owned(),
            None => format!("id {}", self.type_id),
        }
    }

    /// Whether dq decodes this tensor's type.
    pub fn is_supported(&self) -> bool {
        self.ggml_type().is_some_and(GgmlType::is_supported)
    }

    /// Bytes of data; `None` for a type ggml does not define (its size is unknown).
    pub fn byte_size(&self) -> Option<usize> {
        self.size
    }

    /// The data's offset from the start of the data section (of its part's file).
    pub fn data_offset(&self) -> u64 {
        self.offset
    }

    /// The file of a split set that holds the data: 0-based, in `split.no` order
    /// (0 for a single file; see [`super::Split`]).
    pub fn part(&self) -> usize {
        self.part
    }

    /// The `UnsupportedType` error for this tensor.
    pub(crate) fn unsupported(&self) -> GgufError {
        GgufError::UnsupportedType {
            name: self.name.clone(),
            ty: self.type_name(),
        }
    }
}

/// Checks `ne` (each dim and the element count within `i64::MAX`, as ggml) and
/// returns the byte size for a known type: whole blocks per row, no overflow.
pub(crate) fn byte_size(name: &str, ne: &[u64], type_id: u32) -> Result<Option<usize>> {
    let overflow = || GgufError::ShapeOverflow {
        name: name.to_owned(),
        ne: ne.to_vec(),
    };
    let elements = ne
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= i64::MAX as u64 && ne.iter().all(|&d| d <= i64::MAX as u64))
        .ok_or_else(overflow)?;
    let Some(ty) = GgmlType::from_id(type_id) else {
        return Ok(None);
    };
    let block = ty.block_size() as u64;
    let ne0 = ne.first().copied().unwrap_or(1);
    if !ne0.is_multiple_of(block) {
        return Err(GgufError::PartialBlock {
            name: name.to_owned(),
            ty,
            ne0,
            block: ty.block_size(),
        });
    }
    let bytes = (elements / block)
        .checked_mul(ty.type_size() as u64)
        .and_then(|b| usize::try_from(b).ok())
        .ok_or_else(overflow)?;
    Ok(Some(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_overflow() {
        assert_eq!(byte_size("t", &[256, 3], 12).unwrap(), Some(3 * 144));
        assert_eq!(byte_size("t", &[8], 0).unwrap(), Some(32));
        assert_eq!(byte_size("t", &[0, 5], 2).unwrap(), Some(0));
        assert_eq!(byte_size("t", &[7], 999).unwrap(), None);
        assert!(matches!(
            byte_size("t", &[33], 2),
            Err(GgufError::PartialBlock { ne0: 33, .. })
        ));
        for ne in [[1u64 << 32, 1 << 32], [u64::MAX, 0], [1 << 63, 1]] {
            assert!(matches!(
                byte_size("t", &ne, 0),
                Err(GgufError::ShapeOverflow { .. })
            ));
        }
        // Elements fit i64 but bytes do not fit u64.
        assert!(matches!(
            byte_size("t", &[1 << 62], 0),
            Err(GgufError::ShapeOverflow { .. })
        ));
    }
}
