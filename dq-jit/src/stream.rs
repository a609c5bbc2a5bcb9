//! Streaming a block computed in a small buffer to dst with non-temporal stores, so
//! large outputs are written without first reading each destination line.
//!
//! The copy uses the widest stream store the CPU has (detected once): 64-byte
//! AVX-512 stores write a whole cache line per instruction.

/// Bytes of the per-thread staging buffer (stays in L1).
pub const BLOCK_BYTES: usize = 16 * 1024;

/// A 64-byte aligned staging buffer.
#[repr(C, align(64))]
pub struct Block(pub [u8; BLOCK_BYTES]);

/// A block copy: `(dst, src)`, with [`copy_nt`]'s contract.
#[cfg(any(target_arch = "x86_64", test))]
type CopyFn = unsafe fn(*mut u8, &[u8]);

/// Copies `src` to `dst` with non-temporal stores for the aligned middle.
///
/// # Safety
/// `dst` must be valid for writes of `src.len()` bytes and not overlap `src`.
pub unsafe fn copy_nt(dst: *mut u8, src: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::sync::OnceLock;
        static PICK: OnceLock<CopyFn> = OnceLock::new();
        let f = PICK.get_or_init(|| {
            if std::arch::is_x86_feature_detected!("avx512f") {
                x86::copy_avx512
            } else if std::arch::is_x86_feature_detected!("avx") {
                x86::copy_avx
            } else {
                x86::copy_sse2
            }
        });
        // SAFETY: the pick matches the detected CPU; the rest is the caller's contract.
        unsafe { f(dst, src) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: as the caller promised.
    unsafe {
        core::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len());
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use core::arch::x86_64::*;

    /// Copies the unaligned head and tail with plain stores and hands the
    /// `align`-aligned middle, as (dst, src, count of `align` chunks), to `body`.
    ///
    /// # Safety
    /// As [`super::copy_nt`].
    #[inline(always)]
    unsafe fn split(
        dst: *mut u8,
        src: &[u8],
        align: usize,
        body: impl FnOnce(*mut u8, *const u8, usize),
    ) {
        let n = src.len();
        let head = dst.align_offset(align).min(n);
        let chunks = (n - head) / align;
        let done = head + align * chunks;
        // SAFETY: every offset is below `n`; `dst` is valid for `n` bytes (caller).
        unsafe {
            core::ptr::copy_nonoverlapping(src.as_ptr(), dst, head);
            body(dst.add(head), src.as_ptr().add(head), chunks);
            core::ptr::copy_nonoverlapping(src.as_ptr().add(done), dst.add(done), n - done);
        }
    }

    /// # Safety
    /// As [`super::copy_nt`], on a CPU with AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn copy_avx512(dst: *mut u8, src: &[u8]) {
        // SAFETY: `split` hands over `chunks` 64-byte chunks inside both buffers,
        // with `d` 64-byte aligned.
        unsafe {
            split(dst, src, 64, |d, s, chunks| {
                for i in 0..chunks {
                    let v = _mm512_loadu_si512(s.add(64 * i).cast());
                    _mm512_stream_si512(d.add(64 * i).cast(), v);
                }
            })
        }
    }

    /// # Safety
    /// As [`super::copy_nt`], on a CPU with AVX.
    #[target_feature(enable = "avx")]
    pub unsafe fn copy_avx(dst: *mut u8, src: &[u8]) {
        // SAFETY: as in `copy_avx512`, 32-byte chunks.
        unsafe {
            split(dst, src, 32, |d, s, chunks| {
                for i in 0..chunks {
                    let v = _mm256_loadu_si256(s.add(32 * i).cast());
                    _mm256_stream_si256(d.add(32 * i).cast(), v);
                }
            })
        }
    }

    /// # Safety
    /// As [`super::copy_nt`] (SSE2 is baseline on x86-64).
    pub unsafe fn copy_sse2(dst: *mut u8, src: &[u8]) {
        // SAFETY: as in `copy_avx512`, 16-byte chunks.
        unsafe {
            split(dst, src, 16, |d, s, chunks| {
                for i in 0..chunks {
                    let v = _mm_loadu_si128(s.add(16 * i).cast());
                    _mm_stream_si128(d.add(16 * i).cast(), v);
                }
            })
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every ISA's copy, at every head misalignment and odd lengths, copies exactly.
    #[test]
    fn copies_exactly_at_any_alignment() {
        let src: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        #[cfg(target_arch = "x86_64")]
        let mut copies: Vec<(&str, CopyFn)> = vec![("sse2", x86::copy_sse2)];
        #[cfg(target_arch = "x86_64")]
        for (name, f, ok) in [
            (
                "avx",
                x86::copy_avx as CopyFn,
                std::arch::is_x86_feature_detected!("avx"),
            ),
            (
                "avx512",
                x86::copy_avx512,
                std::arch::is_x86_feature_detected!("avx512f"),
            ),
        ] {
            if ok {
                copies.push((name, f));
            } else {
                eprintln!("SKIPPED: copy_nt {name}: not on this CPU");
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let copies: Vec<(&str, CopyFn)> = vec![("dispatch", copy_nt)];
        for (name, f) in copies {
            for off in 0..70 {
                for len in [0, 1, 15, 63, 64, 65, 200, 900] {
                    let mut dst = vec![0xaau8; 1100];
                    // SAFETY: dst holds off + len <= 970 bytes; no overlap.
                    unsafe { f(dst.as_mut_ptr().add(off), &src[..len]) };
                    fence();
                    assert_eq!(
                        &dst[off..off + len],
                        &src[..len],
                        "{name} off {off} len {len}"
                    );
                    assert!(
                        dst[..off].iter().all(|&b| b == 0xaa),
                        "{name}: wrote before"
                    );
                    assert!(
                        dst[off + len..].iter().all(|&b| b == 0xaa),
                        "{name}: wrote after"
                    );
                }
            }
        }
    }
}
