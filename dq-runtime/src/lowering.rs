//! The lowering description: what a plan fixes for code generation, computed once
//! by [`Plan::new`](crate::Plan::new) and read by every backend (the generated
//! table's key, the JIT's cache key and its translator's input).

use crate::dtype::DType;
use crate::tensor::TensorDesc;

/// One level of the collapsed loop nest, outermost first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Loop {
    /// Trip count (>= 2 unless the whole tensor has one element).
    pub len: usize,
    /// Src stride in elements (nibbles for 4-bit).
    pub src_stride: usize,
    /// Dst stride in elements.
    pub dst_stride: usize,
    /// Group size along this loop: the scale index advances every `group` steps;
    /// `group >= len` means one scale for the whole loop.
    pub group: usize,
    /// Scale-index step per group.
    pub scale_stride: usize,
}

impl Loop {
    /// True when one scale covers the whole loop.
    pub fn is_constant(&self) -> bool {
        self.group >= self.len
    }
}

/// Everything a compiled kernel bakes in: dtypes, the zero-point broadcast, the
/// canonical loop nest and the facts derived from it.
///
/// Two plans with equal lowerings run the same code (the raw shape is not part of
/// it: shapes that collapse to the same loops share a kernel). Only
/// [`Plan::new`](crate::Plan::new) builds one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Lowering {
    /// Src dtype.
    pub src: DType,
    /// Zero-point dtype, `None` when symmetric.
    pub zps: Option<DType>,
    /// Dst dtype.
    pub dst: DType,
    /// Scales dtype: the dst dtype, or e8m0 (SPEC §10).
    pub scales: DType,
    /// One zero point for every element.
    pub zps_broadcast: bool,
    /// The collapsed loop nest, outermost first; empty when there are no elements.
    pub loops: Vec<Loop>,
    /// Dst element `l` (logical index) sits at dst offset `l`.
    pub dst_dense: bool,
    /// Number of elements.
    pub numel: usize,
}

/// A tensor's shape and strides (elements), for building the loop nest.
pub(crate) struct Walk<'a> {
    pub shape: &'a [usize],
    pub src_strides: &'a [usize],
    pub dst_strides: &'a [usize],
    pub groups: &'a [usize],
    pub scale_shape: &'a [usize],
}

impl Lowering {
    /// The lowering of a validated plan with dtypes `(src, zps, dst)` and `numel`
    /// elements walked as `walk`.
    pub(crate) fn new(
        (src, zps, dst): (DType, Option<DType>, DType),
        scales: DType,
        zps_broadcast: bool,
        numel: usize,
        walk: &Walk<'_>,
    ) -> Lowering {
        let loops = if numel == 0 {
            Vec::new()
        } else {
            collapse(walk)
        };
        Lowering {
            src,
            zps,
            dst,
            scales,
            zps_broadcast,
            dst_dense: is_dense(&loops),
            loops,
            numel,
        }
    }

    /// The dtype triple that selects a generated kernel: (src, zps or `None`, dst).
    pub fn key(&self) -> (DType, Option<DType>, DType) {
        (self.src, self.zps, self.dst)
    }

    /// True when there are no elements (and no loops).
    pub fn is_empty(&self) -> bool {
        self.numel == 0
    }

    /// Bytes per scale.
    pub fn scale_bytes(&self) -> usize {
        self.scales.bits() / 8
    }

    /// Bytes per dst element.
    pub fn dst_bytes(&self) -> usize {
        self.dst.bits() / 8
    }

    /// Bytes of the whole output (saturating).
    pub fn output_bytes(&self) -> usize {
        self.numel.saturating_mul(self.dst_bytes())
    }
}

/// True when each loop's dst stride is the product of the inner loops' lengths.
fn is_dense(loops: &[Loop]) -> bool {
    let mut inner = 1usize;
    for l in loops.iter().rev() {
        if l.len > 1 && l.dst_stride != inner {
            return false;
        }
        inner = inner.saturating_mul(l.len);
    }
    true
}

/// Builds the loop nest: drops size-1 dims, then merges neighbours whose strides
/// and group maps allow it (see [`Loop`]).
fn collapse(w: &Walk<'_>) -> Vec<Loop> {
    let scale_strides = TensorDesc::dense_strides(w.scale_shape);
    let mut loops: Vec<Loop> = Vec::new();
    for (d, &len) in w.shape.iter().enumerate() {
        if len == 1 {
            continue;
        }
        let inner = Loop {
            len,
            src_stride: w.src_strides[d],
            dst_stride: w.dst_strides[d],
            group: w.groups[d].min(len),
            scale_stride: scale_strides[d],
        };
        match loops.last_mut().and_then(|outer| merge(outer, &inner)) {
            Some(m) => *loops.last_mut().expect("merged into the last loop") = m,
            None => loops.push(inner),
        }
    }
    if loops.is_empty() {
        loops.push(Loop {
            len: 1,
            src_stride: 1,
            dst_stride: 1,
            group: 1,
            scale_stride: 0,
        });
    }
    loops
}

/// Merges `inner` into `outer` when the pair walks memory and scales like one loop.
fn merge(outer: &Loop, inner: &Loop) -> Option<Loop> {
    let len = outer.len.checked_mul(inner.len)?;
    if outer.src_stride != inner.src_stride.checked_mul(inner.len)?
        || outer.dst_stride != inner.dst_stride.checked_mul(inner.len)?
    {
        return None;
    }
    let (group, scale_stride) = if inner.is_constant() {
        // Scale index depends on the outer index only: groups of g_outer * len_inner.
        let g = if outer.is_constant() {
            len
        } else {
            outer.group * inner.len
        };
        (g, outer.scale_stride)
    } else if outer.group == 1
        && inner.len.is_multiple_of(inner.group)
        && outer.scale_stride == inner.scale_stride * (inner.len / inner.group)
    {
        (inner.group, inner.scale_stride)
    } else {
        return None;
    };
    Some(Loop {
        len,
        src_stride: inner.src_stride,
        dst_stride: inner.dst_stride,
        group: group.min(len),
        scale_stride,
    })
}

#[cfg(test)]
mod tests {
    use crate::{DType, DynamicDequantize, Lowering, Plan, TensorDesc};

    fn lowering(shape: &[usize], dst_strides: Option<Vec<usize>>) -> Lowering {
        let mut dst = TensorDesc::new(DType::F16, shape);
        dst.strides = dst_strides;
        let plan = Plan::new(
            &DynamicDequantize::per_tensor().into(),
            &TensorDesc::new(DType::U4, shape),
            Some(&TensorDesc::new(DType::F16, &[])),
            Some(&TensorDesc::new(DType::S8, &[1])),
            &dst,
        )
        .unwrap();
        plan.lowering().clone()
    }

    #[test]
    fn shapes_with_the_same_loops_share_a_lowering() {
        let a = lowering(&[4, 6], None);
        assert_eq!(a, lowering(&[24], None));
        assert_eq!(a, lowering(&[2, 1, 12], None));
        assert_ne!(a, lowering(&[25], None));
        assert_eq!(a.key(), (DType::U4, Some(DType::S8), DType::F16));
        assert!(a.zps_broadcast && a.dst_dense && !a.is_empty());
        assert_eq!((a.numel, a.dst_bytes(), a.output_bytes()), (24, 2, 48));
    }

    #[test]
    fn a_transposed_dst_is_not_dense() {
        let t = lowering(&[4, 6], Some(vec![1, 4]));
        assert!(!t.dst_dense);
        assert_eq!(t.loops.len(), 2);
        assert_ne!(t, lowering(&[4, 6], None));
    }

    #[test]
    fn no_elements_no_loops() {
        let e = lowering(&[0, 6], None);
        assert!(e.is_empty() && e.loops.is_empty());
        assert_eq!(e.output_bytes(), 0);
    }
}
