//! Float src decoding by bit manipulation (SPEC §10), shared by both widths: the
//! f8 codes are rewritten as f16 bit patterns in 16-bit lanes ([`Words`], half a
//! vector) and widened exactly by F16C's `vcvtph2ps`, which turns f16 subnormals
//! into f32 normals (no subnormal f32 is ever an operand).
//!
//! - f8_e5m2 is the high byte of an f16.
//! - f8_e4m3 `s eeee mmm` becomes the f16 `s 0eeee mmm0000000`: the f16 value is
//!   the e4m3 value times 2^-8 (bias 15 against 7), subnormals included, so one
//!   exact multiply by 256 finishes it. Codes `0x7f` / `0xff` become the f16 NaN
//!   `0xffff` first.
//!
//! A NaN code gives some NaN; the kernels write [`NAN_BITS`] for it
//! ([`Lanes::nan_or`](crate::arch::Lanes::nan_or)).
//!
//! [`NAN_BITS`]: crate::minifloat::NAN_BITS

use core::arch::x86_64::*;

use super::{Avx2, Avx512};
use crate::arch::Simd;

/// 16-bit lane operations on the f16 codes of `LANES` elements.
pub(super) trait Words: Simd {
    /// `LANES` 16-bit lanes.
    type W: Copy;
    /// `LANES` bytes at `p`, zero-extended.
    ///
    /// # Safety
    /// `p` is valid for reading `LANES` bytes.
    unsafe fn load_words(self, p: *const u8) -> Self::W;
    /// Every lane `x`.
    fn splat_w(self, x: i16) -> Self::W;
    /// `a & b`.
    fn and_w(self, a: Self::W, b: Self::W) -> Self::W;
    /// `a | b`.
    fn or_w(self, a: Self::W, b: Self::W) -> Self::W;
    /// All ones where `a == b`.
    fn eq_w(self, a: Self::W, b: Self::W) -> Self::W;
    /// `a << 8`.
    fn shl8_w(self, a: Self::W) -> Self::W;
    /// `a >> 1`, arithmetic.
    fn sar1_w(self, a: Self::W) -> Self::W;
    /// The f16 values of `h`, widened exactly.
    fn f16_w(self, h: Self::W) -> Self::Float;
}

/// `LANES` f8_e5m2 codes at `p`.
///
/// # Safety
/// `p` is valid for reading `LANES` bytes.
#[inline(always)]
pub(super) unsafe fn e5m2<V: Words>(v: V, p: *const u8) -> V::Float {
    // SAFETY: forwarded from the caller.
    let w = unsafe { v.load_words(p) };
    v.f16_w(v.shl8_w(w))
}

/// `LANES` f8_e4m3 codes at `p`, NaN codes as any value (480).
///
/// # Safety
/// `p` is valid for reading `LANES` bytes.
#[inline(always)]
pub(super) unsafe fn e4m3_any<V: Words>(v: V, p: *const u8) -> V::Float {
    // SAFETY: forwarded from the caller.
    let w = unsafe { v.load_words(p) };
    let h = v.and_w(v.sar1_w(v.shl8_w(w)), v.splat_w(0xbfff_u16 as i16));
    v.mul(v.f16_w(h), v.splat_float(256.0))
}

/// `LANES` f8_e4m3 codes at `p`.
///
/// # Safety
/// `p` is valid for reading `LANES` bytes.
#[inline(always)]
pub(super) unsafe fn e4m3<V: Words>(v: V, p: *const u8) -> V::Float {
    // SAFETY: forwarded from the caller.
    let w = unsafe { v.load_words(p) };
    // s eeee mmm -> s s eeee mmm 0000000, then bit 14 cleared.
    let h = v.and_w(v.sar1_w(v.shl8_w(w)), v.splat_w(0xbfff_u16 as i16));
    // Low seven bits all ones: NaN.
    let nan = v.eq_w(v.or_w(w, v.splat_w(0x80)), v.splat_w(0xff));
    let x = v.f16_w(v.or_w(h, nan));
    v.mul(x, v.splat_float(256.0))
}

// The `unsafe` blocks below: the token proves the CPU has the ISA (see `Simd`), and
// pointer arguments are valid per the method's `# Safety` section.

impl Words for Avx2 {
    type W = __m128i;
    #[inline(always)]
    unsafe fn load_words(self, p: *const u8) -> __m128i {
        // SAFETY: 8 readable bytes at p (caller); SSE4.1 (token).
        unsafe { _mm_cvtepu8_epi16(_mm_loadl_epi64(p.cast())) }
    }
    #[inline(always)]
    fn splat_w(self, x: i16) -> __m128i {
        // SAFETY: SSE2 (token).
        unsafe { _mm_set1_epi16(x) }
    }
    #[inline(always)]
    fn and_w(self, a: __m128i, b: __m128i) -> __m128i {
        // SAFETY: SSE2 (token).
        unsafe { _mm_and_si128(a, b) }
    }
    #[inline(always)]
    fn or_w(self, a: __m128i, b: __m128i) -> __m128i {
        // SAFETY: SSE2 (token).
        unsafe { _mm_or_si128(a, b) }
    }
    #[inline(always)]
    fn eq_w(self, a: __m128i, b: __m128i) -> __m128i {
        // SAFETY: SSE2 (token).
        unsafe { _mm_cmpeq_epi16(a, b) }
    }
    #[inline(always)]
    fn shl8_w(self, a: __m128i) -> __m128i {
        // SAFETY: SSE2 (token).
        unsafe { _mm_slli_epi16::<8>(a) }
    }
    #[inline(always)]
    fn sar1_w(self, a: __m128i) -> __m128i {
        // SAFETY: SSE2 (token).
        unsafe { _mm_srai_epi16::<1>(a) }
    }
    #[inline(always)]
    fn f16_w(self, h: __m128i) -> __m256 {
        self.f16_widen(h)
    }
}

impl Words for Avx512 {
    type W = __m256i;
    #[inline(always)]
    unsafe fn load_words(self, p: *const u8) -> __m256i {
        // SAFETY: 16 readable bytes at p (caller); AVX2 (token).
        unsafe { _mm256_cvtepu8_epi16(_mm_loadu_si128(p.cast())) }
    }
    #[inline(always)]
    fn splat_w(self, x: i16) -> __m256i {
        // SAFETY: AVX (token).
        unsafe { _mm256_set1_epi16(x) }
    }
    #[inline(always)]
    fn and_w(self, a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: AVX2 (token).
        unsafe { _mm256_and_si256(a, b) }
    }
    #[inline(always)]
    fn or_w(self, a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: AVX2 (token).
        unsafe { _mm256_or_si256(a, b) }
    }
    #[inline(always)]
    fn eq_w(self, a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: AVX2 (token).
        unsafe { _mm256_cmpeq_epi16(a, b) }
    }
    #[inline(always)]
    fn shl8_w(self, a: __m256i) -> __m256i {
        // SAFETY: AVX2 (token).
        unsafe { _mm256_slli_epi16::<8>(a) }
    }
    #[inline(always)]
    fn sar1_w(self, a: __m256i) -> __m256i {
        // SAFETY: AVX2 (token).
        unsafe { _mm256_srai_epi16::<1>(a) }
    }
    #[inline(always)]
    fn f16_w(self, h: __m256i) -> __m512 {
        self.f16_widen(h)
    }
}
