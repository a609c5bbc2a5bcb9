//! x86-64 vector tokens: [`Avx2`] (AVX2 + F16C) and [`Avx512`] (F + BW + VL + DQ).
//!
//! Every method is `#[inline(always)]` so it is compiled inside the caller's
//! `#[target_feature]` function. FMA is never emitted: the formula is not fused.

use core::arch::x86_64::*;

use super::{Lanes, Simd};
use crate::minifloat::{F4_E2M1_TABLE, NAN_BITS};

mod bf16;
mod decode;

/// Proof that the CPU has AVX2 and F16C.
#[derive(Clone, Copy, Debug)]
pub struct Avx2(());

/// Proof that the CPU has AVX-512 F, BW, VL and DQ (and AVX2, F16C), and
/// whether it has AVX512-BF16 too (bf16 pairs then convert natively, see [`bf16`]).
#[derive(Clone, Copy, Debug)]
pub struct Avx512 {
    cvt: bool,
}

impl Avx2 {
    /// The token, when this CPU has the features.
    #[cfg(test)]
    pub fn new() -> Option<Self> {
        super::Isa::Avx2.available().then_some(Avx2(()))
    }
    /// The token without checking.
    ///
    /// # Safety
    /// The CPU must have AVX2 and F16C.
    #[inline(always)]
    pub unsafe fn new_unchecked() -> Self {
        Avx2(())
    }

    /// The f16 bits of `y`, nearest-even, NaNs quieted: the AVX2 f16 rounding.
    #[inline(always)]
    pub(crate) fn f16_bits(self, y: __m256) -> __m128i {
        // SAFETY: F16C (token).
        unsafe { _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(y) }
    }

    /// The f16 values `h`, widened exactly (NaNs quieted): the AVX2 f16 widening.
    #[inline(always)]
    pub(crate) fn f16_widen(self, h: __m128i) -> __m256 {
        // SAFETY: F16C (token).
        unsafe { _mm256_cvtph_ps(h) }
    }
}

impl Avx512 {
    /// The token, when this CPU has the features.
    #[cfg(test)]
    pub fn new() -> Option<Self> {
        // SAFETY: the features were just checked.
        super::Isa::Avx512
            .available()
            .then(|| unsafe { Avx512::new_unchecked() })
    }
    /// The token without checking.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F, BW, VL, DQ, AVX2 and F16C.
    #[inline(always)]
    pub unsafe fn new_unchecked() -> Self {
        Avx512 {
            cvt: std::arch::is_x86_feature_detected!("avx512bf16"),
        }
    }

    /// The f16 bits of `y`, nearest-even, NaNs quieted: the AVX-512 f16 rounding.
    #[inline(always)]
    pub(crate) fn f16_bits(self, y: __m512) -> __m256i {
        // SAFETY: AVX-512F (token).
        unsafe { _mm512_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(y) }
    }

    /// The f16 values `h`, widened exactly (NaNs quieted): the AVX-512 f16 widening.
    #[inline(always)]
    pub(crate) fn f16_widen(self, h: __m256i) -> __m512 {
        // SAFETY: AVX-512F (token).
        unsafe { _mm512_cvtph_ps(h) }
    }

    /// The [`Simd::tab16`] table of the f16 of `y` (16 results).
    #[inline(always)]
    pub(crate) fn tab16_f16(self, y: __m512) -> __m512i {
        // SAFETY: AVX-512F (token).
        unsafe { _mm512_broadcast_i64x4(self.f16_bits(y)) }
    }

    /// The [`Simd::tab16`] tables of the bf16 of `a` and of `b` (16 results
    /// each), rounded and packed at once.
    #[inline(always)]
    pub(crate) fn tab16_bf16x2(self, a: __m512, b: __m512) -> [__m512i; 2] {
        // SAFETY: AVX-512F/BW/DQ, and AVX512-BF16 when `cvt` (token).
        unsafe {
            let h = bf16::pack(a, b, self.cvt);
            [
                _mm512_shuffle_i64x2::<0x44>(h, h),
                _mm512_shuffle_i64x2::<0xee>(h, h),
            ]
        }
    }
}

/// Size of one core's L2 cache from CPUID leaf 0x8000_0006 (ECX bits 31..16, in
/// KiB: AMD and Intel both report it there), if reported.
pub fn l2_bytes() -> Option<usize> {
    if __cpuid(0x8000_0000).eax < 0x8000_0006 {
        return None;
    }
    let kib = (__cpuid(0x8000_0006).ecx >> 16) as usize;
    (kib > 0).then_some(kib << 10)
}

/// Size of the last-level cache from CPUID leaf 4 (Intel), if reported.
pub fn llc_bytes() -> Option<usize> {
    let mut best = None;
    for i in 0..16 {
        let r = __cpuid_count(4, i);
        if r.eax & 0x1f == 0 {
            break;
        }
        let ways = (r.ebx >> 22) as usize + 1;
        let parts = ((r.ebx >> 12) & 0x3ff) as usize + 1;
        let line = (r.ebx & 0xfff) as usize + 1;
        let sets = r.ecx as usize + 1;
        best = Some(ways * parts * line * sets);
    }
    best
}

// All `unsafe` blocks below: the token's existence proves the CPU has the ISA
// (see `Simd`'s safety contract), and pointer arguments are valid per the
// method's own `# Safety` section, which the caller upholds.

impl Lanes for Avx2 {
    type Int = __m256i;
    type Float = __m256;

    #[inline(always)]
    fn int_sub(self, a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: AVX2 present (token).
        unsafe { _mm256_sub_epi32(a, b) }
    }
    #[inline(always)]
    fn float(self, a: __m256i) -> __m256 {
        // SAFETY: AVX present (token). Rounds nearest-even (default MXCSR).
        unsafe { _mm256_cvtepi32_ps(a) }
    }
    #[inline(always)]
    fn lit(self, v: f64) -> __m256 {
        self.splat_float(v as f32)
    }
    #[inline(always)]
    fn neg(self, a: __m256) -> __m256 {
        // SAFETY: AVX present (token).
        unsafe { _mm256_xor_ps(a, _mm256_set1_ps(-0.0)) }
    }
    #[inline(always)]
    fn abs(self, a: __m256) -> __m256 {
        // SAFETY: AVX present (token).
        unsafe { _mm256_andnot_ps(_mm256_set1_ps(-0.0), a) }
    }
    #[inline(always)]
    fn add(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: AVX present (token).
        unsafe { _mm256_add_ps(a, b) }
    }
    #[inline(always)]
    fn sub(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: AVX present (token).
        unsafe { _mm256_sub_ps(a, b) }
    }
    #[inline(always)]
    fn mul(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: AVX present (token).
        unsafe { _mm256_mul_ps(a, b) }
    }
    #[inline(always)]
    fn min(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: AVX present (token).
        unsafe {
            let lt = _mm256_cmp_ps::<_CMP_LT_OQ>(a, b);
            let eq = _mm256_cmp_ps::<_CMP_EQ_OQ>(a, b);
            let aneg = _mm256_castsi256_ps(_mm256_srai_epi32::<31>(_mm256_castps_si256(a)));
            self.pick_a(a, b, _mm256_or_ps(lt, _mm256_and_ps(eq, aneg)))
        }
    }
    #[inline(always)]
    fn max(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: AVX present (token).
        unsafe {
            let gt = _mm256_cmp_ps::<_CMP_GT_OQ>(a, b);
            let eq = _mm256_cmp_ps::<_CMP_EQ_OQ>(a, b);
            let bneg = _mm256_castsi256_ps(_mm256_srai_epi32::<31>(_mm256_castps_si256(b)));
            self.pick_a(a, b, _mm256_or_ps(gt, _mm256_and_ps(eq, bneg)))
        }
    }
    #[inline(always)]
    fn nan_or(self, x: __m256, y: __m256) -> __m256 {
        // SAFETY: AVX present (token).
        unsafe {
            let nan = _mm256_castsi256_ps(_mm256_set1_epi32(NAN_BITS as i32));
            _mm256_blendv_ps(y, nan, _mm256_cmp_ps::<_CMP_UNORD_Q>(x, x))
        }
    }
}

impl Avx2 {
    /// `a` where `a` is NaN, else `b` where `b` is NaN, else `a` where `win`, else `b`.
    #[inline(always)]
    fn pick_a(self, a: __m256, b: __m256, win: __m256) -> __m256 {
        // SAFETY: AVX present (token).
        unsafe {
            let na = _mm256_cmp_ps::<_CMP_UNORD_Q>(a, a);
            let nb = _mm256_cmp_ps::<_CMP_UNORD_Q>(b, b);
            let take_a = _mm256_or_ps(na, _mm256_andnot_ps(nb, win));
            _mm256_blendv_ps(b, a, take_a)
        }
    }

    #[inline(always)]
    fn expand_nibbles(self, x: __m128i) -> __m128i {
        // SAFETY: SSE2 present (token implies it).
        unsafe {
            let m = _mm_set1_epi8(0x0f);
            let lo = _mm_and_si128(x, m);
            let hi = _mm_and_si128(_mm_srli_epi16::<4>(x), m);
            _mm_unpacklo_epi8(lo, hi)
        }
    }
}

// SAFETY: `Avx2` values exist only after detection (`new`) or under the
// `new_unchecked` contract.
unsafe impl Simd for Avx2 {
    type Nan = ();
    const LANES: usize = 8;

    #[inline(always)]
    unsafe fn load_s8(self, p: *const u8) -> __m256i {
        // SAFETY: 8 readable bytes at p (caller); AVX2 (token).
        unsafe { _mm256_cvtepi8_epi32(_mm_loadl_epi64(p.cast())) }
    }
    #[inline(always)]
    unsafe fn load_u8(self, p: *const u8) -> __m256i {
        // SAFETY: as load_s8.
        unsafe { _mm256_cvtepu8_epi32(_mm_loadl_epi64(p.cast())) }
    }
    #[inline(always)]
    unsafe fn load_u4(self, p: *const u8) -> __m256i {
        // SAFETY: 4 readable bytes at p (caller); AVX2 (token).
        unsafe {
            let x = _mm_cvtsi32_si128(p.cast::<i32>().read_unaligned());
            _mm256_cvtepu8_epi32(self.expand_nibbles(x))
        }
    }
    #[inline(always)]
    unsafe fn load_s4(self, p: *const u8) -> __m256i {
        // SAFETY: as load_u4.
        unsafe {
            let eight = _mm256_set1_epi32(8);
            _mm256_sub_epi32(_mm256_xor_si256(self.load_u4(p), eight), eight)
        }
    }
    #[inline(always)]
    unsafe fn load_s32(self, p: *const u8) -> __m256i {
        // SAFETY: 32 readable bytes at p (caller).
        unsafe { _mm256_loadu_si256(p.cast()) }
    }
    #[inline(always)]
    unsafe fn load_f32(self, p: *const u8) -> __m256 {
        // SAFETY: 32 readable bytes at p (caller).
        unsafe { _mm256_loadu_ps(p.cast()) }
    }
    #[inline(always)]
    unsafe fn load_f16(self, p: *const u8) -> __m256 {
        // SAFETY: 16 readable bytes at p (caller).
        self.f16_widen(unsafe { _mm_loadu_si128(p.cast()) })
    }
    #[inline(always)]
    unsafe fn load_bf16(self, p: *const u8) -> __m256 {
        // SAFETY: 16 readable bytes at p (caller); AVX2 (token).
        unsafe {
            let w = _mm256_cvtepu16_epi32(_mm_loadu_si128(p.cast()));
            _mm256_castsi256_ps(_mm256_slli_epi32::<16>(w))
        }
    }
    #[inline(always)]
    unsafe fn load_f8_e4m3(self, p: *const u8) -> __m256 {
        // SAFETY: 8 readable bytes at p (caller).
        unsafe { decode::e4m3(self, p) }
    }
    #[inline(always)]
    unsafe fn load_f8_e5m2(self, p: *const u8) -> __m256 {
        // SAFETY: 8 readable bytes at p (caller).
        unsafe { decode::e5m2(self, p) }
    }
    #[inline(always)]
    fn f4_e2m1(self, n: __m256i) -> __m256 {
        // SAFETY: AVX2 (token); the table's first 8 entries are readable.
        unsafe {
            // The magnitude from the low three bits (the permute reads only
            // those), the sign from bit 3.
            let mag = _mm256_loadu_ps(F4_E2M1_TABLE.as_ptr());
            let x = _mm256_permutevar8x32_ps(mag, n);
            let sign = _mm256_and_si256(_mm256_slli_epi32::<28>(n), _mm256_set1_epi32(i32::MIN));
            _mm256_or_ps(x, _mm256_castsi256_ps(sign))
        }
    }
    #[inline(always)]
    unsafe fn load_e8m0(self, p: *const u8) -> __m256 {
        // SAFETY: 8 readable bytes at p (caller); AVX2 (token).
        unsafe {
            // e << 23, with bit 22 set for 0 (2^-127) and 0xff (NaN).
            let e = self.load_u8(p);
            let edge = _mm256_or_si256(
                _mm256_cmpeq_epi32(e, _mm256_setzero_si256()),
                _mm256_cmpeq_epi32(e, _mm256_set1_epi32(0xff)),
            );
            let low = _mm256_and_si256(edge, _mm256_set1_epi32(0x0040_0000));
            _mm256_castsi256_ps(_mm256_or_si256(_mm256_slli_epi32::<23>(e), low))
        }
    }
    #[inline(always)]
    fn splat_int(self, v: i32) -> __m256i {
        // SAFETY: AVX present (token).
        unsafe { _mm256_set1_epi32(v) }
    }
    #[inline(always)]
    fn splat_float(self, v: f32) -> __m256 {
        // SAFETY: AVX present (token).
        unsafe { _mm256_set1_ps(v) }
    }
    #[inline(always)]
    unsafe fn store_f32(self, p: *mut u8, y: __m256, quiet: bool) {
        // SAFETY: 32 writable bytes at p (caller); AVX2 (token).
        unsafe {
            let mut bits = _mm256_castps_si256(y);
            if quiet {
                let nan = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_UNORD_Q>(y, y));
                let quiet = _mm256_and_si256(nan, _mm256_set1_epi32(0x0040_0000));
                bits = _mm256_or_si256(bits, quiet);
            }
            store256(p, bits)
        }
    }
    #[inline(always)]
    unsafe fn store_f16(self, p: *mut u8, y: __m256) {
        // SAFETY: 16 writable bytes at p (caller).
        unsafe { _mm_storeu_si128(p.cast(), self.f16_bits(y)) }
    }
    #[inline(always)]
    unsafe fn store_bf16(self, p: *mut u8, y: __m256) {
        // SAFETY: 16 writable bytes at p (caller); AVX2 (token).
        unsafe {
            let x = _mm256_castps_si256(y);
            let mag = _mm256_and_si256(x, _mm256_set1_epi32(0x7fff_ffff));
            let nan = _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x7f80_0000));
            let hi = _mm256_srli_epi32::<16>(x);
            let lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
            let bias = _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb);
            let rne = _mm256_srli_epi32::<16>(_mm256_add_epi32(x, bias));
            let qnan = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
            let r = _mm256_blendv_epi8(rne, qnan, nan);
            let h = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256::<1>(r));
            _mm_storeu_si128(p.cast(), h)
        }
    }
    #[inline(always)]
    fn fence(self) {
        // SAFETY: SSE present on every x86-64.
        unsafe { _mm_sfence() }
    }

    #[inline(always)]
    fn prefetch(self, p: *const u8) {
        // SAFETY: SSE present on every x86-64; a prefetch does not access memory
        // architecturally (no fault, whatever the address).
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast()) }
    }

    #[inline(always)]
    unsafe fn stream_copy(self, dst: *mut u8, src: *const u8, n: usize) {
        // SAFETY: as the caller promised; the body's stores are 32-byte aligned.
        unsafe {
            stream_lines(dst, src, n, |d, s| {
                _mm256_stream_si256(d.cast(), _mm256_loadu_si256(s.cast()));
                _mm256_stream_si256(d.add(32).cast(), _mm256_loadu_si256(s.add(32).cast()));
            })
        }
    }

    type Tab32 = (__m256, __m256);
    type Tab16 = (__m256i, __m256i);

    #[inline(always)]
    unsafe fn tab32(self, p: *const u8) -> Self::Tab32 {
        // SAFETY: 64 readable bytes at p (caller).
        unsafe { (_mm256_loadu_ps(p.cast()), _mm256_loadu_ps(p.add(32).cast())) }
    }
    #[inline(always)]
    unsafe fn tab16(self, p: *const u8) -> Self::Tab16 {
        // SAFETY: 32 readable bytes at p (caller); SSSE3 (token).
        unsafe {
            // Low bytes of the entries in one register, high bytes in the other.
            let split = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
            let a = _mm_shuffle_epi8(_mm_loadu_si128(p.cast()), split);
            let b = _mm_shuffle_epi8(_mm_loadu_si128(p.add(16).cast()), split);
            // Each repeated in both 128-bit lanes: vpshufb looks up per lane.
            let (lo, hi) = (_mm_unpacklo_epi64(a, b), _mm_unpackhi_epi64(a, b));
            (
                _mm256_broadcastsi128_si256(lo),
                _mm256_broadcastsi128_si256(hi),
            )
        }
    }
    #[inline(always)]
    unsafe fn lut32(self, t: Self::Tab32, src: *const u8, dst: *mut u8) {
        // SAFETY: 4 readable bytes at src, 32 writable at dst (caller); AVX2 (token).
        unsafe {
            let x = _mm_cvtsi32_si128(src.cast::<i32>().read_unaligned());
            // Byte b -> dwords (b, b >> 4): the permute reads index bits 0..2, bit 3
            // picks the table half.
            let q = _mm256_cvtepu8_epi64(x);
            let idx = _mm256_or_si256(q, _mm256_slli_epi64::<28>(q));
            let lo = _mm256_permutevar8x32_ps(t.0, idx);
            let hi = _mm256_permutevar8x32_ps(t.1, idx);
            let pick = _mm256_castsi256_ps(_mm256_slli_epi32::<28>(idx));
            store256(dst, _mm256_castps_si256(_mm256_blendv_ps(lo, hi, pick)))
        }
    }
    const LUT16: usize = 32;
    #[inline(always)]
    unsafe fn lut16(self, t: Self::Tab16, src: *const u8, dst: *mut u8) {
        // SAFETY: 16 readable bytes at src, 64 writable at dst (caller); AVX2 (token).
        unsafe {
            let x = _mm_loadu_si128(src.cast());
            let m = _mm_set1_epi8(0x0f);
            let (lo, hi) = (
                _mm_and_si128(x, m),
                _mm_and_si128(_mm_srli_epi16::<4>(x), m),
            );
            // Indices of elements 0..16 and 16..32.
            let (a, b) = (_mm_unpacklo_epi8(lo, hi), _mm_unpackhi_epi8(lo, hi));
            // Lane 0: elements 0..8 and 16..24; lane 1: 8..16 and 24..32, so the
            // byte interleaves below come out in element order.
            let idx = _mm256_set_m128i(_mm_unpackhi_epi64(a, b), _mm_unpacklo_epi64(a, b));
            let l = _mm256_shuffle_epi8(t.0, idx);
            let h = _mm256_shuffle_epi8(t.1, idx);
            store256(dst, _mm256_unpacklo_epi8(l, h));
            store256(dst.add(32), _mm256_unpackhi_epi8(l, h))
        }
    }

    type Line = ();
}

/// Copies `n` bytes: ordinary copies up to the first 64-byte aligned dst address
/// and after the last, `line(d, s)` for each whole line between.
///
/// # Safety
/// `src` is valid for reading and `dst` for writing `n` bytes, not overlapping;
/// `line` copies the 64 bytes it is given.
#[inline(always)]
unsafe fn stream_lines(dst: *mut u8, src: *const u8, n: usize, line: impl Fn(*mut u8, *const u8)) {
    let head = dst.align_offset(64).min(n);
    let lines = (n - head) / 64;
    // SAFETY: every offset below is < n (caller's buffers).
    unsafe {
        core::ptr::copy_nonoverlapping(src, dst, head);
        for l in 0..lines {
            let o = head + 64 * l;
            line(dst.add(o), src.add(o));
        }
        let done = head + 64 * lines;
        core::ptr::copy_nonoverlapping(src.add(done), dst.add(done), n - done);
    }
}

/// [`super::stream_copy`] with 64-byte AVX-512 stores.
///
/// # Safety
/// As [`super::stream_copy`], on a CPU with AVX-512 F, BW, VL, DQ, AVX2 and F16C.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,f16c")]
pub(crate) unsafe fn stream_copy_avx512(dst: *mut u8, src: &[u8]) {
    // SAFETY: the features are enabled (caller); the buffers are the caller's.
    unsafe { Avx512::new_unchecked().stream_copy(dst, src.as_ptr(), src.len()) }
}

/// [`super::stream_copy`] with 32-byte AVX stores.
///
/// # Safety
/// As [`super::stream_copy`], on a CPU with AVX2 and F16C.
#[target_feature(enable = "avx2,f16c")]
pub(crate) unsafe fn stream_copy_avx2(dst: *mut u8, src: &[u8]) {
    // SAFETY: the features are enabled (caller); the buffers are the caller's.
    unsafe { Avx2::new_unchecked().stream_copy(dst, src.as_ptr(), src.len()) }
}

/// [`super::f32_to_f16`] with AVX-512 stores.
///
/// # Safety
/// As [`super::f32_to_f16`], on a CPU with AVX-512 F, BW, VL, DQ, AVX2 and F16C.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,f16c")]
pub(crate) unsafe fn f32_to_f16_avx512(dst: *mut u8, x: &[f32]) {
    // SAFETY: the features are enabled (caller); the buffers are the caller's.
    unsafe { super::f32_to_f16_with(Avx512::new_unchecked(), dst, x) }
}

/// [`super::f32_to_f16_stream`] with 64-byte AVX-512 non-temporal stores.
///
/// # Safety
/// As [`super::f32_to_f16`], on a CPU with AVX-512 F, BW, VL, DQ, AVX2 and F16C.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,f16c")]
pub(crate) unsafe fn f32_to_f16_stream_avx512(dst: *mut u8, x: &[f32]) {
    // SAFETY: the caller's buffers and features; each line's 64 bytes of dst
    // are 64-byte aligned (`f16_lines`) and its 32 f32 lie in `x`.
    unsafe {
        let v = Avx512::new_unchecked();
        f16_lines(dst, x, f32_to_f16_avx512, |d, s| {
            let a = v.f16_bits(_mm512_loadu_ps(s));
            let b = v.f16_bits(_mm512_loadu_ps(s.add(16)));
            _mm512_stream_si512(
                d.cast(),
                _mm512_inserti64x4::<1>(_mm512_castsi256_si512(a), b),
            );
        })
    }
}

/// [`super::f32_to_f16_stream`] with 32-byte AVX non-temporal stores.
///
/// # Safety
/// As [`super::f32_to_f16`], on a CPU with AVX2 and F16C.
#[target_feature(enable = "avx2,f16c")]
pub(crate) unsafe fn f32_to_f16_stream_avx2(dst: *mut u8, x: &[f32]) {
    // SAFETY: as in `f32_to_f16_stream_avx512`, with two 32-byte stores a line.
    unsafe {
        let v = Avx2::new_unchecked();
        f16_lines(dst, x, f32_to_f16_avx2, |d, s| {
            for k in 0..2 {
                let lo = v.f16_bits(_mm256_loadu_ps(s.add(16 * k)));
                let hi = v.f16_bits(_mm256_loadu_ps(s.add(16 * k + 8)));
                let v = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(lo), hi);
                _mm256_stream_si256(d.add(32 * k).cast(), v);
            }
        })
    }
}

/// Converts `x` to f16 at `dst`: `plain` up to the first 64-byte aligned dst
/// address and after the last, `line(d, s)` for each whole line between (32
/// values from `s` to the 64 bytes at `d`). An odd `dst` gets `plain` alone.
///
/// # Safety
/// `dst` is valid for writing `2 * x.len()` bytes and does not overlap `x`;
/// `plain` converts as [`super::f32_to_f16`] and `line` its 32 values.
#[inline(always)]
unsafe fn f16_lines(
    dst: *mut u8,
    x: &[f32],
    plain: unsafe fn(*mut u8, &[f32]),
    line: impl Fn(*mut u8, *const f32),
) {
    let n = x.len();
    let head = if (dst as usize).is_multiple_of(2) {
        (dst.align_offset(64) / 2).min(n)
    } else {
        n
    };
    let lines = (n - head) / 32;
    let done = head + 32 * lines;
    // SAFETY: every element index below is < n, and its bytes 2i, 2i + 1 lie in
    // the caller's dst.
    unsafe {
        plain(dst, &x[..head]);
        for l in 0..lines {
            let i = head + 32 * l;
            line(dst.add(2 * i), x.as_ptr().add(i));
        }
        plain(dst.add(2 * done), &x[done..]);
    }
}

/// [`super::widen_f16`] with AVX-512 loads.
///
/// # Safety
/// As [`super::widen_f16_with`], on a CPU with AVX-512 F, BW, VL, DQ, AVX2 and
/// F16C.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,f16c")]
pub(crate) unsafe fn widen_f16_avx512(dst: &mut [f32], src: &[u8]) {
    // SAFETY: the features are enabled (caller); the lengths are the caller's.
    unsafe { super::widen_f16_with(Avx512::new_unchecked(), dst, src) }
}

/// [`super::widen_f16`] with AVX2 + F16C loads.
///
/// # Safety
/// As [`super::widen_f16_with`], on a CPU with AVX2 and F16C.
#[target_feature(enable = "avx2,f16c")]
pub(crate) unsafe fn widen_f16_avx2(dst: &mut [f32], src: &[u8]) {
    // SAFETY: the features are enabled (caller); the lengths are the caller's.
    unsafe { super::widen_f16_with(Avx2::new_unchecked(), dst, src) }
}

/// [`super::f32_to_bf16`] with AVX-512 stores (AVX512-BF16 where the CPU has it).
///
/// # Safety
/// As [`super::f32_to_bf16`], on a CPU with AVX-512 F, BW, VL, DQ, AVX2 and F16C.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,f16c")]
pub(crate) unsafe fn f32_to_bf16_avx512(dst: *mut u8, x: &[f32]) {
    // SAFETY: the features are enabled (caller); the buffers are the caller's.
    unsafe { super::f32_to_bf16_with(Avx512::new_unchecked(), dst, x) }
}

/// [`super::f32_to_bf16`] with AVX2 stores.
///
/// # Safety
/// As [`super::f32_to_bf16`], on a CPU with AVX2 and F16C.
#[target_feature(enable = "avx2,f16c")]
pub(crate) unsafe fn f32_to_bf16_avx2(dst: *mut u8, x: &[f32]) {
    // SAFETY: the features are enabled (caller); the buffers are the caller's.
    unsafe { super::f32_to_bf16_with(Avx2::new_unchecked(), dst, x) }
}

/// [`super::f32_to_f16`] with AVX2 + F16C stores.
///
/// # Safety
/// As [`super::f32_to_f16`], on a CPU with AVX2 and F16C.
#[target_feature(enable = "avx2,f16c")]
pub(crate) unsafe fn f32_to_f16_avx2(dst: *mut u8, x: &[f32]) {
    // SAFETY: the features are enabled (caller); the buffers are the caller's.
    unsafe { super::f32_to_f16_with(Avx2::new_unchecked(), dst, x) }
}

/// [`super::stream_copy`] with 16-byte SSE2 stores (baseline on x86-64).
///
/// # Safety
/// As [`super::stream_copy`].
pub(crate) unsafe fn stream_copy_sse2(dst: *mut u8, src: &[u8]) {
    // SAFETY: the buffers are the caller's; `line` gets 64-byte aligned `d`, so
    // every 16-byte store is aligned.
    unsafe {
        stream_lines(dst, src.as_ptr(), src.len(), |d, s| {
            for k in 0..4 {
                let v = _mm_loadu_si128(s.add(16 * k).cast());
                _mm_stream_si128(d.add(16 * k).cast(), v);
            }
        })
    }
}

/// Stores 32 bytes.
///
/// # Safety
/// `p` is valid for writing 32 bytes; AVX present.
#[inline(always)]
unsafe fn store256(p: *mut u8, bits: __m256i) {
    // SAFETY: as the caller promised.
    unsafe { _mm256_storeu_si256(p.cast(), bits) }
}

/// Stores 64 bytes.
///
/// # Safety
/// `p` is valid for writing 64 bytes; AVX-512F present.
#[inline(always)]
unsafe fn store512(p: *mut u8, bits: __m512i) {
    // SAFETY: as the caller promised.
    unsafe { _mm512_storeu_si512(p.cast(), bits) }
}

impl Lanes for Avx512 {
    type Int = __m512i;
    type Float = __m512;

    #[inline(always)]
    fn int_sub(self, a: __m512i, b: __m512i) -> __m512i {
        // SAFETY: AVX-512F present (token).
        unsafe { _mm512_sub_epi32(a, b) }
    }
    #[inline(always)]
    fn float(self, a: __m512i) -> __m512 {
        // SAFETY: AVX-512F present (token). Rounds nearest-even (default MXCSR).
        unsafe { _mm512_cvtepi32_ps(a) }
    }
    #[inline(always)]
    fn lit(self, v: f64) -> __m512 {
        self.splat_float(v as f32)
    }
    #[inline(always)]
    fn neg(self, a: __m512) -> __m512 {
        // SAFETY: AVX-512F present (token).
        unsafe {
            let x = _mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32(i32::MIN));
            _mm512_castsi512_ps(x)
        }
    }
    #[inline(always)]
    fn abs(self, a: __m512) -> __m512 {
        // SAFETY: AVX-512F present (token).
        unsafe {
            let x = _mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(i32::MAX));
            _mm512_castsi512_ps(x)
        }
    }
    #[inline(always)]
    fn add(self, a: __m512, b: __m512) -> __m512 {
        // SAFETY: AVX-512F present (token).
        unsafe { _mm512_add_ps(a, b) }
    }
    #[inline(always)]
    fn sub(self, a: __m512, b: __m512) -> __m512 {
        // SAFETY: AVX-512F present (token).
        unsafe { _mm512_sub_ps(a, b) }
    }
    #[inline(always)]
    fn mul(self, a: __m512, b: __m512) -> __m512 {
        // SAFETY: AVX-512F present (token).
        unsafe { _mm512_mul_ps(a, b) }
    }
    #[inline(always)]
    fn min(self, a: __m512, b: __m512) -> __m512 {
        // SAFETY: AVX-512F/DQ present (token).
        unsafe {
            let lt = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(a, b);
            let eq = _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(a, b);
            let aneg = _mm512_movepi32_mask(_mm512_castps_si512(a));
            self.pick_a(a, b, lt | (eq & aneg))
        }
    }
    #[inline(always)]
    fn max(self, a: __m512, b: __m512) -> __m512 {
        // SAFETY: AVX-512F/DQ present (token).
        unsafe {
            let gt = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(a, b);
            let eq = _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(a, b);
            let bneg = _mm512_movepi32_mask(_mm512_castps_si512(b));
            self.pick_a(a, b, gt | (eq & bneg))
        }
    }
    #[inline(always)]
    fn nan_or(self, x: __m512, y: __m512) -> __m512 {
        // SAFETY: AVX-512F present (token).
        unsafe {
            let nan = _mm512_castsi512_ps(_mm512_set1_epi32(NAN_BITS as i32));
            _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x), y, nan)
        }
    }
}
impl Avx512 {
    /// `a` where `a` is NaN, else `b` where `b` is NaN, else `a` where `win`, else `b`.
    #[inline(always)]
    fn pick_a(self, a: __m512, b: __m512, win: __mmask16) -> __m512 {
        // SAFETY: AVX-512F present (token).
        unsafe {
            let na = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(a, a);
            let nb = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(b, b);
            _mm512_mask_blend_ps(na | (!nb & win), b, a)
        }
    }
}

// SAFETY: `Avx512` values exist only after detection (`new`) or under the
// `new_unchecked` contract.
unsafe impl Simd for Avx512 {
    const LANES: usize = 16;

    #[inline(always)]
    unsafe fn load_s8(self, p: *const u8) -> __m512i {
        // SAFETY: 16 readable bytes at p (caller); AVX-512F (token).
        unsafe { _mm512_cvtepi8_epi32(_mm_loadu_si128(p.cast())) }
    }
    #[inline(always)]
    unsafe fn load_u8(self, p: *const u8) -> __m512i {
        // SAFETY: as load_s8.
        unsafe { _mm512_cvtepu8_epi32(_mm_loadu_si128(p.cast())) }
    }
    #[inline(always)]
    unsafe fn load_u4(self, p: *const u8) -> __m512i {
        // SAFETY: 8 readable bytes at p (caller); AVX2/AVX-512F (token).
        unsafe {
            let x = _mm_loadl_epi64(p.cast());
            _mm512_cvtepu8_epi32(Avx2::new_unchecked().expand_nibbles(x))
        }
    }
    #[inline(always)]
    unsafe fn load_s4(self, p: *const u8) -> __m512i {
        // SAFETY: as load_u4.
        unsafe {
            let eight = _mm512_set1_epi32(8);
            _mm512_sub_epi32(_mm512_xor_si512(self.load_u4(p), eight), eight)
        }
    }
    #[inline(always)]
    unsafe fn load_s32(self, p: *const u8) -> __m512i {
        // SAFETY: 64 readable bytes at p (caller).
        unsafe { _mm512_loadu_si512(p.cast()) }
    }
    #[inline(always)]
    unsafe fn load_f32(self, p: *const u8) -> __m512 {
        // SAFETY: 64 readable bytes at p (caller).
        unsafe { _mm512_loadu_ps(p.cast()) }
    }
    #[inline(always)]
    unsafe fn load_f16(self, p: *const u8) -> __m512 {
        // SAFETY: 32 readable bytes at p (caller).
        self.f16_widen(unsafe { _mm256_loadu_si256(p.cast()) })
    }
    #[inline(always)]
    unsafe fn load_bf16(self, p: *const u8) -> __m512 {
        // SAFETY: 32 readable bytes at p (caller); AVX-512F (token).
        unsafe {
            let w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(p.cast()));
            _mm512_castsi512_ps(_mm512_slli_epi32::<16>(w))
        }
    }
    #[inline(always)]
    unsafe fn load_f8_e4m3(self, p: *const u8) -> __m512 {
        // SAFETY: 16 readable bytes at p (caller).
        unsafe { decode::e4m3(self, p) }
    }
    #[inline(always)]
    unsafe fn load_f8_e5m2(self, p: *const u8) -> __m512 {
        // SAFETY: 16 readable bytes at p (caller).
        unsafe { decode::e5m2(self, p) }
    }
    type Nan = __mmask32;
    const NAN_MASKS: bool = true;
    #[inline(always)]
    unsafe fn load_f8_any(self, t: crate::DType, p: *const u8) -> __m512 {
        // SAFETY: 16 readable bytes at p (caller).
        unsafe {
            match t {
                crate::DType::F8E4M3 => decode::e4m3_any(self, p),
                _ => self.load_f8_e5m2(p),
            }
        }
    }
    #[inline(always)]
    unsafe fn nan_codes(self, t: crate::DType, p: *const u8) -> __mmask32 {
        // SAFETY: 32 readable bytes at p (caller); AVX-512BW/VL (token).
        unsafe {
            let m = _mm256_and_si256(_mm256_loadu_si256(p.cast()), _mm256_set1_epi8(0x7f));
            match t {
                // e4m3: magnitude all ones; e5m2: above infinity's 0x7c.
                crate::DType::F8E4M3 => _mm256_cmpeq_epi8_mask(m, _mm256_set1_epi8(0x7f)),
                _ => _mm256_cmpgt_epu8_mask(m, _mm256_set1_epi8(0x7c)),
            }
        }
    }
    #[inline(always)]
    unsafe fn store_bf16x2_nan(self, p: *mut u8, a: __m512, b: __m512, nan: __mmask32) {
        // SAFETY: 64 writable bytes at p (caller); AVX-512F/BW/DQ, and
        // AVX512-BF16 when `cvt` (token).
        unsafe { bf16::store_x2_nan(p, a, b, self.cvt, nan) }
    }
    #[inline(always)]
    fn f4_e2m1(self, n: __m512i) -> __m512 {
        // SAFETY: AVX-512F (token); the table's first 16 entries are readable.
        // The permute reads index bits 0..3 only.
        unsafe { _mm512_permutexvar_ps(n, _mm512_loadu_ps(F4_E2M1_TABLE.as_ptr())) }
    }
    #[inline(always)]
    unsafe fn load_e8m0(self, p: *const u8) -> __m512 {
        // SAFETY: 16 readable bytes at p (caller); AVX-512F (token).
        unsafe {
            // e << 23, with bit 22 set for 0 (2^-127) and 0xff (NaN).
            let e = self.load_u8(p);
            let edge = _mm512_cmpeq_epi32_mask(e, _mm512_setzero_si512())
                | _mm512_cmpeq_epi32_mask(e, _mm512_set1_epi32(0xff));
            let bits = _mm512_slli_epi32::<23>(e);
            let bits = _mm512_mask_or_epi32(bits, edge, bits, _mm512_set1_epi32(0x0040_0000));
            _mm512_castsi512_ps(bits)
        }
    }
    #[inline(always)]
    fn splat_int(self, v: i32) -> __m512i {
        // SAFETY: AVX-512F present (token).
        unsafe { _mm512_set1_epi32(v) }
    }
    #[inline(always)]
    fn splat_float(self, v: f32) -> __m512 {
        // SAFETY: AVX-512F present (token).
        unsafe { _mm512_set1_ps(v) }
    }
    #[inline(always)]
    unsafe fn store_f32(self, p: *mut u8, y: __m512, quiet: bool) {
        // SAFETY: 64 writable bytes at p (caller); AVX-512F (token).
        unsafe {
            let mut bits = _mm512_castps_si512(y);
            if quiet {
                let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(y, y);
                bits = _mm512_mask_or_epi32(bits, nan, bits, _mm512_set1_epi32(0x0040_0000));
            }
            store512(p, bits)
        }
    }
    #[inline(always)]
    unsafe fn store_f16(self, p: *mut u8, y: __m512) {
        // SAFETY: 32 writable bytes at p (caller).
        unsafe { _mm256_storeu_si256(p.cast(), self.f16_bits(y)) }
    }
    #[inline(always)]
    unsafe fn store_bf16(self, p: *mut u8, y: __m512) {
        // SAFETY: 32 writable bytes at p (caller); AVX-512F/BW (token).
        unsafe {
            let h = _mm512_cvtepi32_epi16(_mm512_srli_epi32::<16>(bf16::rne_hi(y)));
            _mm256_storeu_si256(p.cast(), h)
        }
    }
    #[inline(always)]
    unsafe fn store_bf16x2(self, p: *mut u8, a: __m512, b: __m512) {
        // SAFETY: 64 writable bytes at p (caller); AVX-512F/BW/DQ (token).
        unsafe { bf16::store_x2(p, a, b, self.cvt) }
    }
    #[inline(always)]
    fn tab16_bf16(self, a: __m512, b: __m512) -> __m512i {
        // SAFETY: AVX-512F/BW/DQ, and AVX512-BF16 when `cvt` (token). Entries
        // 16..32 are `b`, which is `a` (caller).
        unsafe { bf16::pack(a, b, self.cvt) }
    }
    #[inline(always)]
    fn fence(self) {
        // SAFETY: SSE present on every x86-64.
        unsafe { _mm_sfence() }
    }

    #[inline(always)]
    fn prefetch(self, p: *const u8) {
        // SAFETY: SSE present on every x86-64; a prefetch does not access memory
        // architecturally (no fault, whatever the address).
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast()) }
    }

    #[inline(always)]
    unsafe fn stream_copy(self, dst: *mut u8, src: *const u8, n: usize) {
        // SAFETY: as the caller promised; the body's stores are 64-byte aligned.
        unsafe {
            stream_lines(dst, src, n, |d, s| {
                _mm512_stream_si512(d.cast(), _mm512_loadu_si512(s.cast()))
            })
        }
    }

    type Tab32 = __m512;
    type Tab16 = __m512i;

    #[inline(always)]
    unsafe fn tab32(self, p: *const u8) -> __m512 {
        // SAFETY: 64 readable bytes at p (caller).
        unsafe { _mm512_loadu_ps(p.cast()) }
    }
    #[inline(always)]
    unsafe fn tab16(self, p: *const u8) -> __m512i {
        // SAFETY: 32 readable bytes at p (caller). Entries 16..32 repeat 0..16:
        // `lut16` indexes with 5 bits.
        unsafe { _mm512_broadcast_i64x4(_mm256_loadu_si256(p.cast())) }
    }
    #[inline(always)]
    unsafe fn lut32(self, t: __m512, src: *const u8, dst: *mut u8) {
        // SAFETY: 8 readable bytes at src, 64 writable at dst (caller).
        unsafe { store512(dst, self.lut32_line(t, src)) }
    }
    #[inline(always)]
    unsafe fn lut16(self, t: __m512i, src: *const u8, dst: *mut u8) {
        // SAFETY: 16 readable bytes at src, 64 writable at dst (caller).
        unsafe { store512(dst, self.lut16_line(t, src)) }
    }

    type Line = __m512i;
    const LINES: bool = true;

    #[inline(always)]
    unsafe fn lut16_line(self, t: __m512i, src: *const u8) -> __m512i {
        // SAFETY: 16 readable bytes at src (caller); AVX-512BW (token).
        unsafe {
            // Byte b -> words (b, b >> 4); the permute reads index bits 0..4, and
            // the table repeats, so bit 4 (from the high nibble) does not matter.
            let d = _mm512_cvtepu8_epi32(_mm_loadu_si128(src.cast()));
            let idx = _mm512_or_si512(d, _mm512_slli_epi32::<12>(d));
            _mm512_permutexvar_epi16(idx, t)
        }
    }
    #[inline(always)]
    unsafe fn lut32_line(self, t: __m512, src: *const u8) -> __m512i {
        // SAFETY: 8 readable bytes at src (caller); AVX-512F (token).
        unsafe {
            // Byte b -> dwords (b, b >> 4); the permute reads index bits 0..3.
            let q = _mm512_cvtepu8_epi64(_mm_loadl_epi64(src.cast()));
            let idx = _mm512_or_si512(q, _mm512_slli_epi64::<28>(q));
            _mm512_castps_si512(_mm512_permutexvar_ps(idx, t))
        }
    }
    #[inline(always)]
    fn splice_index(self, dwords: usize) -> __m512i {
        // SAFETY: AVX-512F (token).
        unsafe {
            let k = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
            _mm512_add_epi32(k, _mm512_set1_epi32(dwords as i32))
        }
    }
    #[inline(always)]
    fn splice(self, a: __m512i, b: __m512i, idx: __m512i) -> __m512i {
        // SAFETY: AVX-512F (token). Index bit 4 picks `b`, bits 0..3 the word.
        unsafe { _mm512_permutex2var_epi32(a, idx, b) }
    }
    #[inline(always)]
    unsafe fn stream_line(self, dst: *mut u8, y: __m512i) {
        // SAFETY: 64 writable bytes at dst, 64-byte aligned (caller); AVX-512F (token).
        unsafe { _mm512_stream_si512(dst.cast(), y) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::Isa;

    /// f32 inputs around every 16-bit result pattern: the value, its f32
    /// neighbours, the ties with the next pattern and their neighbours.
    fn around_every_pattern(to_f32: fn(u16) -> f32) -> Vec<f32> {
        let mut v = Vec::new();
        for h in 0..=u16::MAX {
            let x = to_f32(h).to_bits();
            let next = to_f32(h.wrapping_add(1)).to_bits();
            let tie = x.wrapping_add(next.wrapping_sub(x) / 2);
            for b in [
                x,
                x.wrapping_sub(1),
                x.wrapping_add(1),
                tie,
                tie.wrapping_sub(1),
                tie.wrapping_add(1),
            ] {
                v.push(f32::from_bits(b));
            }
        }
        v
    }

    fn f16_inputs() -> Vec<f32> {
        around_every_pattern(|h| half::f16::from_bits(h).to_f32())
    }

    fn bf16_inputs() -> Vec<f32> {
        let mut v = around_every_pattern(|h| half::bf16::from_bits(h).to_f32());
        // Exact low halves too: ties are 0x8000, neighbours 0x7fff / 0x8001.
        for hi in 0..=u16::MAX as u32 {
            for lo in [0x7fffu32, 0x8000, 0x8001, 0xffff] {
                v.push(f32::from_bits(hi << 16 | lo));
            }
        }
        v
    }

    /// Converts whole vectors with `store_f16` or `store_bf16`.
    fn convert<V: Simd>(v: V, xs: &[f32], f16: bool) -> Vec<u16> {
        let n = V::LANES;
        let mut out = vec![0u16; xs.len() / n * n];
        for (i, chunk) in xs.chunks_exact(n).enumerate() {
            // SAFETY: `chunk` holds LANES f32; `out` has room for LANES u16 at
            // `i * n`.
            unsafe {
                let y = v.load_f32(chunk.as_ptr().cast());
                let p = out.as_mut_ptr().add(i * n).cast::<u8>();
                if f16 {
                    v.store_f16(p, y)
                } else {
                    v.store_bf16(p, y)
                }
            }
        }
        out
    }

    fn check<V: Simd>(v: V, isa: &str) {
        let xs = f16_inputs();
        let got = convert(v, &xs, true);
        for (x, g) in xs.iter().zip(&got) {
            let want = half::f16::from_f32(*x).to_bits();
            assert_eq!(*g, want, "{isa} f16 of {:#010x}", x.to_bits());
        }
        let xs = bf16_inputs();
        let got = convert(v, &xs, false);
        for (x, g) in xs.iter().zip(&got) {
            let want = half::bf16::from_f32(*x).to_bits();
            assert_eq!(*g, want, "{isa} bf16 of {:#010x}", x.to_bits());
        }
    }

    #[target_feature(enable = "avx2,f16c")]
    fn check_avx2(v: Avx2) {
        check(v, "avx2")
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,f16c")]
    fn check_avx512(v: Avx512) {
        check(v, "avx512")
    }

    #[test]
    fn avx2_f16_bf16_stores_match_half_near_every_pattern() {
        match Avx2::new() {
            // SAFETY: the token proves the features.
            Some(v) => unsafe { check_avx2(v) },
            None => eprintln!("SKIPPED: avx2 not available on this CPU"),
        }
    }

    #[test]
    fn avx512_f16_bf16_stores_match_half_near_every_pattern() {
        match Avx512::new() {
            // SAFETY: the token proves the features.
            Some(v) => unsafe { check_avx512(v) },
            None => eprintln!("SKIPPED: avx512 not available on this CPU"),
        }
    }

    /// Every ISA's f32 -> f16 block conversion equals `half` near every f16
    /// pattern, into unaligned dst with odd lengths, and writes nothing else.
    #[test]
    fn f16_blocks_match_half_at_any_alignment() {
        type ConvertFn = unsafe fn(*mut u8, &[f32]);
        let xs = f16_inputs();
        let mut fns: Vec<(String, ConvertFn)> = vec![
            ("dispatch".into(), super::super::f32_to_f16),
            ("dispatch stream".into(), super::super::f32_to_f16_stream),
        ];
        for (isa, f, g) in [
            (
                Isa::Avx2,
                f32_to_f16_avx2 as ConvertFn,
                f32_to_f16_stream_avx2 as ConvertFn,
            ),
            (Isa::Avx512, f32_to_f16_avx512, f32_to_f16_stream_avx512),
        ] {
            if isa.available() {
                fns.push((isa.name().into(), f));
                fns.push((format!("{} stream", isa.name()), g));
            } else {
                eprintln!("SKIPPED: f32_to_f16 {}: not on this CPU", isa.name());
            }
        }
        for (name, f) in fns {
            let cuts = [
                (0, xs.len()),
                (1, xs.len() - 7),
                (2, xs.len() - 9),
                (34, 100),
            ];
            for (off, len) in cuts.into_iter().chain([(3, 5), (0, 0)]) {
                let x = &xs[..len];
                let mut dst = vec![0xaau8; 2 * len + off + 8];
                // SAFETY: dst holds off + 2 * len bytes; the ISA was checked above.
                unsafe { f(dst.as_mut_ptr().add(off), x) };
                super::super::stream_fence();
                for (i, v) in x.iter().enumerate() {
                    let got = u16::from_le_bytes([dst[off + 2 * i], dst[off + 2 * i + 1]]);
                    let want = half::f16::from_f32(*v).to_bits();
                    assert_eq!(got, want, "{name} off {off} of {:#010x}", v.to_bits());
                }
                assert!(
                    dst[..off].iter().all(|&b| b == 0xaa),
                    "{name}: wrote before"
                );
                let end = off + 2 * len;
                assert!(dst[end..].iter().all(|&b| b == 0xaa), "{name}: wrote after");
            }
        }
    }

    /// Every ISA's f32 -> bf16 block conversion equals `half` near every bf16
    /// pattern and at every tie, into unaligned dst with odd lengths, and writes
    /// nothing else.
    #[test]
    fn bf16_blocks_match_half_at_any_alignment() {
        type ConvertFn = unsafe fn(*mut u8, &[f32]);
        let xs = bf16_inputs();
        let mut fns: Vec<(&str, ConvertFn)> = vec![("dispatch", super::super::f32_to_bf16)];
        for (isa, f) in [
            (Isa::Avx2, f32_to_bf16_avx2 as ConvertFn),
            (Isa::Avx512, f32_to_bf16_avx512),
        ] {
            if isa.available() {
                fns.push((isa.name(), f));
            } else {
                eprintln!("SKIPPED: f32_to_bf16 {}: not on this CPU", isa.name());
            }
        }
        for (name, f) in fns {
            let n = xs.len();
            for (off, len) in [(0, n), (1, n - 7), (2, n - 33), (34, 100), (3, 5), (0, 0)] {
                let x = &xs[..len];
                let mut dst = vec![0xaau8; 2 * len + off + 8];
                // SAFETY: dst holds off + 2 * len bytes; the ISA was checked above.
                unsafe { f(dst.as_mut_ptr().add(off), x) };
                for (i, v) in x.iter().enumerate() {
                    let got = u16::from_le_bytes([dst[off + 2 * i], dst[off + 2 * i + 1]]);
                    let want = half::bf16::from_f32(*v).to_bits();
                    assert_eq!(got, want, "{name} off {off} of {:#010x}", v.to_bits());
                }
                assert!(
                    dst[..off].iter().all(|&b| b == 0xaa),
                    "{name}: wrote before"
                );
                let end = off + 2 * len;
                assert!(dst[end..].iter().all(|&b| b == 0xaa), "{name}: wrote after");
            }
        }
    }

    /// Every ISA's stream copy, at every head misalignment and odd lengths, copies
    /// exactly and writes nothing outside dst.
    #[test]
    fn stream_copies_are_exact_at_any_alignment() {
        type CopyFn = unsafe fn(*mut u8, &[u8]);
        let src: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        let mut copies: Vec<(&str, CopyFn)> = vec![("sse2", stream_copy_sse2)];
        for (isa, f) in [
            (Isa::Avx2, stream_copy_avx2 as CopyFn),
            (Isa::Avx512, stream_copy_avx512),
        ] {
            if isa.available() {
                copies.push((isa.name(), f));
            } else {
                eprintln!("SKIPPED: stream copy {}: not on this CPU", isa.name());
            }
        }
        copies.push(("dispatch", super::super::stream_copy));
        for (name, f) in copies {
            for off in 0..70 {
                for len in [0, 1, 15, 63, 64, 65, 200, 900] {
                    let mut dst = vec![0xaau8; 1100];
                    // SAFETY: dst holds off + len <= 970 bytes; no overlap; the
                    // ISA was checked above.
                    unsafe { f(dst.as_mut_ptr().add(off), &src[..len]) };
                    super::super::stream_fence();
                    let at = format!("{name} off {off} len {len}");
                    assert_eq!(&dst[off..off + len], &src[..len], "{at}");
                    assert!(dst[..off].iter().all(|&b| b == 0xaa), "{at}: wrote before");
                    assert!(
                        dst[off + len..].iter().all(|&b| b == 0xaa),
                        "{at}: wrote after"
                    );
                }
            }
        }
    }

    /// The four decoders at every code: rows of (e4m3, e5m2, e2m1 of the low
    /// nibble, e8m0) f32 bits.
    #[inline(always)]
    fn decode_every_code<V: Simd>(v: V) -> Vec<[u32; 4]> {
        let codes: Vec<u8> = (0..=255).collect();
        let nibbles: Vec<i32> = (0..256).map(|c| c & 15).collect();
        let mut out = vec![[0u32; 4]; 256];
        let mut lane = vec![0u32; V::LANES];
        for i in (0..256).step_by(V::LANES) {
            // SAFETY: i + LANES <= 256: LANES codes (bytes, i32) to read at i and
            // LANES f32 to write into `lane`.
            unsafe {
                let c = codes.as_ptr().add(i);
                let n = v.load_s32(nibbles.as_ptr().add(i).cast());
                let ys = [
                    v.load_f8_e4m3(c),
                    v.load_f8_e5m2(c),
                    v.f4_e2m1(n),
                    v.load_e8m0(c),
                ];
                for (t, y) in ys.into_iter().enumerate() {
                    v.store_f32(lane.as_mut_ptr().cast(), y, false);
                    for (j, b) in lane.iter().enumerate() {
                        out[i + j][t] = *b;
                    }
                }
            }
        }
        out
    }

    /// Every code of each decoder equals `minifloat`'s decode (NaN codes: some NaN
    /// for the f8 sources, NAN_BITS exactly for e8m0, whose NaN the multiply passes on).
    fn check_decoders(got: &[[u32; 4]], isa: &str) {
        use crate::minifloat::*;
        for c in 0..=255u8 {
            let want = [
                f8_e4m3_to_f32(c).to_bits(),
                f8_e5m2_to_f32(c).to_bits(),
                f4_e2m1_to_f32(c).to_bits(),
                e8m0_to_f32(c).to_bits(),
            ];
            for (t, name) in ["e4m3", "e5m2", "e2m1", "e8m0"].iter().enumerate() {
                let (g, w) = (got[c as usize][t], want[t]);
                if *name != "e8m0" && f32::from_bits(w).is_nan() {
                    assert!(f32::from_bits(g).is_nan(), "{isa} {name} {c:#x}: {g:#x}");
                } else {
                    assert_eq!(g, w, "{isa} {name} {c:#x}");
                }
            }
        }
    }

    #[target_feature(enable = "avx2,f16c")]
    fn decode_avx2(v: Avx2) -> Vec<[u32; 4]> {
        decode_every_code(v)
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,f16c")]
    fn decode_avx512(v: Avx512) -> Vec<[u32; 4]> {
        decode_every_code(v)
    }

    #[test]
    fn float_src_decoders_match_minifloat_at_every_code() {
        match Avx2::new() {
            // SAFETY: the token proves the features.
            Some(v) => check_decoders(&unsafe { decode_avx2(v) }, "avx2"),
            None => eprintln!("SKIPPED: avx2 not available on this CPU"),
        }
        match Avx512::new() {
            // SAFETY: the token proves the features.
            Some(v) => check_decoders(&unsafe { decode_avx512(v) }, "avx512"),
            None => eprintln!("SKIPPED: avx512 not available on this CPU"),
        }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,f16c")]
    fn minmax_avx512(v: Avx512, a: &[f32; 16], b: &[f32; 16]) -> ([f32; 16], [f32; 16]) {
        let (mut lo, mut hi) = ([0f32; 16], [0f32; 16]);
        // SAFETY: 16-element arrays.
        unsafe {
            let (x, y) = (v.load_f32(a.as_ptr().cast()), v.load_f32(b.as_ptr().cast()));
            _mm512_storeu_ps(lo.as_mut_ptr(), v.min(x, y));
            _mm512_storeu_ps(hi.as_mut_ptr(), v.max(x, y));
        }
        (lo, hi)
    }

    #[target_feature(enable = "avx2,f16c")]
    fn minmax_avx2(v: Avx2, a: &[f32; 16], b: &[f32; 16]) -> ([f32; 16], [f32; 16]) {
        let (mut lo, mut hi) = ([0f32; 16], [0f32; 16]);
        for h in [0, 8] {
            // SAFETY: 8 elements from h within 16-element arrays.
            unsafe {
                let x = v.load_f32(a.as_ptr().add(h).cast());
                let y = v.load_f32(b.as_ptr().add(h).cast());
                _mm256_storeu_ps(lo.as_mut_ptr().add(h), v.min(x, y));
                _mm256_storeu_ps(hi.as_mut_ptr().add(h), v.max(x, y));
            }
        }
        (lo, hi)
    }

    #[test]
    fn vector_min_max_follow_the_formula_rules() {
        let nan1 = f32::from_bits(0x7fc0_0001);
        let nan2 = f32::from_bits(0xffc0_0002);
        let vals = [0.0, -0.0, 1.0, -1.0, nan1, nan2, f32::INFINITY, 1e-45];
        let mut a = [0f32; 16];
        let mut b = [0f32; 16];
        let mut cases = Vec::new();
        for x in vals {
            for y in vals {
                cases.push((x, y));
            }
        }
        for chunk in cases.chunks(16) {
            for (i, &(x, y)) in chunk.iter().enumerate() {
                a[i] = x;
                b[i] = y;
            }
            let mut results = Vec::new();
            if let Some(v) = Avx512::new() {
                // SAFETY: the token proves the features.
                results.push(("avx512", unsafe { minmax_avx512(v, &a, &b) }));
            } else {
                eprintln!("SKIPPED: avx512 not available on this CPU");
            }
            if let Some(v) = Avx2::new() {
                // SAFETY: the token proves the features.
                results.push(("avx2", unsafe { minmax_avx2(v, &a, &b) }));
            } else {
                eprintln!("SKIPPED: avx2 not available on this CPU");
            }
            for (isa, (lo, hi)) in results {
                for i in 0..chunk.len() {
                    let want_lo = crate::formula::min(a[i], b[i]).to_bits();
                    let want_hi = crate::formula::max(a[i], b[i]).to_bits();
                    assert_eq!(lo[i].to_bits(), want_lo, "{isa} min({}, {})", a[i], b[i]);
                    assert_eq!(hi[i].to_bits(), want_hi, "{isa} max({}, {})", a[i], b[i]);
                }
            }
        }
    }
}
