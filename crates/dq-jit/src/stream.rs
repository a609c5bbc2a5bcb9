//! Streaming a block computed in a small buffer to dst with non-temporal stores, so
//! large outputs are written without first reading each destination line.

/// Bytes of the per-thread staging buffer (stays in L1).
pub const BLOCK_BYTES: usize = 16 * 1024;

/// A 16-byte aligned staging buffer.
#[repr(C, align(64))]
pub struct Block(pub [u8; BLOCK_BYTES]);

/// Copies `src` to `dst` with non-temporal stores for the 16-byte aligned middle.
///
/// # Safety
/// `dst` must be valid for writes of `src.len()` bytes and not overlap `src`.
pub unsafe fn copy_nt(dst: *mut u8, src: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        let n = src.len();
        let head = (dst.align_offset(16)).min(n);
        let body = (n - head) / 16;
        // SAFETY: all offsets are below `n`; `dst` is valid for `n` bytes (caller).
        unsafe {
            core::ptr::copy_nonoverlapping(src.as_ptr(), dst, head);
            for i in 0..body {
                let o = head + 16 * i;
                let v = _mm_loadu_si128(src.as_ptr().add(o).cast::<__m128i>());
                // `dst + o` is 16-byte aligned by construction of `head`.
                _mm_stream_si128(dst.add(o).cast::<__m128i>(), v);
            }
            let done = head + 16 * body;
            core::ptr::copy_nonoverlapping(src.as_ptr().add(done), dst.add(done), n - done);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: as the caller promised.
    unsafe {
        core::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len());
    }
}

/// Orders the streaming stores before anything the caller does next.
pub fn fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `sfence` has no preconditions (SSE is baseline on x86-64).
    unsafe {
        core::arch::x86_64::_mm_sfence()
    };
}
