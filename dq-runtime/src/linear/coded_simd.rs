//! The coded driver's vector paths ([`Coded`] on AVX2 and AVX-512), generic
//! over the ISA's [`Simd`] token, so each ISA compiles them with its own vectors:
//! - 4-bit codes: per run of one group, the group's 16 outputs by the formula in
//!   vectors (base values times the scale, the post step, one rounding), then the
//!   codes looked up in them [`Simd::LUT16`] (16-bit outputs) or
//!   [`Simd::LANES`] (f32) at a time; high-nibble-first bytes are swapped first;
//! - 8-bit codes whose base value is the code (signed or unsigned): the formula
//!   on [`Simd::LANES`] codes a step;
//! - 4-bit codes along N (gpt-oss' `[E, K, N]`): each of 8 columns' run of one
//!   group looked up into a tile, then written to the output rows as 8x8
//!   transposes in registers.
//!
//! Every output is the formula's value rounded once, as the scalar driver gives
//! it ([`Coded::value`]); other widths and tables take the scalar driver.

use core::arch::x86_64::*;
use std::ops::Range;

use super::coded::{BitOrder, CHUNK, Coded, Post, float};
use super::{Out, ScaleType};
use crate::DType;
use crate::arch::Simd;

/// Which vector path runs a declaration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Path {
    /// 4-bit codes along K (column stride 1): runs along each row.
    Rows4,
    /// 8-bit codes along K whose base value is the code, signed or not.
    Rows8 {
        /// `base[q] = q as i8`.
        signed: bool,
    },
    /// 4-bit codes along N in aligned runs of one group per column.
    Columns4,
}

/// The vector path of `c`, if it has one.
pub(super) fn path(c: &Coded<'_>) -> Option<Path> {
    let (o, rs, cs) = c.strides();
    let (bits, gs) = (c.codes().bits, c.group_size());
    let used = &c.base()[..1 << bits];
    let is = |f: fn(usize) -> f32| {
        used.iter()
            .enumerate()
            .all(|(q, &b)| b.to_bits() == f(q).to_bits())
    };
    match bits {
        4 if cs == 1 => Some(Path::Rows4),
        4 if rs == 1 && gs <= TILE && cs.is_multiple_of(gs) && o.is_multiple_of(gs) => {
            Some(Path::Columns4)
        }
        8 if cs == 1 && is(|q| q as f32) => Some(Path::Rows8 { signed: false }),
        8 if cs == 1 && is(|q| f32::from(q as u8 as i8)) => Some(Path::Rows8 { signed: true }),
        _ => None,
    }
}

/// Rows `rows` of `c` into `out` (checked by the caller) on `path`.
#[inline(always)]
pub(super) fn run<V: Simd, T: Out>(
    v: V,
    c: &Coded<'_>,
    path: Path,
    rows: Range<usize>,
    out: &mut [T],
) {
    let (o, rs, _) = c.strides();
    let (k_dim, gs) = (c.k(), c.group_size());
    if k_dim == 0 {
        return;
    }
    if path == Path::Columns4 {
        return columns(v, c, rows, out);
    }
    // Groups shorter than two table lookups: the formula per vector instead.
    // SAFETY: the base table holds 256 f32 (tab32 reads the first 16).
    let direct = (path == Path::Rows4 && gs < 2 * V::LUT16)
        .then(|| unsafe { v.tab32(c.base().as_ptr().cast()) });
    let mut swap = [0u8; CHUNK / 2];
    for (n, row) in rows.zip(out.chunks_exact_mut(k_dim)) {
        let start = o + n * rs;
        let mut k = 0;
        while k < k_dim {
            let p = start + k;
            let g = p / gs;
            let end = ((g + 1) * gs - start).min(k_dim).min(k + CHUNK);
            let y = &mut row[k..end];
            match path {
                Path::Rows8 { signed } => affine8(v, c, g, p, signed, y),
                _ => match direct {
                    Some(base) => formula4(v, c, base, g, p, y, &mut swap),
                    None => Table::new::<T>(v, c, g).lookup(v, c, p, y, &mut swap),
                },
            }
            k = end;
        }
    }
}

/// The post step of group `g` in vectors.
#[derive(Clone, Copy)]
enum PostV<F> {
    None,
    Mul(F),
    Add(F, ScaleType),
}

impl<F: Copy> PostV<F> {
    #[inline(always)]
    fn new<V: Simd<Float = F>>(v: V, c: &Coded<'_>, g: usize) -> Self {
        match c.post() {
            Post::None => PostV::None,
            Post::Mul(m) => PostV::Mul(v.splat_float(m)),
            Post::Add { bytes, dtype } => PostV::Add(v.splat_float(float(bytes, dtype, g)), dtype),
        }
    }

    /// `post(x)`, as [`Coded`]'s formula.
    #[inline(always)]
    fn apply<V: Simd<Float = F>>(self, v: V, x: F) -> F {
        match self {
            PostV::None => x,
            PostV::Mul(m) => v.mul(x, m),
            PostV::Add(b, dtype) => round(v, v.add(round(v, x, dtype), b), dtype),
        }
    }
}

/// `x` rounded (nearest-even) to `dtype` and back, as the scalar `round`.
#[inline(always)]
fn round<V: Simd>(v: V, x: V::Float, dtype: ScaleType) -> V::Float {
    let mut b = Line([0; 64]);
    let p = b.0.as_mut_ptr();
    // SAFETY: at most 16 lanes of 2 bytes, inside the 64-byte buffer.
    unsafe {
        match dtype {
            ScaleType::F32 => x,
            ScaleType::BF16 => {
                v.store_bf16(p, x);
                v.load_bf16(p)
            }
            ScaleType::F16 => {
                v.store_f16(p, x);
                v.load_f16(p)
            }
        }
    }
}

/// Stores `y` as `LANES` elements of `T`, rounded once (f32: NaN quieted, as
/// [`Out::of`]).
///
/// # Safety
/// `p` is valid for writing `LANES` elements of `T`.
#[inline(always)]
unsafe fn store<V: Simd, T: Out>(v: V, p: *mut u8, y: V::Float) {
    // SAFETY: the caller's span.
    unsafe {
        match T::OUT {
            DType::F32 => v.store_f32(p, y, true),
            DType::F16 => v.store_f16(p, y),
            _ => v.store_bf16(p, y),
        }
    }
}

/// 64 bytes on a line.
#[repr(align(64))]
struct Line([u8; 64]);

/// A group's 16 outputs: their bits at `bits` (16 elements of `T`) and as the
/// ISA's lookup table.
struct Table<V: Simd> {
    bits: Line,
    t16: Option<V::Tab16>,
    t32: Option<V::Tab32>,
}

impl<V: Simd> Table<V> {
    /// Group `g`'s outputs for codes 0..16 in `T`.
    #[inline(always)]
    fn new<T: Out>(v: V, c: &Coded<'_>, g: usize) -> Self {
        let s = v.splat_float(c.scale_of(g));
        let post = PostV::new(v, c, g);
        let mut bits = Line([0; 64]);
        let size = size_of::<T>();
        debug_assert!(16 % V::LANES == 0);
        for j in (0..16).step_by(V::LANES) {
            // SAFETY: the base table holds 256 f32 and j + LANES <= 16 (LANES is
            // 8 or 16); `bits` holds 16 elements of up to 4 bytes.
            unsafe {
                let x = v.load_f32(c.base().as_ptr().add(j).cast());
                let y = post.apply(v, v.mul(x, s));
                store::<V, T>(v, bits.0.as_mut_ptr().add(j * size), y);
            }
        }
        // SAFETY: `bits` holds 64 bytes (tab32 reads 64, tab16 32).
        let (t16, t32) = unsafe {
            match size {
                4 => (None, Some(v.tab32(bits.0.as_ptr()))),
                _ => (Some(v.tab16(bits.0.as_ptr())), None),
            }
        };
        Table { bits, t16, t32 }
    }

    /// Output of code `q` (below 16).
    #[inline(always)]
    fn entry<T: Out>(&self, q: usize) -> T {
        assert!(q < 16);
        // SAFETY: `bits` holds 16 elements of `T` (f32, f16 or bf16: every bit
        // pattern is a value) on a 64-byte line, so element `q` is aligned.
        unsafe { self.bits.0.as_ptr().cast::<T>().add(q).read() }
    }

    /// `out[i]` = the output of code `p + i` (`swap`: room for swapped nibbles).
    #[inline(always)]
    fn lookup<T: Out>(
        &self,
        v: V,
        c: &Coded<'_>,
        p: usize,
        out: &mut [T],
        swap: &mut [u8; CHUNK / 2],
    ) {
        let codes = c.codes();
        let mut i = 0;
        if !p.is_multiple_of(2) && !out.is_empty() {
            out[0] = self.entry(codes.get(p));
            i = 1;
        }
        let whole = (out.len() - i) / 2 * 2;
        let src = low_first(c, (p + i) / 2, whole / 2, swap);
        let y = &mut out[i..];
        let step = match (self.t16, self.t32) {
            (Some(_), _) => V::LUT16,
            _ => V::LANES,
        };
        let steps = whole / step * step;
        for j in (0..steps).step_by(step) {
            // SAFETY: `src` holds `whole / 2` bytes and `y` at least `whole`
            // elements; a step reads `step / 2` bytes at `j / 2` and writes `step`
            // elements at `j`, with `j + step <= whole`.
            unsafe {
                let (s, d) = (src.as_ptr().add(j / 2), y.as_mut_ptr().add(j).cast());
                match (self.t16, self.t32) {
                    (Some(t), _) => v.lut16(t, s, d),
                    (_, Some(t)) => v.lut32(t, s, d),
                    _ => {}
                }
            }
        }
        for (j, o) in y.iter_mut().enumerate().skip(steps) {
            *o = self.entry(codes.get(p + i + j));
        }
    }
}

/// Bytes `at..at + len` of `c`'s 4-bit codes, low nibble first: as they lie, or
/// swapped into `buf`.
#[inline(always)]
fn low_first<'b>(c: &Coded<'b>, at: usize, len: usize, buf: &'b mut [u8; CHUNK / 2]) -> &'b [u8] {
    let codes = c.codes();
    match codes.order {
        BitOrder::Lsb => &codes.bytes[at..at + len],
        BitOrder::HighNibbleFirst => {
            let s = &mut buf[..len];
            for (d, &b) in s.iter_mut().zip(&codes.bytes[at..at + len]) {
                *d = b.rotate_left(4);
            }
            s
        }
    }
}

/// One run of group `g` of 4-bit codes at `p`, the formula on `LANES` codes a
/// step (their base values looked up in `base`, the first 16 base values).
#[inline(always)]
fn formula4<V: Simd, T: Out>(
    v: V,
    c: &Coded<'_>,
    base: V::Tab32,
    g: usize,
    p: usize,
    out: &mut [T],
    swap: &mut [u8; CHUNK / 2],
) {
    let scale = c.scale_of(g);
    let (s, post) = (v.splat_float(scale), PostV::new(v, c, g));
    let codes = c.codes();
    let mut i = 0;
    if !p.is_multiple_of(2) && !out.is_empty() {
        out[0] = T::of(c.formula(codes.get(p), scale, g));
        i = 1;
    }
    let whole = (out.len() - i) / V::LANES * V::LANES;
    let src = low_first(c, (p + i) / 2, whole / 2, swap);
    let mut buf = Line([0; 64]);
    let y = &mut out[i..];
    for j in (0..whole).step_by(V::LANES) {
        // SAFETY: `src` holds `whole / 2` bytes and `y` at least `whole`
        // elements; a step reads `LANES / 2` bytes at `j / 2`, writes `LANES`
        // f32 (at most 64 bytes) into `buf` and `LANES` elements at `j`.
        unsafe {
            v.lut32(base, src.as_ptr().add(j / 2), buf.0.as_mut_ptr());
            let x = post.apply(v, v.mul(v.load_f32(buf.0.as_ptr()), s));
            store::<V, T>(v, y.as_mut_ptr().add(j).cast(), x);
        }
    }
    for (j, o) in y.iter_mut().enumerate().skip(whole) {
        *o = T::of(c.formula(codes.get(p + i + j), scale, g));
    }
}

/// One run of group `g` of 8-bit codes at `p` whose base value is the code.
#[inline(always)]
fn affine8<V: Simd, T: Out>(v: V, c: &Coded<'_>, g: usize, p: usize, signed: bool, out: &mut [T]) {
    let scale = c.scale_of(g);
    let (s, post) = (v.splat_float(scale), PostV::new(v, c, g));
    let codes = &c.codes().bytes[p..p + out.len()];
    let whole = out.len() / V::LANES * V::LANES;
    for j in (0..whole).step_by(V::LANES) {
        // SAFETY: `codes` and `out` hold `out.len()` elements and
        // `j + LANES <= whole <= out.len()`.
        unsafe {
            let src = codes.as_ptr().add(j);
            let q = if signed {
                v.load_s8(src)
            } else {
                v.load_u8(src)
            };
            let y = post.apply(v, v.mul(v.float(q), s));
            store::<V, T>(v, out.as_mut_ptr().add(j).cast(), y);
        }
    }
    for (o, &q) in out[whole..].iter_mut().zip(&codes[whole..]) {
        *o = T::of(c.formula(usize::from(q), scale, g));
    }
}

/// Rows per tile of the column path (groups along N are at most this long).
const TILE: usize = 128;

/// Rows `rows` where 4-bit codes run along N in aligned runs of one group: per
/// [`TILE`] rows and 8 columns, each column's runs of one group looked up into a
/// tile, then the tile transposed into the output rows.
#[inline(always)]
fn columns<V: Simd, T: Out>(v: V, c: &Coded<'_>, rows: Range<usize>, out: &mut [T]) {
    let (o, _, cs) = c.strides();
    let (k_dim, gs) = (c.k(), c.group_size());
    let mut tile = [[T::of(0.0); TILE]; 8];
    let mut swap = [0u8; CHUNK / 2];
    let mut n0 = rows.start;
    while n0 < rows.end {
        // A tile's rows read whole lines of each column's codes (several groups).
        let n1 = (n0 + TILE).min(rows.end);
        let len = n1 - n0;
        let at = (n0 - rows.start) * k_dim;
        for k0 in (0..k_dim).step_by(8) {
            let kc = (k_dim - k0).min(8);
            for (j, col) in tile.iter_mut().enumerate().take(kc) {
                let mut r = n0;
                while r < n1 {
                    let e = ((r / gs + 1) * gs).min(n1);
                    let p = o + r + (k0 + j) * cs;
                    let run = &mut col[r - n0..e - n0];
                    Table::new::<T>(v, c, p / gs).lookup(v, c, p, run, &mut swap);
                    r = e;
                }
            }
            let blocks = if kc == 8 { len / 8 * 8 } else { 0 };
            for i in (0..blocks).step_by(8) {
                let dst = &mut out[at + i * k_dim + k0..][..7 * k_dim + 8];
                transpose8(&tile, i, dst, k_dim);
            }
            for i in blocks..len {
                for (j, col) in tile.iter().enumerate().take(kc) {
                    out[at + i * k_dim + k0 + j] = col[i];
                }
            }
        }
        n0 = n1;
    }
}

/// Rows `i..i + 8` of the tile's 8 columns into `dst`: row `i + r` at
/// `dst[r * stride..][..8]`.
#[inline(always)]
fn transpose8<T: Out>(tile: &[[T; TILE]; 8], i: usize, dst: &mut [T], stride: usize) {
    assert!(i + 8 <= TILE && dst.len() >= 7 * stride + 8);
    let src: [*const T; 8] = core::array::from_fn(|j| tile[j][i..].as_ptr());
    let d = dst.as_mut_ptr();
    // SAFETY: every source reads 8 elements inside a tile column (asserted), every
    // store writes 8 elements inside `dst` (asserted); SSE2 (x86-64) and AVX2
    // (this module runs under the AVX2 or AVX-512 entry points only).
    unsafe {
        match size_of::<T>() {
            4 => transpose8x32(src.map(|p| p.cast()), d.cast(), stride),
            _ => transpose8x16(src.map(|p| p.cast()), d.cast(), stride),
        }
    }
}

/// 8x8 16-bit transpose: row `r` of the result (`src[0][r], .., src[7][r]`) to
/// `dst + r * stride` (in elements).
///
/// # Safety
/// Each `src[j]` is valid for reading 16 bytes; `dst` for writing 8 elements at
/// each row.
#[inline(always)]
unsafe fn transpose8x16(src: [*const u8; 8], dst: *mut u16, stride: usize) {
    // SAFETY: the caller's spans; SSE2.
    unsafe {
        let a: [__m128i; 8] = core::array::from_fn(|j| _mm_loadu_si128(src[j].cast()));
        let b0 = _mm_unpacklo_epi16(a[0], a[1]);
        let b1 = _mm_unpackhi_epi16(a[0], a[1]);
        let b2 = _mm_unpacklo_epi16(a[2], a[3]);
        let b3 = _mm_unpackhi_epi16(a[2], a[3]);
        let b4 = _mm_unpacklo_epi16(a[4], a[5]);
        let b5 = _mm_unpackhi_epi16(a[4], a[5]);
        let b6 = _mm_unpacklo_epi16(a[6], a[7]);
        let b7 = _mm_unpackhi_epi16(a[6], a[7]);
        // c_j: elements 2j' and 2j'+1 of columns 0..4 (c0..c3) or 4..8 (c4..c7).
        let c0 = _mm_unpacklo_epi32(b0, b2);
        let c1 = _mm_unpackhi_epi32(b0, b2);
        let c2 = _mm_unpacklo_epi32(b1, b3);
        let c3 = _mm_unpackhi_epi32(b1, b3);
        let c4 = _mm_unpacklo_epi32(b4, b6);
        let c5 = _mm_unpackhi_epi32(b4, b6);
        let c6 = _mm_unpacklo_epi32(b5, b7);
        let c7 = _mm_unpackhi_epi32(b5, b7);
        let rows = [
            _mm_unpacklo_epi64(c0, c4),
            _mm_unpackhi_epi64(c0, c4),
            _mm_unpacklo_epi64(c1, c5),
            _mm_unpackhi_epi64(c1, c5),
            _mm_unpacklo_epi64(c2, c6),
            _mm_unpackhi_epi64(c2, c6),
            _mm_unpacklo_epi64(c3, c7),
            _mm_unpackhi_epi64(c3, c7),
        ];
        for (r, y) in rows.into_iter().enumerate() {
            _mm_storeu_si128(dst.add(r * stride).cast(), y);
        }
    }
}

/// 8x8 32-bit transpose, as [`transpose8x16`].
///
/// # Safety
/// Each `src[j]` is valid for reading 32 bytes; `dst` for writing 8 elements at
/// each row; the CPU has AVX2.
#[inline(always)]
unsafe fn transpose8x32(src: [*const u8; 8], dst: *mut u32, stride: usize) {
    // SAFETY: the caller's spans; AVX2 (caller).
    unsafe {
        let r: [__m256i; 8] = core::array::from_fn(|j| _mm256_loadu_si256(src[j].cast()));
        let rows = super::lut::transpose8_regs(r);
        for (j, y) in rows.into_iter().enumerate() {
            _mm256_storeu_si256(dst.add(j * stride).cast(), y);
        }
    }
}

#[cfg(test)]
mod tests {
    use half::{bf16, f16};

    use super::super::coded::{Codes, Scale};
    use super::*;
    use crate::arch::Isa;

    /// A small deterministic generator.
    fn bytes(n: usize, seed: u32) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9e37_79b9) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                (x >> 8) as u8
            })
            .collect()
    }

    /// Every row range of `c` on each vector ISA equals the formula element by
    /// element, rounded once, in f32, f16 and bf16.
    fn check(c: &Coded<'_>, want_path: Path) {
        assert_eq!(path(c), Some(want_path));
        let (n, k) = (c.n(), c.k());
        let want: Vec<f32> = (0..n * k).map(|i| c.value(i / k, i % k)).collect();
        for isa in [Isa::Avx2, Isa::Avx512] {
            if !isa.available() {
                let all = std::env::var("DQ_REQUIRE_ALL_PATHS").is_ok_and(|v| v == "1");
                assert!(!all, "DQ_REQUIRE_ALL_PATHS=1: {isa:?} unavailable");
                eprintln!("SKIPPED (path unavailable): {isa:?} coded vector paths");
                continue;
            }
            for rows in [0..n, 1..n, 3..n.min(40)] {
                let w = &want[rows.start * k..rows.end * k];
                let mut f = vec![0f32; rows.len() * k];
                c.run_on(isa, rows.clone(), &mut f).unwrap();
                let bits = |v: &[f32]| v.iter().map(|y| y.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&f), bits(w), "{isa:?} f32 rows {rows:?}");
                let mut h = vec![f16::ZERO; rows.len() * k];
                c.run_on(isa, rows.clone(), &mut h).unwrap();
                let wh: Vec<u16> = w.iter().map(|&y| f16::from_f32(y).to_bits()).collect();
                let hb: Vec<u16> = h.iter().map(|y| y.to_bits()).collect();
                assert_eq!(hb, wh, "{isa:?} f16 rows {rows:?}");
                let mut b = vec![bf16::ZERO; rows.len() * k];
                c.run_on(isa, rows.clone(), &mut b).unwrap();
                let wb: Vec<u16> = w
                    .iter()
                    .map(|&y| crate::convert::f32_to_bf16_bits(y))
                    .collect();
                let bb: Vec<u16> = b.iter().map(|y| y.to_bits()).collect();
                assert_eq!(bb, wb, "{isa:?} bf16 rows {rows:?}");
            }
        }
    }

    fn floats(v: impl IntoIterator<Item = f32>) -> Vec<u8> {
        v.into_iter().flat_map(f32::to_le_bytes).collect()
    }

    #[test]
    fn four_bit_rows_equal_the_formula() {
        let base: Vec<f32> = (0..16).map(|q| (q as f32 - 7.5) / 7.3).collect();
        // 45 x 150: odd K, so rows start on odd codes; groups of 64 across rows.
        let (n, k) = (45, 150);
        let w = bytes(n * k / 2 + 1, 3);
        let scales = floats((0..120).map(|g| (g as f32 - 50.0) * 0.37 + 0.01));
        let bf: Vec<u8> = bytes(240, 5);
        for order in [BitOrder::HighNibbleFirst, BitOrder::Lsb] {
            let codes = Codes {
                bytes: &w,
                bits: 4,
                order,
            };
            let scale = Scale::Floats {
                bytes: &scales,
                dtype: ScaleType::F32,
            };
            for post in [
                Post::None,
                Post::Mul(7.874_016e-3),
                Post::Add {
                    bytes: &bf,
                    dtype: ScaleType::BF16,
                },
                Post::Add {
                    bytes: &bf,
                    dtype: ScaleType::F16,
                },
            ] {
                let c = Coded::new(n, k, codes, (1, k, 1), 64, &base, scale, post).unwrap();
                check(&c, Path::Rows4);
            }
        }
    }

    #[test]
    fn short_groups_equal_the_formula() {
        // NVFP4: e2m1 (ModelOpt's +0.0 for code 8), e4m3 scale bytes (with NaN
        // and zero codes) divided by or times a global scale, groups of 16 and 32.
        let mut base: Vec<f32> = (0..16)
            .map(|q| crate::minifloat::f4_e2m1_to_f32(q as u8))
            .collect();
        base[8] = 0.0;
        let (n, k) = (13, 96);
        let w = bytes(n * k / 2 + 1, 17);
        let mut e4 = bytes(n * k / 16 + 1, 19);
        (e4[2], e4[4], e4[6]) = (0x7f, 0x80, 0);
        for (order, gs) in [(BitOrder::Lsb, 16), (BitOrder::HighNibbleFirst, 32)] {
            let codes = Codes {
                bytes: &w,
                bits: 4,
                order,
            };
            for divide in [true, false] {
                let scale = Scale::F8 {
                    bytes: &e4,
                    global: 3.7e-3,
                    divide,
                };
                for offset in [0, 1] {
                    let strides = (offset, k, 1);
                    let c = Coded::new(n, k, codes, strides, gs, &base, scale, Post::None);
                    check(&c.unwrap(), Path::Rows4);
                }
            }
        }
    }

    #[test]
    fn eight_bit_rows_equal_the_formula() {
        let (n, k) = (9, 301);
        let w = bytes(n * k, 7);
        let codes = Codes {
            bytes: &w,
            bits: 8,
            order: BitOrder::Lsb,
        };
        let scales = floats((0..n).map(|g| (g as f32 + 0.3) * 1.7e-3));
        let biases: Vec<u8> = bytes(2 * n, 9);
        let scale = Scale::Floats {
            bytes: &scales,
            dtype: ScaleType::F32,
        };
        let signed: Vec<f32> = (0..=255u8).map(|q| f32::from(q as i8)).collect();
        let unsigned: Vec<f32> = (0..=255u8).map(f32::from).collect();
        let int8 = Coded::new(
            n,
            k,
            codes,
            (0, k, 1),
            k,
            &signed,
            scale,
            Post::Mul(7.874_016e-3),
        );
        check(&int8.unwrap(), Path::Rows8 { signed: true });
        let add = Post::Add {
            bytes: &biases,
            dtype: ScaleType::F16,
        };
        let mlx = Coded::new(n, k, codes, (0, k, 1), k, &unsigned, scale, add);
        check(&mlx.unwrap(), Path::Rows8 { signed: false });
    }

    #[test]
    fn columns_equal_the_formula() {
        // gpt-oss' [E, K, N] output of one expert: 64 output rows (inputs), 21
        // columns (K % 8 = 5), groups of 32 down each column; e8m0 scales with
        // 0 and 255 (+inf: NaN for a zero code).
        let base: Vec<f32> = vec![
            0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0,
        ];
        let (rows, cols) = (64, 21);
        let w = bytes(2 * rows * cols / 2, 11);
        let mut e8: Vec<u8> = bytes(2 * rows * cols / 32, 13);
        e8.iter_mut().for_each(|e| *e = 110 + *e % 30);
        (e8[3], e8[5]) = (0, 255);
        let codes = Codes {
            bytes: &w,
            bits: 4,
            order: BitOrder::Lsb,
        };
        let scale = Scale::Pow2 { bytes: &e8 };
        // The second expert: offset one expert's codes.
        let strides = (rows * cols, 1, rows);
        let c = Coded::new(rows, cols, codes, strides, 32, &base, scale, Post::None).unwrap();
        check(&c, Path::Columns4);
    }
}
