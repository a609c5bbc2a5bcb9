//! Quantized linears (GPTQ, AWQ, compressed-tensors): a weight `[N, K]` whose
//! integers, zero points and scales lie packed in other tensors, described as
//! affine views of those bytes ([`Linear`]), and the generated backend's tiled
//! driver that runs them.
//!
//! Element `(n, k)` of the weight is `f32(q - z) * s` (SPEC §5 and §11) with
//! `q` the field of [`Linear::weights`] at `(n, k)`, and `z`, `s` the fields of the
//! zero points and scales at `(n, g)`, `g` the group of input `k` ([`Groups`]).
//! Formats differ only in the views: which word and which field of the word hold
//! an index pair, and a constant added to the field ([`Packed`]).
//!
//! ```
//! use dq_runtime::linear::{Groups, Linear, Packed, Packing, ScaleType, Scales};
//! // A GPTQ-style weight N = 1, K = 8: one word, nibble k holds q = k; zero 8, scale 0.5.
//! let word = 0x7654_3210u32.to_le_bytes();
//! let zero = 8u32.to_le_bytes();
//! let scale = half::f16::from_f32(0.5).to_le_bytes();
//! let weights = Packed { words: &word, bits: 4, packing: Packing::Inner, row_stride: 1, col_stride: 1, offset: 0 };
//! let order = Packing::Outer { order: [0, 1, 2, 3, 4, 5, 6, 7] };
//! let zeros = Packed { words: &zero, bits: 4, packing: order, row_stride: 1, col_stride: 1, offset: 0 };
//! let scales = Scales { bytes: &scale, dtype: ScaleType::F16, row_stride: 1, col_stride: 1 };
//! let linear = Linear::new(1, 8, 1, weights, Some(zeros), scales, Groups::Size(8))?;
//! let mut out = [0f32; 8];
//! linear.run(0..1, &mut out)?;
//! assert_eq!(out, [-4.0, -3.5, -3.0, -2.5, -2.0, -1.5, -1.0, -0.5]);
//! # Ok::<(), dq_runtime::linear::LinearError>(())
//! ```

pub mod coded;
#[cfg(target_arch = "x86_64")]
mod coded_simd;
mod driver;
mod lut;
mod out;
mod view;
mod wide;

pub use out::Out;
pub use view::{Groups, Packed, Packing, ScaleType, Scales};

use std::ops::Range;

use crate::arch::{self, Isa};

/// Why a linear could not be described or run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LinearError {
    /// A view reaches past its buffer, or its description is inconsistent.
    #[error("{what}: {why}")]
    View {
        /// `weights`, `zeros`, `scales` or `groups`.
        what: &'static str,
        /// What is wrong.
        why: String,
    },
    /// `rows` is not inside `0..N`, or `out` is not `rows.len() * K` elements.
    #[error("rows {start}..{end} of {n} into {got} elements (K = {k})")]
    Output {
        /// First row asked for.
        start: usize,
        /// End of the rows asked for.
        end: usize,
        /// Rows of the weight.
        n: usize,
        /// Columns of the weight.
        k: usize,
        /// Elements given.
        got: usize,
    },
    /// This CPU cannot run the ISA asked for.
    #[error("this CPU cannot run {isa:?} code")]
    IsaUnavailable {
        /// The ISA asked for.
        isa: Isa,
    },
}

/// A validated quantized linear: every index of every view lies inside its buffer.
#[derive(Clone, Copy, Debug)]
pub struct Linear<'a> {
    n: usize,
    k: usize,
    groups: usize,
    weights: Packed<'a>,
    zeros: Option<Packed<'a>>,
    scales: Scales<'a>,
    map: Groups<'a>,
}

impl<'a> Linear<'a> {
    /// Describes the `[n, k]` weight with `groups` groups along K.
    ///
    /// # Errors
    /// [`LinearError::View`] when a view reaches past its buffer (or overflows), a
    /// width is not 4 or 8 bits, a field order is not a permutation, or the group
    /// map names a group outside `0..groups`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        n: usize,
        k: usize,
        groups: usize,
        weights: Packed<'a>,
        zeros: Option<Packed<'a>>,
        scales: Scales<'a>,
        map: Groups<'a>,
    ) -> Result<Self, LinearError> {
        weights.check("weights", n, k)?;
        if let Some(z) = &zeros {
            z.check("zeros", n, groups)?;
        }
        scales.check(n, groups)?;
        map.check(k, groups)?;
        Ok(Linear {
            n,
            k,
            groups,
            weights,
            zeros,
            scales,
            map,
        })
    }

    /// Rows of the weight (output features).
    pub fn n(&self) -> usize {
        self.n
    }

    /// Columns of the weight (input features).
    pub fn k(&self) -> usize {
        self.k
    }

    /// The packed integers.
    pub fn weights(&self) -> &Packed<'a> {
        &self.weights
    }

    /// Groups along K (columns of the zero points and scales).
    pub fn groups(&self) -> usize {
        self.groups
    }

    /// The packed zero points, if any.
    pub fn zeros(&self) -> Option<&Packed<'a>> {
        self.zeros.as_ref()
    }

    /// The scales.
    pub fn scales(&self) -> &Scales<'a> {
        &self.scales
    }

    /// The group of each input.
    pub fn map(&self) -> &Groups<'a> {
        &self.map
    }

    /// Element `(n, k)` in f32, one element at a time (the formula as the plan
    /// states it; inputs inside the weight).
    pub fn value(&self, n: usize, k: usize) -> f32 {
        let g = self.map.group(k);
        let (z, s) = self.params(n, g);
        crate::convert::quiet_f32(((self.weights.get(n, k) - z) as f32) * s)
    }

    /// Zero point (0 when there are none) and scale of row `n`, group `g`.
    #[inline(always)]
    fn params(&self, n: usize, g: usize) -> (i32, f32) {
        let z = self.zeros.as_ref().map_or(0, |z| z.get(n, g));
        (z, self.scales.get(n, g))
    }

    /// Writes rows `rows` of the weight into `out` (row-major, `rows.len() * K`
    /// elements) with the ISA the generated kernels use ([`arch::selected`]).
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
        if !out.is_empty() {
            driver::run(isa, self, rows, out);
        }
        Ok(())
    }
}

/// The checks of a `run_on` of rows `rows` of an `[n, k]` weight into an output of
/// `len` elements: `isa` runs here, and `rows` lie in `0..n` with `len` their
/// elements.
pub(crate) fn check_rows(
    isa: Isa,
    rows: &Range<usize>,
    n: usize,
    k: usize,
    len: usize,
) -> Result<(), LinearError> {
    if !isa.available() {
        return Err(LinearError::IsaUnavailable { isa });
    }
    let fits = rows.start <= rows.end && rows.end <= n;
    if !fits || rows.len().checked_mul(k) != Some(len) {
        return Err(LinearError::Output {
            start: rows.start,
            end: rows.end,
            n,
            k,
            got: len,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORDER: Packing = Packing::Outer {
        order: [0, 1, 2, 3, 4, 5, 6, 7],
    };

    fn packed(words: &[u8], packing: Packing, strides: (usize, usize)) -> Packed<'_> {
        Packed {
            words,
            bits: 4,
            packing,
            row_stride: strides.0,
            col_stride: strides.1,
            offset: 0,
        }
    }

    fn scales(bytes: &[u8]) -> Scales<'_> {
        Scales {
            bytes,
            dtype: ScaleType::F32,
            row_stride: 1,
            col_stride: 1,
        }
    }

    #[test]
    fn views_past_their_buffers_are_refused() {
        let (w, s) = ([0u8; 8], 1f32.to_le_bytes());
        let ok = Linear::new(
            1,
            16,
            1,
            packed(&w, Packing::Inner, (2, 1)),
            None,
            scales(&s),
            Groups::Size(16),
        );
        assert!(ok.is_ok());
        let what = |r: Result<Linear<'_>, LinearError>| match r {
            Err(LinearError::View { what, .. }) => what,
            other => panic!("{other:?}"),
        };
        // 17 inputs need a third word.
        let long = Linear::new(
            1,
            17,
            2,
            packed(&w, Packing::Inner, (2, 1)),
            None,
            scales(&[0; 8]),
            Groups::Size(16),
        );
        assert_eq!(what(long), "weights");
        // Two rows of one scale each need two scales.
        let rows = Linear::new(
            2,
            8,
            1,
            packed(&w, Packing::Inner, (1, 1)),
            None,
            scales(&s),
            Groups::Size(8),
        );
        assert_eq!(what(rows), "scales");
        let zeros = packed(&w[..4], ORDER, (1, 1));
        let z = Linear::new(
            9,
            1,
            1,
            packed(&[0; 8], ORDER, (1, 1)),
            Some(zeros),
            scales(&[0; 36]),
            Groups::Size(1),
        );
        assert_eq!(what(z), "zeros");
        let twice = packed(
            &w,
            Packing::Outer {
                order: [0, 0, 2, 3, 4, 5, 6, 7],
            },
            (1, 1),
        );
        let bad = Linear::new(1, 1, 1, twice, None, scales(&s), Groups::Size(1));
        assert_eq!(what(bad), "weights");
        let index = [0u32, 1];
        let g = Linear::new(
            1,
            2,
            1,
            packed(&w, Packing::Inner, (1, 1)),
            None,
            scales(&s),
            Groups::Index(&index),
        );
        assert_eq!(what(g), "groups");
        let wide = Packed {
            bits: 3,
            ..packed(&w, Packing::Inner, (1, 1))
        };
        assert_eq!(
            what(Linear::new(
                1,
                1,
                1,
                wide,
                None,
                scales(&s),
                Groups::Size(1)
            )),
            "weights"
        );
        let huge = packed(&w, Packing::Inner, (usize::MAX, 1));
        assert_eq!(
            what(Linear::new(
                2,
                1,
                1,
                huge,
                None,
                scales(&[0; 8]),
                Groups::Size(1)
            )),
            "weights"
        );
    }

    #[test]
    fn outputs_are_checked_and_empty_weights_write_nothing() {
        let (w, s) = ([0x21u8, 0, 0, 0], 0.5f32.to_le_bytes());
        let l = Linear::new(
            1,
            8,
            1,
            packed(&w, Packing::Inner, (1, 1)),
            None,
            scales(&s),
            Groups::Size(8),
        )
        .unwrap();
        let mut out = [0f32; 8];
        l.run(0..1, &mut out).unwrap();
        assert_eq!(out[..3], [0.5, 1.0, 0.0]);
        assert!(matches!(
            l.run(0..1, &mut [0f32; 7]),
            Err(LinearError::Output { .. })
        ));
        assert!(matches!(
            l.run(1..2, &mut [0f32; 8]),
            Err(LinearError::Output { .. })
        ));
        // K = 0 and no groups: nothing to read or write.
        let empty = Linear::new(
            3,
            0,
            0,
            packed(&[], Packing::Inner, (1, 1)),
            None,
            scales(&[]),
            Groups::Size(128),
        );
        empty.unwrap().run(0..3, &mut [0f32; 0]).unwrap();
    }
}
