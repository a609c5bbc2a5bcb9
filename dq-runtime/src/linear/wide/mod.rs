//! 4-bit fields into 16-bit outputs with AVX-512 VBMI, for GPTQ's and AWQ's
//! transposed words (words of adjacent rows adjacent, groups by a size that is a
//! multiple of 32): the linear driver's fast path.
//!
//! A tile is 64 rows (4 lines of 16 words of a word row: words along K, GPTQ) or
//! 128 (16 word columns of 8 rows: along N, AWQ). Per group the tile's rows get their
//! 16 exact outputs (the formula and rounding of the portable driver's tables)
//! repeated in a 512-bit register; per 32 inputs the word rows' lines are loaded
//! and transposed in registers (4x4 or 16x16 words), each row's 32 fields are moved
//! into the low bits of 32 16-bit lanes (`vpmultishiftqb`, or `vpermt2b` and a
//! shift) and looked up in its table with `vpermw` (indices modulo 32: the table
//! is repeated, so bit 4 of an index is ignored). Outputs go straight to the
//! output, realigned to its 64-byte lines and written with non-temporal stores (no
//! read of the output's lines); the words are prefetched into L2 ahead.

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

    /// The first row a tile may start at, from `n`.
    pub(super) fn align(self, n: usize) -> usize {
        match self {
            Kind::Inner => n,
            Kind::Outer => n.next_multiple_of(8),
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

/// Rows `tiles` (whole tiles of `kind`: `kind.rows()` rows each, word-column
/// aligned for `Outer`) of `l` into `out` (`tiles.len() * K` elements).
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
            let n = 8 * (1 + rng.below(64) as usize);
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
