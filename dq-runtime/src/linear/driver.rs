//! The generated backend's linear driver: one generic body, monomorphized per
//! field width, packing and output type, compiled once per ISA with
//! `#[target_feature]`.
//!
//! The output `[N, K]` is row-major while GPTQ and AWQ pack along K or N in K-major
//! words, so writing it is a transpose. The loops are tiled: a tile of rows whose
//! words share cache lines (16 rows for words packed along K, 16 words of rows for
//! words packed along N), walked in chunks of [`CHUNK`] inputs, so every cache line
//! of words is read once while the tile's rows are written in runs. Per row and
//! chunk the fields are unpacked into an array (along N: a word column is gathered
//! once and shifted per row), then each run of one group is one loop over it, the
//! formula with that group's constants (LLVM vectorizes both).

use std::ops::Range;

use super::Linear;
use super::lut::{self, Table};
use super::out::Out;
use super::view::{Groups, Packing};
use crate::arch::Isa;

/// Inputs per pass over a tile's rows.
const CHUNK: usize = 256;
/// Rows per tile, words packed along K (4 lines of a GPTQ word row).
const TILE_ROWS: usize = 64;
/// Words per tile along N (one 64-byte line of an AWQ word row).
const TILE_WORDS: usize = 16;

/// Runs rows `rows` of `l` into `out` (checked by the caller) with `isa`'s code.
pub(super) fn run<T: Out>(isa: Isa, l: &Linear<'_>, rows: Range<usize>, out: &mut [T]) {
    match (l.weights.bits, l.weights.packing) {
        (4, Packing::Inner) => on::<T, 4, false>(isa, l, rows, out),
        (4, Packing::Outer { .. }) => on::<T, 4, true>(isa, l, rows, out),
        (_, Packing::Inner) => on::<T, 8, false>(isa, l, rows, out),
        (_, Packing::Outer { .. }) => on::<T, 8, true>(isa, l, rows, out),
    }
}

/// [`body`] for one width and packing, with `isa`'s code.
fn on<T: Out, const BITS: u32, const OUTER: bool>(
    isa: Isa,
    l: &Linear<'_>,
    rows: Range<usize>,
    out: &mut [T],
) {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller checked that this CPU runs `isa` (AVX-512 F/BW/VL/DQ,
        // AVX2 and F16C), the features `avx512` is compiled with.
        Isa::Avx512 => unsafe { avx512::<T, BITS, OUTER>(l, rows, out) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller checked that this CPU runs AVX2 and F16C.
        Isa::Avx2 => unsafe { avx2::<T, BITS, OUTER>(l, rows, out) },
        _ => body::<T, BITS, OUTER, false>(l, rows, out),
    }
}

/// [`body`] compiled for AVX2.
///
/// # Safety
/// The CPU has AVX2 and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
unsafe fn avx2<T: Out, const BITS: u32, const OUTER: bool>(
    l: &Linear<'_>,
    rows: Range<usize>,
    out: &mut [T],
) {
    body::<T, BITS, OUTER, true>(l, rows, out);
}

/// [`body`] compiled for AVX-512.
///
/// # Safety
/// The CPU has AVX-512 F, BW, VL, DQ, AVX2 and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,f16c")]
unsafe fn avx512<T: Out, const BITS: u32, const OUTER: bool>(
    l: &Linear<'_>,
    rows: Range<usize>,
    out: &mut [T],
) {
    body::<T, BITS, OUTER, true>(l, rows, out);
}

/// Per-row parameters of a tile: zero point and scale of each group.
struct Params {
    groups: usize,
    z: Vec<i32>,
    s: Vec<f32>,
    /// Each group's 16 outputs, when the fields are 4-bit and the output 16-bit.
    tables: Vec<Table>,
}

impl Params {
    /// The zero points, scales and tables of rows `tile`.
    #[inline(always)]
    fn fill<T: Out, const F16C: bool>(&mut self, l: &Linear<'_>, tile: Range<usize>) {
        let g = self.groups;
        let mut outs = [T::of(0.0); 16];
        for (i, n) in tile.enumerate() {
            for j in 0..g {
                let (z, s) = l.params(n, j);
                // Fold the weights' offset into the zero point: q + o - z = field - (z - o).
                let z = z - l.weights.offset;
                self.z[i * g + j] = z;
                self.s[i * g + j] = s;
                if let Some(t) = self.tables.get_mut(i * g + j) {
                    T::run::<F16C>(&lut::FIELDS, z, s, &mut outs);
                    if let Some(bits) = T::as_bits16(&mut outs) {
                        t.copy_from_slice(bits);
                    }
                }
            }
        }
    }
}

/// Rows `rows` of `l` into `out`.
#[inline(always)]
fn body<T: Out, const BITS: u32, const OUTER: bool, const F16C: bool>(
    l: &Linear<'_>,
    rows: Range<usize>,
    out: &mut [T],
) {
    let w = 32 / BITS as usize;
    // Words in rows along K (compressed-tensors) need no transpose: one row a tile.
    let along_rows = !OUTER && l.weights.col_stride < l.weights.row_stride;
    let tile_rows = if OUTER {
        w * TILE_WORDS
    } else if along_rows {
        1
    } else {
        TILE_ROWS
    };
    let groups = l.groups.max(1);
    let lanes = Lanes::new(l);
    let by_table = BITS == 4 && T::as_bits16(&mut []).is_some() && matches!(lanes, Lanes::Runs(_));
    let mut p = Params {
        groups,
        z: vec![0; tile_rows * groups],
        s: vec![0.0; tile_rows * groups],
        tables: vec![[0; 16]; if by_table { tile_rows * groups } else { 0 }],
    };
    // A tile's words of one chunk: rows x words (along K) or columns x inputs (along N).
    let mut local = vec![
        0u32;
        if OUTER {
            TILE_WORDS * CHUNK
        } else {
            TILE_ROWS * CHUNK / w
        }
    ];
    let mut start = rows.start;
    while start < rows.end {
        // Tiles of words packed along N start at a word's first row.
        let end = (start - start % if OUTER { w } else { 1 } + tile_rows).min(rows.end);
        p.fill::<T, F16C>(l, start..end);
        let tile = Tile {
            l,
            p: &p,
            lanes: &lanes,
            rows: start..end,
            first: rows.start,
        };
        for k0 in (0..l.k).step_by(CHUNK) {
            let k1 = (k0 + CHUNK).min(l.k);
            tile.prefetch::<BITS, OUTER>(k1..(k1 + CHUNK).min(l.k));
            if OUTER {
                tile.outer::<T, BITS, F16C>(k0..k1, out, &mut local);
            } else {
                tile.inner::<T, BITS, F16C>(k0..k1, out, &mut local);
            }
        }
        start = end;
    }
}

/// How each input finds its group.
enum Lanes {
    /// `k / size`: runs of one group.
    Runs(usize),
    /// The group of every input.
    Each(Vec<u32>),
}

impl Lanes {
    fn new(l: &Linear<'_>) -> Lanes {
        match l.map {
            Groups::Size(s) => Lanes::Runs(s),
            map => Lanes::Each((0..l.k).map(|k| map.group(k) as u32).collect()),
        }
    }
}

/// A tile of rows with its parameters.
struct Tile<'t, 'a> {
    l: &'t Linear<'a>,
    p: &'t Params,
    lanes: &'t Lanes,
    rows: Range<usize>,
    /// The first row of `out`.
    first: usize,
}

impl Tile<'_, '_> {
    /// Asks for the lines of the tile's words of inputs `ks` (the next chunk): the
    /// words of GPTQ and AWQ lie down columns, a page apart, where the hardware
    /// prefetchers do not follow. (Rows of words need no help.)
    #[inline(always)]
    fn prefetch<const BITS: u32, const OUTER: bool>(&self, ks: Range<usize>) {
        let q = &self.l.weights;
        let w = 32 / BITS as usize;
        let (items, js) = if OUTER {
            (self.rows.start / w..(self.rows.end - 1) / w, ks)
        } else {
            (
                self.rows.start..self.rows.end - 1,
                ks.start / w..ks.end.div_ceil(w),
            )
        };
        if q.col_stride < q.row_stride || (items.end - items.start) * q.row_stride > 64 {
            return;
        }
        for j in js {
            let a = items.start * q.row_stride + j * q.col_stride;
            let b = items.end * q.row_stride + j * q.col_stride;
            // One line covers 16 words: ask for each line the span touches.
            for i in (a..=b).step_by(16).chain([b]) {
                prefetch(q.words, 4 * i);
            }
        }
    }

    /// Copies word `word(i, j)` to `local[(i - items.start) * width + j - js.start]`
    /// for every item and index, walking memory in order: the words of a tile lie
    /// in short runs a page apart (GPTQ, AWQ) or in long rows (compressed-tensors),
    /// and reading them once, in order, beats walking down columns per row.
    #[inline(always)]
    fn gather(
        &self,
        items: Range<usize>,
        js: Range<usize>,
        strides: (usize, usize),
        local: &mut [u32],
    ) {
        let (q, width) = (&self.l.weights, js.len());
        let (is, jstride) = strides;
        if jstride <= is {
            for (i, dst) in items.zip(local.chunks_exact_mut(width)) {
                for (j, d) in js.clone().zip(dst.iter_mut()) {
                    *d = q.word(i * is + j * jstride);
                }
            }
        } else {
            for (jj, j) in js.enumerate() {
                for (ii, i) in items.clone().enumerate() {
                    local[ii * width + jj] = q.word(i * is + j * jstride);
                }
            }
        }
    }

    /// Inputs `ks` of the tile's rows, words packed along K: each word holds `w`
    /// consecutive inputs of a row.
    #[inline(always)]
    fn inner<T: Out, const BITS: u32, const F16C: bool>(
        &self,
        ks: Range<usize>,
        out: &mut [T],
        local: &mut [u32],
    ) {
        let q = &self.l.weights;
        let w = 32 / BITS as usize;
        let mut codes = [0u8; CHUNK];
        // `ks.start` is a multiple of CHUNK, so of `w`; the last word may run past K.
        let count = ks.len().div_ceil(w);
        let first = ks.start / w;
        self.gather(
            self.rows.clone(),
            first..first + count,
            (q.row_stride, q.col_stride),
            local,
        );
        for (n, words) in self.rows.clone().zip(local.chunks_exact(count)) {
            if BITS == 8 {
                for (c, v) in codes.chunks_exact_mut(4).zip(words) {
                    c.copy_from_slice(&v.to_le_bytes());
                }
            } else if F16C {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `F16C` is only set by the AVX2/AVX-512 entry points, run after
                // detection found AVX2; `codes` holds 8 bytes per word (count <= CHUNK / 8).
                unsafe {
                    lut::split_avx2(words, &mut codes)
                };
            } else {
                lut::split_scalar(words, &mut codes);
            }
            self.finish::<T, F16C>(n, ks.clone(), &codes[..ks.len()], out);
        }
    }

    /// Inputs `ks` of the tile's rows, words packed along N: the words down a column
    /// hold inputs of `w` rows.
    #[inline(always)]
    fn outer<T: Out, const BITS: u32, const F16C: bool>(
        &self,
        ks: Range<usize>,
        out: &mut [T],
        local: &mut [u32],
    ) {
        let q = &self.l.weights;
        let Packing::Outer { order } = q.packing else {
            return;
        };
        let w = 32 / BITS as usize;
        let mut codes = [0u8; CHUNK];
        let len = ks.len();
        let columns = self.rows.start / w..self.rows.end.div_ceil(w);
        self.gather(
            columns.clone(),
            ks.clone(),
            (q.row_stride, q.col_stride),
            local,
        );
        for (c, column) in columns.zip(local.chunks_exact(len)) {
            for (j, &field) in order[..w].iter().enumerate() {
                let n = c * w + j;
                if !self.rows.contains(&n) {
                    continue;
                }
                let shift = BITS * u32::from(field);
                for (q, &v) in codes[..len].iter_mut().zip(column) {
                    *q = ((v >> shift) & ((1 << BITS) - 1)) as u8;
                }
                self.finish::<T, F16C>(n, ks.clone(), &codes[..len], out);
            }
        }
    }

    /// Row `n`, inputs `ks`, from their fields `codes`.
    #[inline(always)]
    fn finish<T: Out, const F16C: bool>(
        &self,
        n: usize,
        ks: Range<usize>,
        codes: &[u8],
        out: &mut [T],
    ) {
        let g = self.p.groups;
        let row = (n - self.rows.start) * g;
        let (z, s) = (&self.p.z[row..row + g], &self.p.s[row..row + g]);
        let o = (n - self.first) * self.l.k;
        let out = &mut out[o + ks.start..o + ks.end];
        match self.lanes {
            Lanes::Runs(size) => {
                let mut k = ks.start;
                while k < ks.end {
                    let (gi, end) = (k / size, (k / size + 1).saturating_mul(*size).min(ks.end));
                    let r = k - ks.start..end - ks.start;
                    self.run::<T, F16C>(row + gi, &codes[r.clone()], &mut out[r]);
                    k = end;
                }
            }
            Lanes::Each(groups) => {
                for ((o, &q), &gi) in out.iter_mut().zip(codes).zip(&groups[ks]) {
                    let gi = gi as usize;
                    *o = T::of((i32::from(q) - z[gi]) as f32 * s[gi]);
                }
            }
        }
    }

    /// One run of group `at` (index into the tile's parameters): by table when
    /// there is one, else the formula.
    #[inline(always)]
    fn run<T: Out, const F16C: bool>(&self, at: usize, codes: &[u8], out: &mut [T]) {
        let (z, s) = (self.p.z[at], self.p.s[at]);
        let Some(table) = self.p.tables.get(at) else {
            return T::run::<F16C>(codes, z, s, out);
        };
        let Some(bits) = T::as_bits16(out) else {
            return T::run::<F16C>(codes, z, s, out);
        };
        #[cfg(target_arch = "x86_64")]
        if F16C {
            // SAFETY: `F16C` is only set by the AVX2/AVX-512 entry points, run after
            // detection found AVX2.
            return unsafe { lut::apply_avx2(table, codes, bits) };
        }
        lut::apply_scalar(table, codes, bits);
    }
}

/// Asks for the cache line of `bytes[at]` into L2 (nothing when outside): L1 sets
/// alias at the column strides of real widths.
#[inline(always)]
fn prefetch(bytes: &[u8], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(p) = bytes.get(at) {
        use core::arch::x86_64::{_MM_HINT_T1, _mm_prefetch};
        // SAFETY: SSE is baseline on x86-64; `p` points inside `bytes`, and a
        // prefetch reads nothing architecturally.
        unsafe { _mm_prefetch::<_MM_HINT_T1>((p as *const u8).cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (bytes, at);
}
