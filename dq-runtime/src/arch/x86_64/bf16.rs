//! The AVX-512 bf16 rounding, one vector ([`rne_hi`]) or two packed into one
//! 64-byte store ([`pack`]).
//!
//! Where the CPU has AVX512-BF16, `vcvtne2ps2bf16` converts both vectors in one
//! instruction. It rounds to nearest-even and quiets NaNs (`bits >> 16 | 0x40`)
//! exactly as [`f32_to_bf16_bits`](crate::convert::f32_to_bf16_bits) does, but
//! treats subnormal inputs as zero: lanes holding a subnormal take the integer
//! rounding instead (a rare branch). Elsewhere the integer rounding of both
//! vectors is packed by one word permute.
//!
//! The instruction is emitted by `asm!`, so kernels compiled for plain AVX-512
//! use it where the [`Avx512`](super::Avx512) token found the feature.

use core::arch::asm;
use core::arch::x86_64::*;

use crate::minifloat::NAN_BITS;

/// The bf16 bits of each lane of `y` in its high 16 bits: the integer
/// nearest-even rounding of
/// [`f32_to_bf16_bits`](crate::convert::f32_to_bf16_bits), NaNs quieted.
///
/// # Safety
/// The CPU has AVX-512F.
#[inline(always)]
pub(super) unsafe fn rne_hi(y: __m512) -> __m512i {
    // SAFETY: AVX-512F (caller).
    unsafe {
        let x = _mm512_castps_si512(y);
        let lsb = _mm512_and_si512(_mm512_srli_epi32::<16>(x), _mm512_set1_epi32(1));
        let r = _mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb);
        let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(y, y);
        _mm512_mask_or_epi32(r, nan, x, _mm512_set1_epi32(0x0040_0000))
    }
}

/// The bf16 of `a` (low 16 words) and `b` (high 16 words) by the integer
/// rounding.
///
/// # Safety
/// The CPU has AVX-512F and BW.
#[inline(always)]
pub(super) unsafe fn pack_int(a: __m512, b: __m512) -> __m512i {
    // SAFETY: AVX-512F/BW (caller).
    unsafe {
        // Word 2i + 1 of the concatenation (a, b): each lane's high half.
        let odd = _mm512_set_epi16(
            63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27, 25, 23, 21,
            19, 17, 15, 13, 11, 9, 7, 5, 3, 1,
        );
        _mm512_permutex2var_epi16(rne_hi(a), odd, rne_hi(b))
    }
}

/// `vcvtne2ps2bf16`: the bf16 of `a` (low 16 words) and `b` (high 16 words),
/// nearest-even, NaNs quieted, subnormal inputs as zero.
///
/// # Safety
/// The CPU has AVX512-BF16.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn cvtne2(a: __m512, b: __m512) -> __m512i {
    let h: __m512i;
    // SAFETY: AVX512-BF16 (caller); register operands only.
    unsafe {
        asm!(
            "vcvtne2ps2bf16 {h}, {b}, {a}",
            h = lateout(zmm_reg) h,
            a = in(zmm_reg) a,
            b = in(zmm_reg) b,
            options(pure, nomem, nostack, preserves_flags),
        );
    }
    h
}

/// As [`pack_int`], by [`cvtne2`] with subnormal lanes fixed up.
///
/// # Safety
/// The CPU has AVX-512F, BW, DQ and AVX512-BF16.
#[inline(always)]
pub(super) unsafe fn pack_cvt(a: __m512, b: __m512) -> __m512i {
    // SAFETY: AVX-512F/BW/DQ and AVX512-BF16 (caller).
    unsafe {
        let h = cvtne2(a, b);
        // fpclass 0x20: subnormal.
        let sub_a = _mm512_fpclass_ps_mask::<0x20>(a) as u32;
        let sub_b = _mm512_fpclass_ps_mask::<0x20>(b) as u32;
        let sub = sub_a | sub_b << 16;
        if sub == 0 {
            h
        } else {
            _mm512_mask_mov_epi16(h, sub, pack_int(a, b))
        }
    }
}

/// Stores the bf16 of `a` then `b` (32 values) at `p`: [`pack`].
///
/// # Safety
/// `p` is valid for writing 64 bytes; the CPU has AVX-512F, BW and DQ, and
/// AVX512-BF16 when `cvt` (the [`Avx512`](super::Avx512) token's).
#[inline(always)]
pub(super) unsafe fn store_x2(p: *mut u8, a: __m512, b: __m512, cvt: bool) {
    // SAFETY: the features and `p` are the caller's.
    unsafe { _mm512_storeu_si512(p.cast(), pack(a, b, cvt)) }
}

/// As [`store_x2`], with the bf16 of [`NAN_BITS`] in the lanes of `nan`.
///
/// # Safety
/// As [`store_x2`].
#[inline(always)]
pub(super) unsafe fn store_x2_nan(p: *mut u8, a: __m512, b: __m512, cvt: bool, nan: __mmask32) {
    // The bf16 rounding of a NaN: its top half, quieted.
    let q = (NAN_BITS >> 16) as i16 | 0x40;
    // SAFETY: the features and `p` are the caller's.
    unsafe {
        let h = _mm512_mask_mov_epi16(pack(a, b, cvt), nan, _mm512_set1_epi16(q));
        _mm512_storeu_si512(p.cast(), h)
    }
}

/// The bf16 of `a` (low 16 words) and `b` (high 16 words), by [`pack_cvt`] when
/// `cvt`, else by [`pack_int`].
///
/// # Safety
/// As [`store_x2`], without `p`.
#[inline(always)]
pub(super) unsafe fn pack(a: __m512, b: __m512, cvt: bool) -> __m512i {
    // SAFETY: the features are the caller's.
    unsafe { if cvt { pack_cvt(a, b) } else { pack_int(a, b) } }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::f32_to_bf16_bits;

    /// Every bf16 pattern with low halves at and around the ties, and the f32
    /// neighbours of every f16-sized step: subnormals, infinities and NaNs of
    /// every payload among them.
    fn inputs() -> Vec<f32> {
        let mut v = Vec::new();
        for hi in 0..=u16::MAX as u32 {
            for lo in [0, 1, 0x7fff, 0x8000, 0x8001, 0xc000, 0xffff] {
                v.push(f32::from_bits(hi << 16 | lo));
            }
        }
        v
    }

    /// `pack` over `xs` 32 at a time (a trailing partial chunk is left out).
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,f16c")]
    fn convert(xs: &[f32], pack: unsafe fn(__m512, __m512) -> __m512i) -> Vec<u16> {
        let mut out = Vec::new();
        for c in xs.chunks_exact(32) {
            // SAFETY: `c` holds 32 f32; the caller checked the features.
            let w: [u16; 32] = unsafe {
                let h = pack(
                    _mm512_loadu_ps(c.as_ptr()),
                    _mm512_loadu_ps(c.as_ptr().add(16)),
                );
                core::mem::transmute(h)
            };
            out.extend(w);
        }
        out
    }

    fn check(name: &str, pack: unsafe fn(__m512, __m512) -> __m512i) {
        let xs = inputs();
        // SAFETY: the callers checked the features.
        let got = unsafe { convert(&xs, pack) };
        for (x, g) in xs.iter().zip(&got) {
            let want = f32_to_bf16_bits(*x);
            assert_eq!(*g, want, "{name}: bf16 of {:#010x}", x.to_bits());
        }
    }

    fn avx512() -> bool {
        crate::arch::Isa::Avx512.available()
    }

    #[test]
    fn integer_pairs_match_the_reference_rounding() {
        if !avx512() {
            eprintln!("SKIPPED: bf16 pair stores: avx512 not available on this CPU");
            return;
        }
        check("pack_int", |a, b| unsafe { pack_int(a, b) });
    }

    #[test]
    fn cvtne2ps2bf16_pairs_match_the_reference_rounding() {
        if !(avx512() && std::arch::is_x86_feature_detected!("avx512bf16")) {
            eprintln!("SKIPPED: vcvtne2ps2bf16 pair stores: avx512bf16 not available on this CPU");
            return;
        }
        check("pack_cvt", |a, b| unsafe { pack_cvt(a, b) });
    }
}
