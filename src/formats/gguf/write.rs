//! A minimal GGUF writer: one tensor, no metadata. For tests, benches and
//! examples that need a file around blocks they made; dq itself only reads GGUF.

use super::parse::DEFAULT_ALIGNMENT;
use super::types::GgmlType;

/// A GGUF v3 file holding one tensor `name` of type `ty` with dims `ne` (ggml
/// order, innermost first) whose data is `data`, at offset 0 of the data section
/// (aligned to [`DEFAULT_ALIGNMENT`]).
///
/// ```
/// use dq::formats::gguf::{GgmlType, Gguf, one_tensor_file};
/// // One Q8_0 block: d = 1.0 (f16 0x3C00), then 32 signed bytes.
/// let mut block = vec![0x00, 0x3C];
/// block.extend((0..32u8).map(|i| i.wrapping_sub(16)));
/// let file = one_tensor_file("w", GgmlType::Q8_0, &[32], &block);
/// let g = Gguf::from_bytes(&file)?;
/// assert_eq!((g.tensors()[0].name(), g.tensors()[0].element_count()), ("w", 32));
/// # Ok::<(), dq::formats::gguf::GgufError>(())
/// ```
pub fn one_tensor_file(name: &str, ty: GgmlType, ne: &[u64], data: &[u8]) -> Vec<u8> {
    let mut f = b"GGUF".to_vec();
    f.extend(3u32.to_le_bytes());
    f.extend(1u64.to_le_bytes()); // tensors
    f.extend(0u64.to_le_bytes()); // metadata entries
    f.extend((name.len() as u64).to_le_bytes());
    f.extend(name.as_bytes());
    f.extend((ne.len() as u32).to_le_bytes());
    ne.iter().for_each(|n| f.extend(n.to_le_bytes()));
    f.extend(ty.id().to_le_bytes());
    f.extend(0u64.to_le_bytes()); // data offset
    f.resize(f.len().next_multiple_of(DEFAULT_ALIGNMENT as usize), 0);
    f.extend_from_slice(data);
    f
}
