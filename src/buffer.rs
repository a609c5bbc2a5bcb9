//! Large output buffers on transparent huge pages.
//!
//! A dequantized tensor is written once, front to back, into memory that is often
//! fresh: every 4 KiB page costs a fault and a TLB miss, which under
//! virtualization shows in the bandwidth. [`zeroed`] allocates a zeroed `Vec`
//! whose pages are advised for huge pages (Linux `MADV_HUGEPAGE`) before they are
//! first touched, as NumPy does for its large arrays. Elsewhere, or where the
//! kernel keeps THP off, it is an ordinary zeroed `Vec`.
//!
//! On a 2-vCPU AMD EPYC (Zen 4) VM, `dq bench` s8 -> f32 4096x4096 ran markedly
//! faster with its buffers advised (BENCHMARKS.md).
//!
//! ```
//! let mut out: Vec<f32> = dq::buffer::zeroed(1 << 20);
//! assert!(out.iter().all(|&x| x == 0.0));
//! out[0] = 1.0;
//! ```

use bytemuck::Zeroable;

/// A zeroed `Vec` of `n` elements, its whole pages advised for transparent huge
/// pages before first touch (a hint: see the module docs).
pub fn zeroed<T: Zeroable + Clone>(n: usize) -> Vec<T> {
    let mut v = vec![T::zeroed(); n];
    advise_huge_pages(&mut v);
    v
}

/// Advises the whole pages of `v` for transparent huge pages. Pages already
/// touched keep their size until the kernel collapses them; contents never
/// change. A no-op off Linux and for buffers under 2 MiB.
pub fn advise_huge_pages<T>(v: &mut [T]) {
    #[cfg(target_os = "linux")]
    {
        const PAGE: usize = 4096;
        let (start, len) = (v.as_mut_ptr() as usize, size_of_val(v));
        let first = start.next_multiple_of(PAGE);
        let end = (start + len) / PAGE * PAGE;
        if len >= 2 << 20 && end > first {
            // SAFETY: the range is whole pages inside `v`'s allocation, which `&mut`
            // makes ours; MADV_HUGEPAGE changes how later faults are served, never
            // the contents or the mapping's protection.
            unsafe { libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = v;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_zeroed_and_writable() {
        for n in [0, 1, 1000, 3 << 20] {
            let mut v: Vec<u16> = zeroed(n);
            assert_eq!(v.len(), n);
            assert!(v.iter().all(|&x| x == 0));
            v.iter_mut().enumerate().for_each(|(i, x)| *x = i as u16);
            advise_huge_pages(&mut v);
            assert!(
                v.iter().enumerate().all(|(i, &x)| x == i as u16),
                "contents kept"
            );
        }
    }
}
