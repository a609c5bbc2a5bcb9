//! The fast path's AVX-512 VBMI code.

use core::arch::x86_64::*;
use std::ops::Range;

use super::super::Linear;
use super::super::out::Out;
use super::super::view::{Groups, Packing, ScaleType};
use super::{Kind, LINE, SUB};
use crate::DType;
use crate::arch::Simd;
use crate::arch::x86_64::Avx512;

/// Word rows the loads are prefetched ahead.
const AHEAD: usize = 64;

/// Rows `tiles` (whole tiles of `kind`) of `l` into `out` (`tiles.len() * K`
/// elements of f16 or bf16).
///
/// # Safety
/// The CPU has AVX-512 F/BW/VL/DQ/VBMI, AVX2 and F16C.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi,avx2,f16c")]
pub(super) unsafe fn run<T: Out>(kind: Kind, l: &Linear<'_>, tiles: Range<usize>, out: &mut [T]) {
    let Some(out) = T::as_bits16(out) else {
        return;
    };
    let (k, rows) = (l.k, kind.rows());
    if kind == Kind::Outer {
        // Tiles side by side, `SIDE` at a time while they last (see `outer`).
        let (mut n0, mut rest) = (tiles.start, out);
        while n0 < tiles.end {
            let side = if tiles.end - n0 >= SIDE * rows {
                SIDE
            } else {
                1
            };
            let (now, later) = rest.split_at_mut(side * rows * k);
            let mut parts = now.chunks_exact_mut(rows * k).map(|t| Rows::new(t, k));
            if side == SIDE {
                outer::<T, SIDE>(l, n0, &mut core::array::from_fn(|_| parts.next().unwrap()));
            } else {
                outer::<T, 1>(l, n0, &mut [parts.next().unwrap()]);
            }
            (n0, rest) = (n0 + side * rows, later);
        }
    } else {
        for (t, n0) in tiles.step_by(rows).enumerate() {
            let tile = &mut out[t * rows * k..(t + 1) * rows * k];
            inner::<T>(l, n0, &mut Rows::new(tile, k));
        }
    }
    _mm_sfence();
}

/// AWQ tiles run side by side: each group's inputs of `SIDE` adjacent tiles in
/// turn, so the words of an input row are read as `SIDE` adjacent lines close in
/// time. On AMD EPYC (Zen 4) reading one line per input row, tile after tile, ran
/// several times slower than four lines per row (BENCHMARKS.md).
const SIDE: usize = 4;

/// A tile's `R` rows of K outputs (a multiple of 32), their starts `delta`
/// elements past a 64-byte line, taken 32 outputs of a row at a time in order of
/// input: each whole line of output, from the row's previous 32 outputs and these,
/// goes out with a non-temporal store (no read of the line). A line across two
/// rows is written whole when the second row's first outputs come (kept in
/// `first`); only the tile's first and last lines are partial (masked ordinary
/// stores).
struct Rows<'o, const R: usize> {
    out: &'o mut [u16],
    k: usize,
    delta: usize,
    /// Outputs `32 - delta..32` of one register, then `0..32 - delta` of another.
    idx: __m512i,
    /// Elements `0..32 - delta`.
    head: u32,
    prev: [__m512i; R],
    first: [__m512i; R],
}

impl<'o, const R: usize> Rows<'o, R> {
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi,avx2,f16c")]
    fn new(out: &'o mut [u16], k: usize) -> Self {
        assert!(out.len() == R * k && k.is_multiple_of(32) && k >= 64);
        let delta = (out.as_ptr() as usize % 64) / 2;
        let ix: [u16; 32] = core::array::from_fn(|i| (i + 32 - delta) as u16);
        Rows {
            out,
            k,
            delta,
            // SAFETY: 64 bytes, unaligned load.
            idx: unsafe { _mm512_loadu_si512(ix.as_ptr().cast()) },
            head: (u64::MAX >> (32 + delta)) as u32,
            prev: [_mm512_setzero_si512(); R],
            first: [_mm512_setzero_si512(); R],
        }
    }

    /// Outputs `k0..k0 + 32` (`k0` a multiple of 32) of row `r`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi,avx2,f16c")]
    #[inline]
    fn put(&mut self, r: usize, k0: usize, y: __m512i) {
        let (k, d) = (self.k, self.delta);
        assert!(r < R && k0 + 32 <= k);
        // SAFETY (every store below): the row's elements `r K..(r + 1) K` lie in
        // `out` (`R K` elements, `r < R`); each store writes 32 elements from an
        // offset inside them (`k0 + 32 <= K`; `k0 >= 32 > d` for `k0 - d`; the
        // next row's start less `d` is `r K + K - d >= r K`), `(r + 1) K` at most
        // when `r + 1 < R`; non-temporal stores start `d` elements before a multiple
        // of 32 from a row start, a 64-byte line (the row starts `d` past one and
        // 2 K is a multiple of 64).
        let row = unsafe { self.out.as_mut_ptr().add(r * k) };
        if k0 == 0 {
            if d == 0 {
                unsafe { _mm512_stream_si512(row.cast(), y) };
            } else if r == 0 {
                unsafe { _mm512_mask_storeu_epi16(row.cast(), self.head, y) };
            }
            self.first[r] = y;
        } else {
            let line = _mm512_permutex2var_epi16(self.prev[r], self.idx, y);
            unsafe { _mm512_stream_si512(row.add(k0 - d).cast(), line) };
        }
        if k0 + 32 == k && d > 0 {
            if r + 1 < R {
                let line = _mm512_permutex2var_epi16(y, self.idx, self.first[r + 1]);
                unsafe { _mm512_stream_si512(row.add(k - d).cast(), line) };
            } else {
                unsafe { _mm512_mask_storeu_epi16(row.add(k0).cast(), !self.head, y) };
            }
        }
        self.prev[r] = y;
    }
}

/// The tables of rows `n0..n0 + tabs.len()` (a multiple of 16), group `g`: row
/// `n0 + r`'s 16 outputs (fields 0..16) repeated in both halves of `tabs[r]`, by
/// the formula `f32(q - z) * s` and the AVX-512 rounding of `T`
/// ([`Avx512::tab16_bf16x2`]: two rows rounded and packed at once;
/// [`Avx512::tab16_f16`]). The parameters of 16 rows are read at once
/// ([`params16`]).
///
/// # Safety
/// The CPU has AVX-512 F/BW/VL/DQ and F16C (inlined into the callers that enable
/// them: a call per table cost a tenth of the time).
#[inline(always)]
unsafe fn tables<T: Out>(l: &Linear<'_>, n0: usize, g: usize, tabs: &mut [__m512i]) {
    debug_assert!(tabs.len().is_multiple_of(16));
    // SAFETY: the caller's features.
    let v = unsafe { Avx512::new_unchecked() };
    for (i, tabs) in tabs.chunks_exact_mut(16).enumerate() {
        // SAFETY: the caller's features.
        let (z, s) = unsafe { params16(v, l, n0 + 16 * i, g) };
        let (mut zs, mut ss) = ([0i32; 16], [0f32; 16]);
        // SAFETY: 64 writable bytes each, unaligned stores.
        unsafe {
            _mm512_storeu_si512(zs.as_mut_ptr().cast(), z);
            _mm512_storeu_ps(ss.as_mut_ptr(), s);
        }
        if T::OUT == DType::BF16 {
            for (r, t) in tabs.chunks_exact_mut(2).enumerate() {
                let (r0, r1) = (2 * r, 2 * r + 1);
                // SAFETY: the caller's features.
                let (a, b) = unsafe { (product(zs[r0], ss[r0]), product(zs[r1], ss[r1])) };
                t.copy_from_slice(&v.tab16_bf16x2(a, b));
            }
        } else {
            for (r, t) in tabs.iter_mut().enumerate() {
                // SAFETY: the caller's features.
                *t = v.tab16_f16(unsafe { product(zs[r], ss[r]) });
            }
        }
    }
}

/// The f32 products `f32(q - z) * s` of fields `q = 0..16`.
///
/// # Safety
/// The CPU has AVX-512 F.
#[inline(always)]
unsafe fn product(z: i32, s: f32) -> __m512 {
    // SAFETY: the caller's features.
    unsafe {
        let iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        let d = _mm512_sub_epi32(iota, _mm512_set1_epi32(z));
        _mm512_mul_ps(_mm512_cvtepi32_ps(d), _mm512_set1_ps(s))
    }
}

/// Zero points (less the weights' offset) and scales of rows `n..n + 16`, group
/// `g`, exactly as [`Linear::params`] reads them: with vector loads where rows are
/// adjacent (GPTQ's and AWQ's scales and zero points), else row by row.
///
/// # Safety
/// The CPU has AVX-512 F/BW/VL/DQ and F16C.
#[inline(always)]
unsafe fn params16(v: Avx512, l: &Linear<'_>, n: usize, g: usize) -> (__m512i, __m512) {
    let sc = &l.scales;
    let at = n * sc.row_stride + g * sc.col_stride;
    // SAFETY (the loads): each reads the 16 elements of a slice of exactly their
    // bytes (bounds checked by the indexing); the caller's features.
    let s = match sc.dtype {
        _ if sc.row_stride != 1 => unsafe {
            _mm512_loadu_ps(core::array::from_fn::<f32, 16, _>(|r| sc.get(n + r, g)).as_ptr())
        },
        ScaleType::F16 => unsafe { v.load_f16(sc.bytes[2 * at..2 * at + 32].as_ptr()) },
        ScaleType::BF16 => unsafe { v.load_bf16(sc.bytes[2 * at..2 * at + 32].as_ptr()) },
        ScaleType::F32 => unsafe { v.load_f32(sc.bytes[4 * at..4 * at + 64].as_ptr()) },
    };
    // SAFETY: the caller's features.
    let (off, none) = unsafe { (_mm512_set1_epi32(l.weights.offset), _mm512_setzero_si512()) };
    let z = match &l.zeros {
        None => none,
        Some(zp) => match zp.packing {
            Packing::Outer { order } if zp.bits == 4 && zp.row_stride == 1 => {
                // Rows n..n + 16 lie in the 2 or 3 words from word n / 8 of the
                // group's row; lane r takes word (n % 8 + r) / 8 of them.
                let (first, skew) = (n / 8 + g * zp.col_stride, n % 8);
                let count = (skew + 15) / 8 + 1;
                let mut words = [0u32; 4];
                for (w, b) in words
                    .iter_mut()
                    .zip(zp.words[4 * first..4 * (first + count)].chunks_exact(4))
                {
                    *w = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                }
                let pick: [u32; 16] = core::array::from_fn(|r| ((skew + r) / 8) as u32);
                let shift: [u32; 16] =
                    core::array::from_fn(|r| 4 * u32::from(order[(skew + r) % 8]));
                // SAFETY: 16 bytes of `words`, 64 of `pick` and `shift`; the
                // caller's features.
                unsafe {
                    let words = _mm512_castsi128_si512(_mm_loadu_si128(words.as_ptr().cast()));
                    let words =
                        _mm512_permutexvar_epi32(_mm512_loadu_si512(pick.as_ptr().cast()), words);
                    let shift = _mm512_loadu_si512(shift.as_ptr().cast());
                    let f =
                        _mm512_and_si512(_mm512_srlv_epi32(words, shift), _mm512_set1_epi32(15));
                    _mm512_add_epi32(f, _mm512_set1_epi32(zp.offset))
                }
            }
            // SAFETY: 64 bytes, unaligned load.
            _ => unsafe {
                _mm512_loadu_si512(
                    core::array::from_fn::<i32, 16, _>(|r| zp.get(n + r, g))
                        .as_ptr()
                        .cast(),
                )
            },
        },
    };
    // SAFETY: the caller's features.
    (unsafe { _mm512_sub_epi32(z, off) }, s)
}

/// The 64 bytes of words `first..first + 16` of `l`'s weights.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi,avx2,f16c")]
#[inline]
fn line(l: &Linear<'_>, first: usize) -> __m512i {
    let b = l.weights.run(first, LINE, 1);
    assert!(b.len() == 64);
    // SAFETY: `b` is 64 bytes (asserted); unaligned load.
    unsafe { _mm512_loadu_si512(b.as_ptr().cast()) }
}

/// Prefetches the line of word `i` of `l`'s weights into L2 (any `i`: the
/// address is only formed, never dereferenced, and a prefetch does not fault).
#[inline(always)]
fn prefetch(l: &Linear<'_>, i: usize) {
    let p = l.weights.words.as_ptr().wrapping_add(4 * i);
    // SAFETY: a prefetch reads nothing the program sees and never faults.
    unsafe { _mm_prefetch::<_MM_HINT_T1>(p.cast()) };
}

/// Rows `n0..n0 + 64`, words along K, into `out` (64 rows of K).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi,avx2,f16c")]
fn inner<T: Out>(l: &Linear<'_>, n0: usize, out: &mut Rows<'_, { LINE * SUB }>) {
    const ROWS: usize = LINE * SUB;
    let Groups::Size(gs) = l.map else {
        return;
    };
    let (k, cs) = (l.k, l.weights.col_stride);
    // Output qword q of a row takes qword q / 4 of its 128-bit lane (`lanes`); its
    // 16-bit lane i gets the nibble at bit 16 (q % 4) + 4 i of it (`ctrl`).
    let lanes: [__m512i; 4] = core::array::from_fn(|i| {
        let (a, b) = (2 * i as i64, 2 * i as i64 + 1);
        _mm512_set_epi64(b, b, b, b, a, a, a, a)
    });
    let ctrl = _mm512_set1_epi64(i64::from_le_bytes([0, 0, 4, 4, 8, 8, 12, 12]));
    let ones = 0x0101_0101_0101_0101;
    let step = _mm512_set_epi64(
        48 * ones,
        32 * ones,
        16 * ones,
        0,
        48 * ones,
        32 * ones,
        16 * ones,
        0,
    );
    let ctrl = _mm512_add_epi8(ctrl, step);
    let mut tabs = [_mm512_setzero_si512(); ROWS];
    for g in 0..k.div_ceil(gs) {
        // SAFETY: this function enables the features `tables` needs.
        unsafe { tables::<T>(l, n0, g, &mut tabs) };
        for k0 in (g * gs..((g + 1) * gs).min(k)).step_by(32) {
            let kw = k0 / 8;
            for i in 0..4 {
                for s in 0..SUB {
                    prefetch(l, (kw + AHEAD + i) * cs + n0 + LINE * s);
                }
            }
            for s in 0..SUB {
                let r: [__m512i; 4] =
                    core::array::from_fn(|i| line(l, (kw + i) * cs + n0 + LINE * s));
                let a0 = _mm512_unpacklo_epi32(r[0], r[1]);
                let a1 = _mm512_unpackhi_epi32(r[0], r[1]);
                let a2 = _mm512_unpacklo_epi32(r[2], r[3]);
                let a3 = _mm512_unpackhi_epi32(r[2], r[3]);
                // b[m], 128-bit lane i: words kw..kw + 4 of row 4 i + m.
                let b = [
                    _mm512_unpacklo_epi64(a0, a2),
                    _mm512_unpackhi_epi64(a0, a2),
                    _mm512_unpacklo_epi64(a1, a3),
                    _mm512_unpackhi_epi64(a1, a3),
                ];
                for (m, &bm) in b.iter().enumerate() {
                    for (i, &lane) in lanes.iter().enumerate() {
                        let row = LINE * s + 4 * i + m;
                        let x = _mm512_permutexvar_epi64(lane, bm);
                        let ix = _mm512_multishift_epi64_epi8(ctrl, x);
                        let y = _mm512_permutexvar_epi16(ix, tabs[row]);
                        out.put(row, k0, y);
                    }
                }
            }
        }
    }
}

/// 16x16 words transposed: word `j` of `r[i]` to word `i` of `r[j]`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi,avx2,f16c")]
#[inline]
fn transpose16(r: &mut [__m512i; 16]) {
    let mut t = [_mm512_setzero_si512(); 16];
    for i in 0..8 {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    // u[4i + m], 128-bit lane L: words 4L + m of rows 4i..4i + 4.
    let mut u = [_mm512_setzero_si512(); 16];
    for i in 0..4 {
        u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for m in 0..4 {
        let p0 = _mm512_shuffle_i32x4::<0x44>(u[m], u[4 + m]);
        let p1 = _mm512_shuffle_i32x4::<0xee>(u[m], u[4 + m]);
        let q0 = _mm512_shuffle_i32x4::<0x44>(u[8 + m], u[12 + m]);
        let q1 = _mm512_shuffle_i32x4::<0xee>(u[8 + m], u[12 + m]);
        r[m] = _mm512_shuffle_i32x4::<0x88>(p0, q0);
        r[4 + m] = _mm512_shuffle_i32x4::<0xdd>(p0, q0);
        r[8 + m] = _mm512_shuffle_i32x4::<0x88>(p1, q1);
        r[12 + m] = _mm512_shuffle_i32x4::<0xdd>(p1, q1);
    }
}

/// Tiles `W` of 128 rows from `n0` (tile `t`: word columns `n0 / 8 + 16 t` and
/// the 15 after), words along N, into `outs`: per group and tile, blocks of 128
/// inputs (then 64, then 32).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi,avx2,f16c")]
fn outer<T: Out, const W: usize>(
    l: &Linear<'_>,
    n0: usize,
    outs: &mut [Rows<'_, { 8 * LINE }>; W],
) {
    let Groups::Size(gs) = l.map else {
        return;
    };
    let k = l.k;
    let mut tabs = [_mm512_setzero_si512(); 8 * LINE];
    for g in 0..k.div_ceil(gs) {
        for (t, out) in outs.iter_mut().enumerate() {
            let n0 = n0 + 8 * LINE * t;
            // SAFETY: this function enables the features `tables` needs.
            unsafe { tables::<T>(l, n0, g, &mut tabs) };
            // A block never holds both a row's first and last outputs (the first are
            // kept for the line across rows, written with the previous row's last).
            let (mut k0, end) = (g * gs, ((g + 1) * gs).min(k));
            while k0 + 128 <= end && (k0 > 0 || k > 128) {
                block::<4>(l, n0, k0, &tabs, out);
                k0 += 128;
            }
            while k0 + 64 <= end && (k0 > 0 || k > 64) {
                block::<2>(l, n0, k0, &tabs, out);
                k0 += 64;
            }
            while k0 < end {
                block::<1>(l, n0, k0, &tabs, out);
                k0 += 32;
            }
        }
    }
}

/// Inputs `k0..k0 + 32 S` (one group, tables `tabs`) of rows `n0..n0 + 128`,
/// written a row at a time: `S` adjacent lines of a row in a burst (with one line
/// per row per 32 inputs, 128 rows apart, the stores ran a fifth slower).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi,avx2,f16c")]
#[inline]
fn block<const S: usize>(
    l: &Linear<'_>,
    n0: usize,
    k0: usize,
    tabs: &[__m512i; 8 * LINE],
    out: &mut Rows<'_, { 8 * LINE }>,
) {
    let Packing::Outer { order } = l.weights.packing else {
        return;
    };
    let (cs, c0) = (l.weights.col_stride, n0 / 8);
    // Byte b of words 0..32 (16 from each source) into the low bytes of 32 lanes.
    let pick: [__m512i; 4] = core::array::from_fn(|b| {
        let ix: [u8; 64] = core::array::from_fn(|i| (4 * (i / 2) + b) as u8);
        // SAFETY: 64 bytes, unaligned load.
        unsafe { _mm512_loadu_si512(ix.as_ptr().cast()) }
    });
    // Words not on a line (the checkpoint's tensor offset) span two lines.
    let split = !(l.weights.words.as_ptr() as usize + 4 * c0).is_multiple_of(64)
        || !(4 * cs).is_multiple_of(64);
    for i in 0..32 * S {
        prefetch(l, (k0 + 2 * AHEAD + i) * cs + c0);
        if split {
            prefetch(l, (k0 + 2 * AHEAD + i) * cs + c0 + LINE - 1);
        }
    }
    // Transposed, `w[s][h][c]` holds column c0 + c at inputs k0 + 32 s + 16 h and
    // the 15 after.
    let w: [[[__m512i; LINE]; 2]; S] = core::array::from_fn(|s| {
        core::array::from_fn(|h| {
            let mut x = core::array::from_fn(|i| line(l, (k0 + 32 * s + 16 * h + i) * cs + c0));
            transpose16(&mut x);
            x
        })
    });
    // `c` indexes the innermost arrays of `w` and names the rows `8 c..8 c + 8`.
    #[allow(clippy::needless_range_loop)]
    for c in 0..LINE {
        // `f[s][b]`: byte b of column c's words at k0 + 32 s..k0 + 32 s + 32.
        let f: [[__m512i; 4]; S] = core::array::from_fn(|s| {
            core::array::from_fn(|b| _mm512_permutex2var_epi8(w[s][0][c], pick[b], w[s][1][c]))
        });
        for (j, &field) in order.iter().enumerate() {
            let row = 8 * c + j;
            for (s, fs) in f.iter().enumerate() {
                let x = fs[usize::from(field / 2)];
                let x = if field % 2 == 1 {
                    _mm512_srli_epi16::<4>(x)
                } else {
                    x
                };
                out.put(row, k0 + 32 * s, _mm512_permutexvar_epi16(x, tabs[row]));
            }
        }
    }
}
