//! 4-bit fields into 16-bit outputs with AVX-512 VBMI, for GPTQ's and AWQ's
//! transposed words (words of adjacent rows adjacent, groups by a size that is a
//! multiple of 32): the linear driver's fast path.
//!
//! A tile is 64 rows (4 lines of 16 words of a word row: words along K, GPTQ) or
//! 128 (16 word columns of 8 rows: along N, AWQ; four such tiles run side by side,
//! group by group, so each input row's words are read as 4 adjacent lines). Per
//! group the tile's rows get their 16 exact outputs (the formula and rounding of
//! the portable driver's tables, the parameters of 16 rows read with vector loads)
//! repeated in a 512-bit register; per 32 inputs the word rows' lines are loaded
//! and transposed in registers (4x4 or 16x16 words), each row's 32 fields are moved
//! into the low bits of 32 16-bit lanes (`vpmultishiftqb`, or `vpermt2b` and a
//! shift) and looked up in its table with `vpermw` (indices modulo 32: the table
//! is repeated, so bit 4 of an index is ignored). Outputs go straight to the
//! output, realigned to its 64-byte lines and written with non-temporal stores (no
//! read of the output's lines); the words are prefetched into L2 ahead. AWQ tiles
//! take a group's inputs in blocks of 128 (a row's 4 lines written in a burst)
//! and start on the words' 64-byte lines where the layout allows ([`runs`]).

use std::ops::Range;

use super::Linear;
use super::out::Out;
use super::view::{Groups, Packing};
use crate::arch::Isa;

#[cfg(target_arch = "x86_64")]
mod x86;

/// Words in a 64-byte line.
const LINE: usize = 16;
/// Lines of a word row per GPTQ tile: 64 rows, so the hardware prefetcher sees
/// adjacent lines of each page.
const SUB: usize = 4;

/// The fast path's kind of linear.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Kind {
    /// Words along K, adjacent rows' words adjacent (GPTQ): tiles of 64 rows.
    Inner,
    /// Words along N, adjacent word columns adjacent (AWQ): tiles of 128 rows.
    Outer,
}

impl Kind {
    /// Rows per tile.
    pub(super) fn rows(self) -> usize {
        match self {
            Kind::Inner => LINE * SUB,
            Kind::Outer => 8 * LINE,
        }
    }
}

/// Runs of whole tiles for rows `rows` of `l`: the rows they cover, and up to three
/// runs (empty when absent) inside those rows. `Inner`: one run from
/// `rows.start`. `Outer`: from the first word column on; when the weights' word
/// rows are 64-byte lines but not at the first column (a checkpoint's tensor
/// offset), the main run starts at the first column on a line and a tile before it
/// and one at the end overlap it (their common rows are written twice, with the
/// same values): each load of the main run is one line, not two (split loads cost
/// a fifth of the time).
pub(super) fn runs(
    kind: Kind,
    l: &Linear<'_>,
    rows: Range<usize>,
) -> (Range<usize>, [Range<usize>; 3]) {
    let t = kind.rows();
    let none = || 0..0;
    match kind {
        Kind::Inner => {
            let end = rows.start + rows.len() / t * t;
            (rows.start..end, [rows.start..end, none(), none()])
        }
        Kind::Outer => {
            let lo = rows.start.next_multiple_of(8);
            let hi = rows.end / 8 * 8;
            if hi < lo + t {
                return (lo..lo, [none(), none(), none()]);
            }
            // Word column c of word row k starts at byte 4 (c + k N / 8).
            let base = l.weights.words.as_ptr() as usize;
            let lines = (4 * l.weights.col_stride).is_multiple_of(64);
            let aligned = |n: usize| lines && (base + 4 * (n / 8)).is_multiple_of(64);
            let a = (lo..lo + t).step_by(8).find(|&n| aligned(n)).unwrap_or(lo);
            let main = a..a + (hi - a) / t * t;
            let head = if a > lo { lo..lo + t } else { none() };
            let tail = if main.end < hi { hi - t..hi } else { none() };
            (lo..hi, [head, main, tail])
        }
    }
}

/// The fast path's kind for `l` written as `T` with `isa`, or `None` when it
/// does not apply (other widths, layouts, groups or outputs; no AVX-512 VBMI).
pub(super) fn kind<T: Out>(isa: Isa, l: &Linear<'_>) -> Option<Kind> {
    let q = &l.weights;
    let Groups::Size(gs) = l.map else {
        return None;
    };
    let fits = q.bits == 4
        && T::as_bits16(&mut []).is_some()
        && gs.is_multiple_of(32)
        && l.k.is_multiple_of(32)
        // A row's first 32 outputs come in an earlier step than any row's last.
        && l.k >= 64
        && q.row_stride == 1
        && isa == Isa::Avx512
        && vbmi();
    match q.packing {
        _ if !fits => None,
        Packing::Inner => Some(Kind::Inner),
        Packing::Outer { .. } => Some(Kind::Outer),
    }
}

/// True when this CPU has AVX-512 VBMI (and the F/BW/VL/DQ of `Isa::Avx512`).
fn vbmi() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512vbmi")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Rows `tiles` (whole tiles of `kind`: `kind.rows()` rows each, from a word
/// column for `Outer`) of `l` into `out` (`tiles.len() * K` elements).
pub(super) fn run<T: Out>(kind: Kind, l: &Linear<'_>, tiles: Range<usize>, out: &mut [T]) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a `Kind` is only made by `kind`, which found AVX-512 VBMI and
    // `Isa::Avx512` (AVX-512 F/BW/VL/DQ, AVX2, F16C) on this CPU.
    unsafe {
        x86::run::<T>(kind, l, tiles, out)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (kind, l, tiles, out);
}

#[cfg(test)]
mod tests {
    use super::super::{Linear, Packed, ScaleType, Scales};
    use super::*;
    use crate::rng::Rng;
    use half::{bf16, f16};

    /// Random GPTQ- and AWQ-shaped linears (tiles and their tails, every
    /// alignment of the output's rows, NaN, infinite and subnormal scales) on the
    /// driver with the fast path equal the portable driver bit for bit.
    #[test]
    fn equals_the_portable_driver() {
        if !(Isa::Avx512.available() && vbmi()) {
            return;
        }
        let mut rng = Rng::new(11);
        for case in 0..64 {
            let outer = case % 2 == 1;
            // Up to 10 AWQ tiles: whole groups of tiles side by side, and the rest.
            let n = 8 * (1 + rng.below(if case % 4 == 3 { 160 } else { 64 }) as usize);
            let gs = 32 * (1 + rng.below(4) as usize);
            let k = 32 * (2 + rng.below(12) as usize);
            let groups = k.div_ceil(gs);
            let (words, packing, strides) = if outer {
                let order = [0, 4, 1, 5, 2, 6, 3, 7];
                (k * n / 8, Packing::Outer { order }, (1, n / 8))
            } else {
                (k / 8 * n, Packing::Inner, (1, n))
            };
            let wbytes = rng.bytes(4 * words);
            let zbytes = rng.bytes(4 * groups * n.div_ceil(8));
            let mut sbytes = rng.bytes(2 * groups * n);
            // Some special scales: NaN, infinities, subnormals, zeros.
            for (i, s) in [0x7e01u16, 0x7c00, 0xfc00, 0x0001, 0x8003, 0]
                .iter()
                .enumerate()
            {
                let at = 2 * ((7 * i + case) % (groups * n));
                sbytes[at..at + 2].copy_from_slice(&s.to_le_bytes());
            }
            let weights = Packed {
                words: &wbytes,
                bits: 4,
                packing,
                row_stride: strides.0,
                col_stride: strides.1,
                offset: if case % 3 == 0 { -8 } else { 0 },
            };
            let zeros = Packed {
                words: &zbytes,
                bits: 4,
                packing: Packing::Outer {
                    order: [0, 1, 2, 3, 4, 5, 6, 7],
                },
                row_stride: 1,
                col_stride: n.div_ceil(8),
                offset: 1,
            };
            let dtype = if case % 4 < 2 {
                ScaleType::F16
            } else {
                ScaleType::BF16
            };
            let scales = Scales {
                bytes: &sbytes,
                dtype,
                row_stride: 1,
                col_stride: n,
            };
            let zeros = (case % 5 != 0).then_some(zeros);
            let l = Linear::new(n, k, groups, weights, zeros, scales, Groups::Size(gs)).unwrap();
            let start = rng.below(n as u64 / 2) as usize;
            let end = n - rng.below((n - start) as u64 / 2) as usize;
            let skew = rng.below(32) as usize;
            check::<bf16>(&l, start..end, skew);
            check::<f16>(&l, start..end, skew);
        }
    }

    /// True when this CPU runs the fast path; otherwise a `SKIPPED` line on
    /// stderr (the `dq` crate's `tests/formats/hf_generated.rs` fails under
    /// `DQ_REQUIRE_ALL_PATHS=1`, CI, where this path cannot run).
    fn runs_here(test: &str) -> bool {
        if Isa::Avx512.available() && vbmi() {
            return true;
        }
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "SKIPPED (path unavailable): {test}");
        false
    }

    /// AWQ weights at every 4-byte offset from a 64-byte line: the runs cover the
    /// rows with whole tiles, the main run's columns start on a line (a tile before
    /// it and one after overlap it when the weights are off a line), and the output
    /// equals the portable driver bit for bit for the whole weight and row ranges
    /// that cut its tiles.
    #[test]
    fn awq_runs_start_on_lines() {
        if !runs_here("linear::wide::tests::awq_runs_start_on_lines") {
            return;
        }
        let mut rng = Rng::new(5);
        let (n, k, gs) = (4 * 128, 192, 64);
        let groups = k / gs;
        let order = [0, 4, 1, 5, 2, 6, 3, 7];
        let raw = rng.bytes(4 * k * n / 8 + 128);
        let zbytes = rng.bytes(4 * groups * n / 8);
        let sbytes: Vec<u8> = (0..groups * n)
            .flat_map(|_| (0x1800u16 + rng.below(0xc00) as u16).to_le_bytes())
            .collect();
        let at = (64 - raw.as_ptr() as usize % 64) % 64;
        for off in (0..64).step_by(4) {
            let words = &raw[at + off..at + off + 4 * k * n / 8];
            let awq = |words| Packed {
                words,
                bits: 4,
                packing: Packing::Outer { order },
                row_stride: 1,
                col_stride: n / 8,
                offset: 0,
            };
            let (weights, zeros) = (awq(words), awq(&zbytes));
            let scales = Scales {
                bytes: &sbytes,
                dtype: ScaleType::F16,
                row_stride: 1,
                col_stride: n,
            };
            let l =
                Linear::new(n, k, groups, weights, Some(zeros), scales, Groups::Size(gs)).unwrap();
            let (covered, [head, main, tail]) = runs(Kind::Outer, &l, 0..n);
            assert_eq!(covered, 0..n);
            let start = words.as_ptr() as usize + 4 * (main.start / 8);
            assert_eq!(start % 64, 0, "offset {off}: main run {main:?}");
            assert_eq!(head.is_empty(), off == 0, "offset {off}: head {head:?}");
            let all = [&head, &main, &tail];
            for r in all.into_iter().filter(|r| !r.is_empty()) {
                assert!(
                    r.len().is_multiple_of(128) && covered.start <= r.start && r.end <= covered.end
                );
            }
            let inside = |n: usize| all.iter().any(|r| r.contains(&n));
            assert!(covered.clone().all(inside), "offset {off}: {all:?}");
            check::<bf16>(&l, 0..n, 8);
            check::<f16>(&l, 0..n, 0);
            let first = 8 * rng.below(8) as usize + rng.below(3) as usize;
            check::<bf16>(&l, first..n - rng.below(20) as usize, 3);
        }
    }

    /// Rows `rows` of `l` with the fast path into a buffer `skew` elements in,
    /// against the portable driver.
    fn check<T: Out + PartialEq + core::fmt::Debug>(
        l: &Linear<'_>,
        rows: Range<usize>,
        skew: usize,
    ) {
        assert!(kind::<T>(Isa::Avx512, l).is_some());
        let len = rows.len() * l.k;
        let mut a = vec![T::of(0.0); len + skew];
        let mut b = vec![T::of(0.0); len];
        l.run_on(Isa::Avx512, rows.clone(), &mut a[skew..]).unwrap();
        l.run_on(Isa::Portable, rows.clone(), &mut b).unwrap();
        let bits = |x: &[T]| x.iter().map(|v| v.bits16()).collect::<Vec<_>>();
        assert_eq!(bits(&a[skew..]), bits(&b), "rows {rows:?} skew {skew}");
    }
}
