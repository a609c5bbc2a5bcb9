//! The generated backend's linear driver: one generic body, monomorphized per
//! field width, packing and output type, compiled once per ISA with
//! `#[target_feature]`.
//!
//! The output `[N, K]` is row-major while GPTQ and AWQ pack along K or N in K-major
//! words, so writing it is a transpose. The loops are tiled: a tile of rows
//! ([`TILE_ROWS`] rows for words packed along K, [`TILE_WORDS`] words of rows along
//! N, one row for words in rows such as compressed-tensors') walked in chunks of
//! [`CHUNK`] inputs. Per tile and chunk the words are gathered once, in memory
//! order, into a local array by row (8x8 blocks transposed in registers); per row
//! the fields are unpacked into bytes, and each run of one group is one pass: a
//! 16-entry table of exact outputs looked up with `vpshufb` (4-bit fields into
//! 16-bit outputs), else the formula with the group's constants (LLVM vectorizes
//! it). On AMD EPYC Zen 3 the tile sizes were chosen by `benches/checkpoints.rs`
//! among 16-128 rows and 128-1024 inputs; software prefetching of the words and
//! streaming stores measured no gain there and were left out.
//!
//! With AVX-512 VBMI, 4-bit GPTQ and AWQ linears into f16/bf16 (groups of a
//! multiple of 32 inputs) take the fast path of [`wide`](super::wide) for their
//! whole tiles: transposed in registers, looked up with `vpermw`, written with
//! non-temporal stores. On AMD EPYC Zen 4 the output's writes alone take nearly
//! half its time, and its memory traffic with no arithmetic (the same reads and
//! non-temporal writes) more than half (BENCHMARKS.md).

use std::ops::Range;

use super::Linear;
use super::lut::{self, Table};
use super::out::Out;
use super::view::{Groups, Packing};
use super::wide;
use crate::arch::Isa;

/// Inputs per pass over a tile's rows.
const CHUNK: usize = 1024;
/// Rows per tile, words packed along K (two lines of a GPTQ word row).
const TILE_ROWS: usize = 32;
/// Words per tile along N (half a line of an AWQ word row, 64 rows).
const TILE_WORDS: usize = 8;

/// Runs rows `rows` of `l` into `out` (checked by the caller) with `isa`'s code.
pub(super) fn run<T: Out>(isa: Isa, l: &Linear<'_>, rows: Range<usize>, out: &mut [T]) {
    if let Some(kind) = wide::kind::<T>(isa, l) {
        // Whole tiles on the fast path, the rows before and after here.
        let (covered, runs) = wide::runs(kind, l, rows.clone());
        if !covered.is_empty() {
            let k = l.k;
            let (head, rest) = out.split_at_mut((covered.start - rows.start) * k);
            let (tiles, tail) = rest.split_at_mut(covered.len() * k);
            tiled(isa, l, rows.start..covered.start, head);
            for run in runs.into_iter().filter(|r| !r.is_empty()) {
                let at = run.start - covered.start..run.end - covered.start;
                wide::run(kind, l, run, &mut tiles[at.start * k..at.end * k]);
            }
            tiled(isa, l, covered.end..rows.end, tail);
            return;
        }
    }
    tiled(isa, l, rows, out);
}

/// [`run`] on this driver's tiles (no fast path).
fn tiled<T: Out>(isa: Isa, l: &Linear<'_>, rows: Range<usize>, out: &mut [T]) {
    if rows.is_empty() {
        return;
    }
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
    /// Copies word `word(i, j)` to `local[(i - items.start) * width + j - js.start]`
    /// for every item and index, walking memory in order: the words of a tile lie
    /// in short runs a page apart (GPTQ, AWQ) or in long rows (compressed-tensors),
    /// and reading them once, in order, beats walking down columns per row.
    #[inline(always)]
    fn gather<const F16C: bool>(
        &self,
        items: Range<usize>,
        js: Range<usize>,
        strides: (usize, usize),
        local: &mut [u32],
    ) {
        let (q, width) = (&self.l.weights, js.len());
        let (is, jstride) = strides;
        let (inner, outer, step) = if jstride <= is {
            (js.clone(), items.clone(), is)
        } else {
            (items.clone(), js.clone(), jstride)
        };
        let contiguous = if jstride <= is { jstride } else { is };
        if jstride > is && is == 1 && F16C {
            return self.gather_transposed::<F16C>(items, js, jstride, local);
        }
        for (o, at) in outer.clone().enumerate() {
            // The run of `inner` words at outer index `at`: one slice, bounds checked once.
            let run = q.run(
                at * step + inner.start * contiguous,
                inner.len(),
                contiguous,
            );
            let word = |i: usize| {
                let b = &run[4 * i * contiguous..4 * i * contiguous + 4];
                u32::from_le_bytes([b[0], b[1], b[2], b[3]])
            };
            if jstride <= is {
                for (i, d) in local[o * width..(o + 1) * width].iter_mut().enumerate() {
                    *d = word(i);
                }
            } else {
                for i in 0..inner.len() {
                    local[i * width + o] = word(i);
                }
            }
        }
    }

    /// [`gather`](Self::gather) where items are adjacent words and indices `stride`
    /// words apart (GPTQ, AWQ): 8x8 blocks transposed in registers.
    #[inline(always)]
    fn gather_transposed<const F16C: bool>(
        &self,
        items: Range<usize>,
        js: Range<usize>,
        stride: usize,
        local: &mut [u32],
    ) {
        let q = &self.l.weights;
        let width = js.len();
        let (ni, nj) = (items.len() - items.len() % 8, width - width % 8);
        for j in (0..nj).step_by(8) {
            for i in (0..ni).step_by(8) {
                let src: [&[u8]; 8] = std::array::from_fn(|r| {
                    q.run((js.start + j + r) * stride + items.start + i, 8, 1)
                });
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `F16C` is only set by the AVX2/AVX-512 entry points, run
                // after detection found AVX2.
                unsafe {
                    lut::transpose8_avx2(src, local, i * width + j, width)
                };
                #[cfg(not(target_arch = "x86_64"))]
                let _ = src;
            }
        }
        // The edges, word by word: the last items' every index, the others' last.
        let (i0, j0) = (items.start, js.start);
        for ii in 0..items.len() {
            let from = if ii < ni { nj } else { 0 };
            for jj in from..width {
                local[ii * width + jj] = q.word(i0 + ii + (j0 + jj) * stride);
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
        self.gather::<F16C>(
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
        self.gather::<F16C>(
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
