//! The per-thread staging block a kernel computes into when its results do not go
//! straight to dst: streamed outputs (copied on with
//! [`arch::stream_copy`](dq_runtime::arch::stream_copy)) and f32 results converted
//! to f16.

/// Bytes of the per-thread staging buffer (stays in L1).
pub const BLOCK_BYTES: usize = 16 * 1024;

/// A 64-byte aligned staging buffer.
#[repr(C, align(64))]
pub struct Block(pub [u8; BLOCK_BYTES]);

/// `bytes` as f32 values.
///
/// # Panics
/// If `bytes` is not 4-byte aligned or not whole f32 values.
pub fn as_f32s(bytes: &[u8]) -> &[f32] {
    assert!(bytes.as_ptr().cast::<f32>().is_aligned() && bytes.len().is_multiple_of(4));
    // SAFETY: aligned and in bounds (asserted); every bit pattern is an f32.
    unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast(), bytes.len() / 4) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_reads_as_f32s() {
        let mut b = Block([0; BLOCK_BYTES]);
        b.0[4..8].copy_from_slice(&1.5f32.to_ne_bytes());
        assert_eq!(as_f32s(&b.0[..8]), [0.0, 1.5]);
        assert_eq!(as_f32s(&b.0).len(), BLOCK_BYTES / 4);
    }
}
