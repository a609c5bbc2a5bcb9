//! Coded weights: each element of a `[N, K]` weight is a code of 2-8 bits in a bit
//! stream, looked up in a table of base values and scaled per group
//! (bitsandbytes NF4/FP4 and LLM.int8, MLX affine, MXFP4). A [`Coded`] is a
//! declaration, as data: where the codes lie, the base value of each code, where
//! each group's scale comes from and what follows the multiply; one generic driver
//! runs every declaration, compiled per ISA.
//!
//! Element `(n, k)` sits at stream position `p = offset + n·row_stride + k·col_stride`,
//! is in group `g = p / group_size`, and its value is `post(base[code(p)] · scale(g), g)`
//! in f32, then rounded once to the output type. Per run of one group, 4-bit codes
//! into f16/bf16 go by a 16-entry table of exact outputs (`vpshufb` with AVX2).
//!
//! ```
//! use dq_runtime::linear::coded::{BitOrder, Codes, Coded, Post, Scale};
//! use dq_runtime::linear::ScaleType;
//! // 1 x 4 weight, codes 0, 1, 2, 3 two per byte, high nibble first; base = code, scale 0.5.
//! let bytes = [0x01, 0x23];
//! let base: Vec<f32> = (0..16).map(|q| q as f32).collect();
//! let scale = 0.5f32.to_le_bytes();
//! let codes = Codes { bytes: &bytes, bits: 4, order: BitOrder::HighNibbleFirst };
//! let coded = Coded::new(1, 4, codes, (0, 4, 1), 4, &base,
//!     Scale::Floats { bytes: &scale, dtype: ScaleType::F32 }, Post::None)?;
//! let mut out = [0f32; 4];
//! coded.run(0..1, &mut out)?;
//! assert_eq!(out, [0.0, 0.5, 1.0, 1.5]);
//! # Ok::<(), dq_runtime::linear::LinearError>(())
//! ```

use std::ops::Range;

use half::{bf16, f16};

use super::lut::{self, Table};
use super::{LinearError, Out, ScaleType, check_rows};
use crate::arch::{self, Isa};

/// How codes sit in their bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BitOrder {
    /// A little-endian bit stream: code `p` is bits `p·b .. (p+1)·b` (MLX, MXFP4's
    /// low nibble first, int8 bytes).
    Lsb,
    /// 4-bit codes, the high nibble of each byte first (bitsandbytes).
    HighNibbleFirst,
}

/// The codes' bytes.
#[derive(Clone, Copy, Debug)]
pub struct Codes<'a> {
    /// The bit stream.
    pub bytes: &'a [u8],
    /// Bits per code: 2, 3, 4, 6 or 8.
    pub bits: u32,
    /// Their order.
    pub order: BitOrder,
}

impl Codes<'_> {
    /// Code at stream position `p` (inside the bytes: checked by [`Coded::new`]).
    #[inline(always)]
    pub(super) fn get(&self, p: usize) -> usize {
        let b = self.bytes;
        match (self.order, self.bits) {
            (BitOrder::HighNibbleFirst, _) => usize::from((b[p / 2] >> (4 * (1 - p % 2))) & 15),
            (_, 8) => usize::from(b[p]),
            (_, 4) => usize::from((b[p / 2] >> (4 * (p % 2))) & 15),
            (_, bits) => {
                let bit = p * bits as usize;
                let lo = u16::from(b[bit / 8]);
                let hi = b.get(bit / 8 + 1).map_or(0, |&h| u16::from(h));
                usize::from(((lo | (hi << 8)) >> (bit % 8)) & ((1 << bits) - 1))
            }
        }
    }

    /// Codes of positions `p..p + out.len()` into `out`.
    #[inline(always)]
    fn run(&self, p: usize, out: &mut [u8]) {
        let b = self.bytes;
        match (self.order, self.bits) {
            (_, 8) => out.copy_from_slice(&b[p..p + out.len()]),
            (order, 4) if p.is_multiple_of(2) => {
                let (lo, hi) = match order {
                    BitOrder::Lsb => (0, 4),
                    BitOrder::HighNibbleFirst => (4, 0),
                };
                let pairs = out.len() / 2;
                for (o, &x) in out.chunks_exact_mut(2).zip(&b[p / 2..p / 2 + pairs]) {
                    o[0] = (x >> lo) & 15;
                    o[1] = (x >> hi) & 15;
                }
                if out.len() % 2 == 1 {
                    out[2 * pairs] = self.get(p + 2 * pairs) as u8;
                }
            }
            _ => {
                for (i, o) in out.iter_mut().enumerate() {
                    *o = self.get(p + i) as u8;
                }
            }
        }
    }
}

/// Where each group's scale comes from (f32, exact for the stored types).
#[derive(Clone, Copy, Debug)]
pub enum Scale<'a> {
    /// `scales[g]`, little-endian f16, bf16 or f32.
    Floats {
        /// The scales' bytes.
        bytes: &'a [u8],
        /// Their type.
        dtype: ScaleType,
    },
    /// bitsandbytes' double quantization: `book[codes[g]] · absmax[g / block] + offset`
    /// in f32 (`book` 256 little-endian f32s, `absmax` little-endian f32s).
    Nested {
        /// One byte per group.
        codes: &'a [u8],
        /// The second-level code book.
        book: &'a [u8],
        /// The second-level scales.
        absmax: &'a [u8],
        /// Groups per second-level scale.
        block: usize,
        /// Added after the multiply.
        offset: f32,
    },
    /// `2^(e - 127)` from one e8m0 byte per group, as f32 (255 is +inf, as the
    /// f32 power `2^128` is).
    Pow2 {
        /// The exponents.
        bytes: &'a [u8],
    },
    /// NVFP4's two-level scale: the f8_e4m3 value of one byte per group, divided
    /// by `global` (compressed-tensors, which stores the global scale's
    /// reciprocal) or multiplied by it (ModelOpt), in f32.
    F8 {
        /// One e4m3 code per group.
        bytes: &'a [u8],
        /// The tensor's global scale.
        global: f32,
        /// Divide by `global` (else multiply).
        divide: bool,
    },
}

impl Scale<'_> {
    /// Groups covered.
    fn len(&self) -> usize {
        match *self {
            Scale::Floats { bytes, dtype } => bytes.len() / dtype.size(),
            Scale::Nested {
                codes,
                absmax,
                block,
                ..
            } => codes.len().min((absmax.len() / 4).saturating_mul(block)),
            Scale::Pow2 { bytes } | Scale::F8 { bytes, .. } => bytes.len(),
        }
    }

    /// The scale of group `g` (inside: checked by [`Coded::new`]).
    #[inline(always)]
    pub(super) fn get(&self, g: usize) -> f32 {
        match *self {
            Scale::Floats { bytes, dtype } => float(bytes, dtype, g),
            Scale::Nested {
                codes,
                book,
                absmax,
                block,
                offset,
            } => {
                let c = float(book, ScaleType::F32, usize::from(codes[g]));
                c * float(absmax, ScaleType::F32, g / block) + offset
            }
            Scale::Pow2 { bytes } => match bytes[g] {
                0 => f32::from_bits(1 << 22),
                e => f32::from_bits(u32::from(e) << 23),
            },
            Scale::F8 {
                bytes,
                global,
                divide,
            } => {
                let b = crate::minifloat::F8_E4M3_TABLE[usize::from(bytes[g])];
                if divide { b / global } else { b * global }
            }
        }
    }
}

/// What follows `base[q] · scale`.
#[derive(Clone, Copy, Debug)]
pub enum Post<'a> {
    /// Nothing.
    None,
    /// `· c` (LLM.int8's `1/127`).
    Mul(f32),
    /// `round(round(x) + biases[g])`, each rounding to the biases' type (MLX's
    /// arithmetic in the scales' type; none for f32).
    Add {
        /// The biases' bytes.
        bytes: &'a [u8],
        /// Their type.
        dtype: ScaleType,
    },
}

/// A validated coded weight: every position and group lies inside its buffer.
#[derive(Clone, Copy, Debug)]
pub struct Coded<'a> {
    n: usize,
    k: usize,
    codes: Codes<'a>,
    strides: (usize, usize, usize),
    group_size: usize,
    base: [f32; 256],
    scale: Scale<'a>,
    /// [`Scale::F8`]'s scale of each byte, computed once (else zeros).
    f8: [f32; 256],
    post: Post<'a>,
}

impl<'a> Coded<'a> {
    /// Describes the `[n, k]` weight; `strides` is `(offset, row_stride, col_stride)`
    /// in codes, `base` holds `2^bits` values (copied).
    ///
    /// # Errors
    /// [`LinearError::View`] when a width is not 2, 3, 4, 6 or 8 bits, `base` is short,
    /// a position or group reaches past its buffer, or the group size is 0.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        n: usize,
        k: usize,
        codes: Codes<'a>,
        strides: (usize, usize, usize),
        group_size: usize,
        base: &[f32],
        scale: Scale<'a>,
        post: Post<'a>,
    ) -> Result<Self, LinearError> {
        let bad = |what, why: String| Err(LinearError::View { what, why });
        if ![2, 3, 4, 6, 8].contains(&codes.bits)
            || (codes.order == BitOrder::HighNibbleFirst && codes.bits != 4)
        {
            return bad(
                "weights",
                format!("{}-bit codes in {:?}", codes.bits, codes.order),
            );
        }
        if base.len() < 1 << codes.bits {
            return bad("weights", format!("{} base values", base.len()));
        }
        if group_size == 0 {
            return bad("groups", "group size 0".into());
        }
        let mut table = [0f32; 256];
        let used = 1usize << codes.bits;
        table[..used].copy_from_slice(&base[..used]);
        let mut f8 = [0f32; 256];
        if let Scale::F8 { global, divide, .. } = scale {
            for (b, y) in f8.iter_mut().enumerate() {
                let x = crate::minifloat::F8_E4M3_TABLE[b];
                *y = if divide { x / global } else { x * global };
            }
        }
        let coded = Coded {
            n,
            k,
            codes,
            strides,
            group_size,
            base: table,
            scale,
            f8,
            post,
        };
        if n == 0 || k == 0 {
            return Ok(coded);
        }
        let (o, rs, cs) = strides;
        let last = (n - 1)
            .checked_mul(rs)
            .and_then(|a| a.checked_add((k - 1).checked_mul(cs)?))
            .and_then(|a| a.checked_add(o));
        let bits = last.and_then(|p| p.checked_add(1)?.checked_mul(codes.bits as usize));
        let Some(last) = last.filter(|_| bits.is_some_and(|b| b <= 8 * codes.bytes.len())) else {
            return bad(
                "weights",
                format!("{n}x{k} codes reach past {} bytes", codes.bytes.len()),
            );
        };
        let groups = last / group_size + 1;
        if groups > scale.len() {
            return bad("scales", format!("{groups} groups, {} scales", scale.len()));
        }
        if let Post::Add { bytes, dtype } = post
            && groups > bytes.len() / dtype.size()
        {
            return bad(
                "biases",
                format!("{groups} groups, {} biases", bytes.len() / dtype.size()),
            );
        }
        if let Scale::Nested { book, .. } = scale
            && book.len() < 256 * 4
        {
            return bad(
                "scales",
                format!("{} bytes of nested code book", book.len()),
            );
        }
        Ok(coded)
    }

    /// Rows of the weight.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Columns of the weight.
    pub fn k(&self) -> usize {
        self.k
    }

    /// The codes' bytes, width and order.
    pub fn codes(&self) -> Codes<'a> {
        self.codes
    }

    /// `(offset, row_stride, col_stride)` in codes.
    pub fn strides(&self) -> (usize, usize, usize) {
        self.strides
    }

    /// Codes per group (of stream positions).
    pub fn group_size(&self) -> usize {
        self.group_size
    }

    /// The base value of each code (entries past `2^bits` are 0).
    pub fn base(&self) -> &[f32; 256] {
        &self.base
    }

    /// Where each group's scale comes from.
    pub fn scale(&self) -> Scale<'a> {
        self.scale
    }

    /// The scale of group `g` ([`Scale`]'s, NVFP4's from its table of 256).
    #[inline(always)]
    pub(super) fn scale_of(&self, g: usize) -> f32 {
        match self.scale {
            Scale::F8 { bytes, .. } => self.f8[usize::from(bytes[g])],
            s => s.get(g),
        }
    }

    /// What follows the multiply.
    pub fn post(&self) -> Post<'a> {
        self.post
    }

    /// Element `(n, k)` in f32 (the formula one element at a time; inside the weight).
    pub fn value(&self, n: usize, k: usize) -> f32 {
        let (o, rs, cs) = self.strides;
        let p = o + n * rs + k * cs;
        let g = p / self.group_size;
        crate::convert::quiet_f32(self.formula(self.codes.get(p), self.scale_of(g), g))
    }

    /// `post(base[q] · s)` for group `g`.
    #[inline(always)]
    pub(super) fn formula(&self, q: usize, s: f32, g: usize) -> f32 {
        let x = self.base[q] * s;
        match self.post {
            Post::None => x,
            Post::Mul(c) => x * c,
            Post::Add { bytes, dtype } => round(round(x, dtype) + float(bytes, dtype, g), dtype),
        }
    }

    /// Writes rows `rows` into `out` (row-major, `rows.len() * K` elements) with the
    /// ISA the generated kernels use.
    ///
    /// # Errors
    /// [`LinearError::Output`] when `rows` or `out`'s length do not fit.
    pub fn run<T: Out>(&self, rows: Range<usize>, out: &mut [T]) -> Result<(), LinearError> {
        self.run_on(arch::selected(), rows, out)
    }

    /// [`run`](Self::run) with the code compiled for `isa`.
    ///
    /// # Errors
    /// [`LinearError::IsaUnavailable`] when this CPU cannot run `isa`, else as
    /// [`run`](Self::run).
    pub fn run_on<T: Out>(
        &self,
        isa: Isa,
        rows: Range<usize>,
        out: &mut [T],
    ) -> Result<(), LinearError> {
        check_rows(isa, &rows, self.n, self.k, out.len())?;
        match isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `isa.available()` above: the CPU has AVX-512 F/BW/VL/DQ, AVX2, F16C.
            Isa::Avx512 => unsafe { avx512(self, rows, out) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `isa.available()` above: the CPU has AVX2 and F16C.
            Isa::Avx2 => unsafe { avx2(self, rows, out) },
            _ => body::<T, false>(self, rows, out),
        }
        Ok(())
    }
}

/// [`body`] compiled for AVX2.
///
/// # Safety
/// The CPU has AVX2 and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
unsafe fn avx2<T: Out>(c: &Coded<'_>, rows: Range<usize>, out: &mut [T]) {
    match super::coded_simd::path(c) {
        // SAFETY: the caller's AVX2 and F16C.
        Some(path) => super::coded_simd::run(
            unsafe { arch::x86_64::Avx2::new_unchecked() },
            c,
            path,
            rows,
            out,
        ),
        None => body::<T, true>(c, rows, out),
    }
}

/// [`body`] compiled for AVX-512.
///
/// # Safety
/// The CPU has AVX-512 F, BW, VL, DQ, AVX2 and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,f16c")]
unsafe fn avx512<T: Out>(c: &Coded<'_>, rows: Range<usize>, out: &mut [T]) {
    match super::coded_simd::path(c) {
        // SAFETY: the caller's AVX-512 F/BW/VL/DQ, AVX2 and F16C.
        Some(path) => super::coded_simd::run(
            unsafe { arch::x86_64::Avx512::new_unchecked() },
            c,
            path,
            rows,
            out,
        ),
        None => body::<T, true>(c, rows, out),
    }
}

/// Codes decoded per step of a run.
pub(super) const CHUNK: usize = 1024;

/// Rows `rows` into `out`: runs of one group along contiguous rows, else one
/// element at a time.
#[inline(always)]
fn body<T: Out, const F16C: bool>(c: &Coded<'_>, rows: Range<usize>, out: &mut [T]) {
    let (o, rs, cs) = c.strides;
    let k_dim = c.k;
    if k_dim == 0 {
        return;
    }
    let mut codes = [0u8; CHUNK];
    let gs = c.group_size;
    // Codes along N (rows) in runs of one group per column (gpt-oss' [E, K, N]).
    if cs != 1 && rs == 1 && gs <= CHUNK && cs.is_multiple_of(gs) && o.is_multiple_of(gs) {
        return columns::<T>(c, rows, out, &mut codes);
    }
    for (n, row) in rows.zip(out.chunks_exact_mut(k_dim)) {
        let start = o + n * rs;
        if cs != 1 {
            for (k, y) in row.iter_mut().enumerate() {
                let p = start + k * cs;
                let g = p / c.group_size;
                *y = T::of(c.formula(c.codes.get(p), c.scale_of(g), g));
            }
            continue;
        }
        let mut k = 0;
        while k < k_dim {
            let p = start + k;
            let g = p / c.group_size;
            let end = ((g + 1) * c.group_size - start).min(k_dim).min(k + CHUNK);
            let codes = &mut codes[..end - k];
            c.codes.run(p, codes);
            group_run::<T, F16C>(c, g, codes, &mut row[k..end]);
            k = end;
        }
    }
}

/// Rows `rows` where codes run along N and each column's group is constant over
/// aligned runs of `group_size` rows: per run of rows and column, one scale and one
/// contiguous run of codes, written down the column.
#[inline(always)]
fn columns<T: Out>(c: &Coded<'_>, rows: Range<usize>, out: &mut [T], codes: &mut [u8; CHUNK]) {
    let (o, _, cs) = c.strides;
    let (k_dim, gs) = (c.k, c.group_size);
    let first = rows.start;
    let mut n0 = rows.start;
    while n0 < rows.end {
        let n1 = ((n0 / gs + 1) * gs).min(rows.end);
        let run = &mut codes[..n1 - n0];
        for k in 0..k_dim {
            let p = o + n0 + k * cs;
            let g = p / gs;
            let s = c.scale_of(g);
            c.codes.run(p, run);
            for (i, &q) in run.iter().enumerate() {
                out[(n0 - first + i) * k_dim + k] = T::of(c.formula(usize::from(q), s, g));
            }
        }
        n0 = n1;
    }
}

/// One run of group `g`: a 16-entry table for 4-bit codes into f16/bf16, else the
/// formula per element.
#[inline(always)]
fn group_run<T: Out, const F16C: bool>(c: &Coded<'_>, g: usize, codes: &[u8], out: &mut [T]) {
    let s = c.scale_of(g);
    if c.codes.bits <= 4 && out.len() >= 32 {
        let mut outs = [T::of(0.0); 16];
        for (q, y) in outs.iter_mut().enumerate().take(1 << c.codes.bits) {
            *y = T::of(c.formula(q, s, g));
        }
        if let Some(bits) = T::as_bits16(out) {
            let mut table: Table = [0; 16];
            for (t, y) in table.iter_mut().zip(outs) {
                *t = y.bits16();
            }
            #[cfg(target_arch = "x86_64")]
            if F16C {
                // SAFETY: `F16C` is only set by the AVX2/AVX-512 entry points, run
                // after detection found AVX2 and F16C.
                return unsafe { lut::apply_avx2(&table, codes, bits) };
            }
            return lut::apply_scalar(&table, codes, bits);
        }
        for (y, &q) in out.iter_mut().zip(codes) {
            *y = outs[usize::from(q & 15)];
        }
        return;
    }
    for (y, &q) in out.iter_mut().zip(codes) {
        *y = T::of(c.formula(usize::from(q), s, g));
    }
}

/// Element `i` of little-endian `dtype` bytes, as f32.
#[inline(always)]
pub(super) fn float(b: &[u8], dtype: ScaleType, i: usize) -> f32 {
    match dtype {
        ScaleType::F16 => crate::convert::f16_to_f32(u16::from_le_bytes([b[2 * i], b[2 * i + 1]])),
        ScaleType::BF16 => bf16::from_le_bytes([b[2 * i], b[2 * i + 1]]).to_f32(),
        ScaleType::F32 => f32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]),
    }
}

/// `x` rounded (nearest-even) to `dtype` and back.
#[inline(always)]
fn round(x: f32, dtype: ScaleType) -> f32 {
    match dtype {
        ScaleType::F16 => f16::from_f32(x).to_f32(),
        ScaleType::BF16 => bf16::from_f32(x).to_f32(),
        ScaleType::F32 => x,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn floats(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn orders_and_widths_read_their_codes() {
        let bytes = [0x21u8, 0x43, 0x65];
        let hi = Codes {
            bytes: &bytes,
            bits: 4,
            order: BitOrder::HighNibbleFirst,
        };
        let lsb = Codes {
            bytes: &bytes,
            bits: 4,
            order: BitOrder::Lsb,
        };
        assert_eq!(
            (0..6).map(|p| hi.get(p)).collect::<Vec<_>>(),
            [2, 1, 4, 3, 6, 5]
        );
        assert_eq!(
            (0..6).map(|p| lsb.get(p)).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5, 6]
        );
        // 3-bit: 0b011_010_001 ... codes 1, 2, 3, 4, 5, 6, 7, 0 in 3 bytes.
        let packed: u32 = (0..8u32).map(|i| ((i + 1) % 8) << (3 * i)).sum();
        let b3 = packed.to_le_bytes();
        let c3 = Codes {
            bytes: &b3[..3],
            bits: 3,
            order: BitOrder::Lsb,
        };
        assert_eq!(
            (0..8).map(|p| c3.get(p)).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5, 6, 7, 0]
        );
        let mut run = [0u8; 5];
        hi.run(1, &mut run);
        assert_eq!(run, [1, 4, 3, 6, 5]);
        lsb.run(0, &mut run);
        assert_eq!(run, [1, 2, 3, 4, 5]);
    }

    #[test]
    fn runs_equal_the_formula_on_every_isa_and_type() {
        // 3 x 70 weight, 4-bit high-nibble-first codes, groups of 64 across rows.
        let (n, k) = (3, 70);
        let bytes: Vec<u8> = (0..n * k / 2).map(|i| (i * 37 + 11) as u8).collect();
        let base: Vec<f32> = (0..16).map(|q| (q as f32 - 7.5) / 7.3).collect();
        let scales = floats(&[0.3, -1.7, 2.5e-3, 9.0]);
        let codes = Codes {
            bytes: &bytes,
            bits: 4,
            order: BitOrder::HighNibbleFirst,
        };
        let scale = Scale::Floats {
            bytes: &scales,
            dtype: ScaleType::F32,
        };
        let c = Coded::new(n, k, codes, (0, k, 1), 64, &base, scale, Post::None).unwrap();
        let want: Vec<f32> = (0..n * k).map(|i| c.value(i / k, i % k)).collect();
        assert_eq!(want[65], base[(bytes[32] & 15) as usize] * -1.7);
        for isa in [Isa::Portable, Isa::Avx2, Isa::Avx512] {
            if !isa.available() {
                eprintln!("SKIPPED (path unavailable): {isa:?}");
                continue;
            }
            let mut f = vec![0f32; n * k];
            c.run_on(isa, 0..n, &mut f).unwrap();
            assert_eq!(f, want, "{isa:?}");
            let mut h = vec![bf16::ZERO; 2 * k];
            c.run_on(isa, 1..3, &mut h).unwrap();
            let w: Vec<bf16> = want[k..].iter().map(|&y| bf16::from_f32(y)).collect();
            assert_eq!(h, w, "{isa:?}");
        }
        assert!(c.run(0..1, &mut [0f32; 69]).is_err());
    }

    #[test]
    fn short_buffers_are_refused() {
        let base = [0f32; 256];
        let s = floats(&[1.0]);
        let scale = Scale::Floats {
            bytes: &s,
            dtype: ScaleType::F32,
        };
        let codes = |b: &'static [u8], bits| Codes {
            bytes: b,
            bits,
            order: BitOrder::Lsb,
        };
        let what = |r: Result<Coded<'_>, LinearError>| match r {
            Err(LinearError::View { what, .. }) => what,
            other => panic!("{other:?}"),
        };
        assert!(
            Coded::new(
                1,
                8,
                codes(&[0; 4], 4),
                (0, 8, 1),
                8,
                &base,
                scale,
                Post::None
            )
            .is_ok()
        );
        assert_eq!(
            what(Coded::new(
                1,
                9,
                codes(&[0; 4], 4),
                (0, 9, 1),
                9,
                &base,
                scale,
                Post::None
            )),
            "weights"
        );
        assert_eq!(
            what(Coded::new(
                2,
                4,
                codes(&[0; 4], 4),
                (0, 4, 1),
                4,
                &base,
                scale,
                Post::None
            )),
            "scales"
        );
        assert_eq!(
            what(Coded::new(
                1,
                4,
                codes(&[0; 4], 5),
                (0, 4, 1),
                4,
                &base,
                scale,
                Post::None
            )),
            "weights"
        );
        let post = Post::Add {
            bytes: &[],
            dtype: ScaleType::F32,
        };
        assert_eq!(
            what(Coded::new(
                1,
                4,
                codes(&[0; 4], 4),
                (0, 4, 1),
                4,
                &base,
                scale,
                post
            )),
            "biases"
        );
        assert_eq!(
            what(Coded::new(
                1,
                4,
                codes(&[0; 4], 4),
                (0, 4, 1),
                0,
                &base,
                scale,
                Post::None
            )),
            "groups"
        );
        let huge = (usize::MAX / 2, usize::MAX / 2, 1);
        assert_eq!(
            what(Coded::new(
                2,
                2,
                codes(&[0; 4], 4),
                huge,
                4,
                &base,
                scale,
                Post::None
            )),
            "weights"
        );
    }
}
