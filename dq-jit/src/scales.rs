//! f16 scales widened to f32 once per call, for kernels whose inner loop reads a
//! new scale every few elements ([`Spec::f32_scales`](crate::Spec::f32_scales())):
//! widening each scale once costs less than widening it for every element it
//! scales (in 128-bit lanes, a dozen integer operations a vector).

use std::cell::RefCell;
use std::ops::Range;

use dq_runtime::{DType, Lowering};

/// Inner-loop groups of at most this many elements read widened scales.
pub(crate) const SHORT_GROUP: usize = 8;

/// [`SHORT_GROUP`] for 4-bit src, whose table segments take a few instructions
/// per element: a scalar f16 widening (about 20 instructions) costs a group of
/// 32 or 64 elements about a fifth of its time. Measured on AMD EPYC Zen 5
/// (s4 -> f16): groups of 32 and 64 gained, groups of 128 did not (BENCHMARKS.md).
pub(crate) const SHORT_4BIT_GROUP: usize = 64;

/// True when `l`'s kernels should read f32 scales widened per call: f16 scales,
/// an inner loop whose scale changes every [`SHORT_GROUP`] elements or fewer
/// (4-bit src: [`SHORT_4BIT_GROUP`]), and at most one scale per 8 elements in
/// all (so the widening pass is cheap).
pub(crate) fn pays(l: &Lowering) -> bool {
    let Some(inner) = l.loops.last() else {
        return false;
    };
    let short = if l.src.is_4bit() {
        SHORT_4BIT_GROUP
    } else {
        SHORT_GROUP
    };
    l.scales == DType::F16
        && !inner.is_constant()
        && inner.group <= short
        && span(l, 0..l.numel).len().saturating_mul(8) <= l.numel
}

/// Elements per piece of a call whose scales are widened: each piece's scales
/// are widened together into a per-thread buffer, which then holds about a
/// piece's scales (and the rows of scales the piece touches), never more than
/// the plan's own scales ([`pays`]: one per 8 elements or fewer).
pub(crate) const PIECE: usize = 1 << 20;

/// `range` in pieces of at most [`PIECE`] elements.
pub(crate) fn pieces(range: Range<usize>) -> impl Iterator<Item = Range<usize>> {
    (range.start..range.end)
        .step_by(PIECE)
        .map(move |s| s..(s + PIECE).min(range.end))
}

/// The scale indices that elements `range` (non-empty, inside the plan) can read.
///
/// An element's scale index is the sum over loops of `(i / group) * scale_stride`,
/// which grows with each loop index `i`. The elements of `range` share the loop
/// indices of `range.start` and `range.end - 1` down to the first loop where those
/// differ, run between the two there, and take any value in the loops inside it.
pub(crate) fn span(l: &Lowering, range: Range<usize>) -> Range<usize> {
    let (a, b) = (digits(l, range.start), digits(l, range.end - 1));
    let part = |k: usize, i: usize| (i / l.loops[k].group) * l.loops[k].scale_stride;
    let (mut lo, mut hi, mut apart) = (0, 0, false);
    for k in 0..l.loops.len() {
        if apart {
            hi += part(k, l.loops[k].len - 1);
        } else {
            lo += part(k, a[k]);
            hi += part(k, b[k]);
            apart = a[k] != b[k];
        }
    }
    lo..hi + 1
}

/// Element `e`'s index in each loop, outermost first.
fn digits(l: &Lowering, mut e: usize) -> Vec<usize> {
    let mut d = vec![0; l.loops.len()];
    for (k, lp) in l.loops.iter().enumerate().rev() {
        d[k] = e % lp.len;
        e /= lp.len;
    }
    d
}

/// Runs `f` with a base address at which f32 scale `i`, for every `i` in `span`,
/// is f16 scale `i` of `scales` widened exactly (NaNs quieted, as the reference's
/// `half` conversion does: [`dq_runtime::arch::widen_f16`]).
///
/// # Panics
/// If `span` reaches past `scales` (plans validate that their scales hold every
/// index their elements read).
pub(crate) fn with_f32<R>(scales: &[u8], span: Range<usize>, f: impl FnOnce(*const u8) -> R) -> R {
    thread_local! {
        static WIDE: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    }
    let bytes = &scales[2 * span.start..2 * span.end];
    WIDE.with_borrow_mut(|wide| {
        wide.clear();
        wide.resize(span.len(), 0.0);
        dq_runtime::arch::widen_f16(wide, bytes);
        // Scale `i` sits at `wide[i - span.start]`; the kernel adds `4 * i`.
        f(wide.as_ptr().wrapping_sub(span.start).cast())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dq_runtime::{DynamicDequantize, Plan, TensorDesc};

    /// A per-group f16 plan of `shape` with group shape `groups`.
    fn plan(shape: &[usize], groups: &[usize]) -> Plan {
        let ss: Vec<usize> = shape
            .iter()
            .zip(groups)
            .map(|(&d, &g)| d.div_ceil(g))
            .collect();
        let op = DynamicDequantize::per_group(groups.iter().map(|&g| g as i64).collect());
        let scales = TensorDesc::new(DType::F16, &ss);
        let (src, dst) = (
            TensorDesc::new(DType::S8, shape),
            TensorDesc::new(DType::F16, shape),
        );
        Plan::new(&op.into(), &src, Some(&scales), None, &dst).expect("a valid plan")
    }

    /// The scale index of logical element `e`, as the reference computes it from
    /// the plan's shape and groups (not from the loops).
    fn scale_of(p: &Plan, mut e: usize) -> usize {
        let (shape, groups) = (&p.src().shape, p.groups());
        let strides = TensorDesc::dense_strides(p.scale_shape());
        let mut si = 0;
        for d in (0..shape.len()).rev() {
            si += (e % shape[d]) / groups[d] * strides[d];
            e /= shape[d];
        }
        si
    }

    #[test]
    fn a_span_holds_every_scale_its_range_reads() {
        let cases: [(&[usize], &[usize]); 5] = [
            (&[40, 70], &[16, 1]),
            (&[41, 69], &[8, 3]),
            (&[3, 20, 37], &[1, 10, 1]),
            (&[5, 6, 7], &[2, 4, 1]),
            (&[300], &[7]),
        ];
        let mut r = dq_runtime::rng::Rng::new(3);
        for (shape, groups) in cases {
            let p = plan(shape, groups);
            let n = p.numel();
            for _ in 0..200 {
                let (a, b) = (r.below(n as u64) as usize, r.below(n as u64) as usize);
                let range = a.min(b)..a.max(b) + 1;
                let s = span(p.lowering(), range.clone());
                for e in range.clone() {
                    let si = scale_of(&p, e);
                    assert!(
                        s.contains(&si),
                        "{shape:?}/{groups:?} {range:?}: {si} not in {s:?}"
                    );
                }
            }
        }
        // Rows 130..=131 of [256, 64] in groups of 128 rows read scale row 1 only.
        assert_eq!(
            span(plan(&[256, 64], &[128, 1]).lowering(), 130 * 64..132 * 64),
            64..128
        );
    }

    #[test]
    fn pieces_cover_a_range_in_order() {
        let n = 2 * PIECE + 5;
        let p: Vec<Range<usize>> = pieces(3..n).collect();
        assert_eq!(
            p,
            [3..3 + PIECE, 3 + PIECE..3 + 2 * PIECE, 3 + 2 * PIECE..n]
        );
        assert_eq!(pieces(7..7).count(), 0);
    }

    #[test]
    fn widening_pays_only_for_short_inner_groups_and_few_scales() {
        assert!(pays(plan(&[256, 64], &[128, 1]).lowering()));
        assert!(pays(plan(&[256, 64], &[16, 8]).lowering()));
        // A scale per element, or long groups along the row, do not.
        assert!(!pays(plan(&[256, 64], &[1, 1]).lowering()));
        assert!(!pays(plan(&[256, 64], &[1, 32]).lowering()));
    }

    #[test]
    fn widened_scales_are_halfs_values() {
        let bits: Vec<u16> = (0..=u16::MAX).collect();
        let bytes: Vec<u8> = bits.iter().flat_map(|b| b.to_le_bytes()).collect();
        with_f32(&bytes, 5..bits.len(), |p| {
            for (i, &b) in bits.iter().enumerate().skip(5) {
                // SAFETY: `with_f32` made index `i` of `5..len` readable at `p`.
                let got = unsafe { p.cast::<f32>().add(i).read() };
                let want = half::f16::from_bits(b).to_f32();
                assert_eq!(got.to_bits(), want.to_bits(), "{b:#06x}");
            }
        });
    }
}
