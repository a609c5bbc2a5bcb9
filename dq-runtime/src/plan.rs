//! Validation: an op and tensor descriptors become a [`Plan`] (SPEC §3, §4 and §6).
//!
//! The plan holds the canonical group map (`g[d]` per src dimension) and, computed
//! once, the [`Lowering`] every backend specialises to (dtypes, the collapsed loop
//! nest and what follows from it). Buffers are checked later, by
//! [`Plan::bind`](crate::Plan::bind).

use crate::dtype::DType;
use crate::error::{Error, Result, Role};
use crate::lowering::{Loop, Lowering, Walk};
use crate::op::{AxesDequantize, Dequantize, DynamicDequantize, Op, OpKind, Qtype};
use crate::rules::{AXES, DYNAMIC, STATIC};
use crate::tensor::TensorDesc;

/// Static op parameters owned by the plan (they are attributes, not tensors).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct StaticParams {
    scales: Vec<u8>,
    zps: Option<Vec<u8>>,
}

/// A validated operation: dtypes, shapes, group map and loop nest.
///
/// Build one with [`Plan::new`]; run it with [`Plan::bind`] and a backend.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Plan {
    op: OpKind,
    src: TensorDesc,
    dst: TensorDesc,
    scales: TensorDesc,
    zps: Option<TensorDesc>,
    groups: Vec<usize>,
    scale_shape: Vec<usize>,
    src_strides: Vec<usize>,
    dst_strides: Vec<usize>,
    lowering: Lowering,
    params: Option<StaticParams>,
}

impl Plan {
    /// Validates `op` with the descriptors of its tensors.
    ///
    /// For the static [`Dequantize`] the scales and zero points are attributes:
    /// pass `None` for both.
    ///
    /// # Errors
    /// The [`Error`] variant of the first rule violated (SPEC §4 and §6).
    ///
    /// # Examples
    /// ```
    /// use dq_runtime::{DType, DynamicDequantize, Plan, TensorDesc};
    /// let src = TensorDesc::new(DType::U4, &[4, 256]);
    /// let scales = TensorDesc::new(DType::BF16, &[4, 2]);
    /// let dst = TensorDesc::new(DType::BF16, &[4, 256]);
    /// let plan = Plan::new(&DynamicDequantize::per_group(vec![1, 128]).into(), &src, Some(&scales), None, &dst)?;
    /// assert_eq!(plan.groups(), [1, 128]);
    /// # Ok::<(), dq_runtime::Error>(())
    /// ```
    pub fn new(
        op: &Op,
        src: &TensorDesc,
        scales: Option<&TensorDesc>,
        zps: Option<&TensorDesc>,
        dst: &TensorDesc,
    ) -> Result<Plan> {
        if dst.shape != src.shape {
            return Err(Error::DstShape {
                expected: src.shape.clone(),
                got: dst.shape.clone(),
            });
        }
        let p = match op {
            Op::Dequantize(o) => Self::check_static(o, src, scales, zps, dst)?,
            Op::Dynamic(o) => Self::check_dynamic(o, src, scales, zps, dst)?,
            Op::Axes(o) => Self::check_axes(o, src, scales, zps, dst)?,
        };
        p.finish(op.kind(), src, dst)
    }

    fn check_static(
        o: &Dequantize,
        src: &TensorDesc,
        scales: Option<&TensorDesc>,
        zps: Option<&TensorDesc>,
        dst: &TensorDesc,
    ) -> Result<Partial> {
        let op = OpKind::Dequantize;
        STATIC.check_src(src.dtype)?;
        STATIC.check_dst(dst.dtype)?;
        if let Some(s) = scales {
            if s.dtype == DType::E8M0 {
                return Err(Error::E8m0Scales { op });
            }
            return Err(not_allowed(op, "scales input", None));
        }
        if zps.is_some() {
            return Err(not_allowed(op, "zps input", None));
        }
        if o.group_shape.is_some() {
            return Err(not_allowed(op, "group_shape", Some(o.qtype)));
        }
        let rank = src.shape.len();
        let groups = match o.qtype {
            Qtype::PerTensor => per_tensor_groups(&src.shape),
            Qtype::PerChannel => per_channel_groups(&src.shape, o.axis)?,
            Qtype::PerGroup => return Err(Error::QtypeNotAllowed { op, qtype: o.qtype }),
        };
        let expected = match o.qtype {
            Qtype::PerChannel => src.shape[normalize_axis(o.axis, rank)?],
            _ => 1,
        };
        if o.scales.len() != expected {
            return Err(Error::ScalesCount {
                op,
                qtype: o.qtype,
                expected,
                got: o.scales.len(),
            });
        }
        STATIC.check_float_src_zps(src.dtype, o.zps.is_some())?;
        let zps = match &o.zps {
            None => None,
            Some(z) if z.len() != expected => {
                return Err(Error::ZpsCount {
                    op,
                    expected,
                    got: z.len(),
                });
            }
            Some(z) => Some(static_zps(z)),
        };
        let n = o.scales.len();
        Ok(Partial {
            groups,
            scales: TensorDesc::new(DType::F32, &[n]),
            zps: zps.as_ref().map(|(d, _)| TensorDesc::new(*d, &[n])),
            zps_broadcast: false,
            params: Some(StaticParams {
                scales: o.scales.iter().flat_map(|s| s.to_le_bytes()).collect(),
                zps: zps.map(|(_, b)| b),
            }),
        })
    }

    fn check_dynamic(
        o: &DynamicDequantize,
        src: &TensorDesc,
        scales: Option<&TensorDesc>,
        zps: Option<&TensorDesc>,
        dst: &TensorDesc,
    ) -> Result<Partial> {
        let op = OpKind::Dynamic;
        DYNAMIC.check_src(src.dtype)?;
        DYNAMIC.check_dst(dst.dtype)?;
        let scales = scales.ok_or(Error::MissingAttr {
            op,
            attr: "scales",
            qtype: None,
        })?;
        DYNAMIC.check_scales(dst.dtype, scales.dtype)?;
        if let Some(z) = zps {
            DYNAMIC.check_zps(src.dtype, z.dtype)?;
        }
        let (groups, granularity) = match o.qtype {
            Qtype::PerTensor | Qtype::PerChannel if o.group_shape.is_some() => {
                return Err(not_allowed(op, "group_shape", Some(o.qtype)));
            }
            Qtype::PerTensor => (per_tensor_groups(&src.shape), "per_tensor".to_string()),
            Qtype::PerChannel => (
                per_channel_groups(&src.shape, o.axis)?,
                format!("per_channel on axis {}", o.axis),
            ),
            Qtype::PerGroup => {
                let g = o.group_shape.as_ref().ok_or(Error::MissingAttr {
                    op,
                    attr: "group_shape",
                    qtype: Some(Qtype::PerGroup),
                })?;
                (per_group_groups(&src.shape, g)?, format!("per_group {g:?}"))
            }
        };
        let canonical = scale_shape(&src.shape, &groups);
        check_scales_shape(o.qtype, o.axis, scales, &canonical, &granularity)?;
        let zps_broadcast = match zps {
            Some(z) => check_zps_shape(z, scales, &granularity, true)?,
            None => false,
        };
        Ok(Partial {
            groups,
            scales: scales.clone(),
            zps: zps.cloned(),
            zps_broadcast,
            params: None,
        })
    }

    fn check_axes(
        o: &AxesDequantize,
        src: &TensorDesc,
        scales: Option<&TensorDesc>,
        zps: Option<&TensorDesc>,
        dst: &TensorDesc,
    ) -> Result<Partial> {
        let op = OpKind::Axes;
        AXES.check_src(src.dtype)?;
        AXES.check_dst(dst.dtype)?;
        let scales = scales.ok_or(Error::MissingAttr {
            op,
            attr: "scales",
            qtype: None,
        })?;
        AXES.check_scales(dst.dtype, scales.dtype)?;
        let zps = zps.ok_or(Error::MissingAttr {
            op,
            attr: "zps",
            qtype: None,
        })?;
        AXES.check_zps(src.dtype, zps.dtype)?;
        let rank = src.shape.len();
        let mut groups = per_tensor_groups(&src.shape);
        let mut seen = vec![false; rank];
        for &a in &o.axes {
            if a < 0 || a as u64 >= rank as u64 {
                return Err(Error::AxesOutOfRange { axis: a, rank });
            }
            if std::mem::replace(&mut seen[a as usize], true) {
                return Err(Error::DuplicateAxis { axis: a });
            }
            groups[a as usize] = 1;
        }
        let expected: Vec<usize> = (0..rank)
            .filter(|&d| seen[d])
            .map(|d| src.shape[d])
            .collect();
        let granularity = format!("axes {:?}", o.axes);
        check_param_shape(Role::Scales, scales, &expected, &granularity)?;
        check_zps_shape(zps, scales, &granularity, false)?;
        Ok(Partial {
            groups,
            scales: scales.clone(),
            zps: Some(zps.clone()),
            zps_broadcast: false,
            params: None,
        })
    }
}

/// What the op-specific checks produce.
struct Partial {
    groups: Vec<usize>,
    scales: TensorDesc,
    zps: Option<TensorDesc>,
    zps_broadcast: bool,
    params: Option<StaticParams>,
}

impl Partial {
    /// Checks layouts and sizes and builds the loop nest.
    fn finish(self, op: OpKind, src: &TensorDesc, dst: &TensorDesc) -> Result<Plan> {
        src.required_bytes(Role::Src)?;
        dst.required_bytes(Role::Dst)?;
        for (role, t) in [
            (Role::Scales, Some(&self.scales)),
            (Role::Zps, self.zps.as_ref()),
        ] {
            if let Some(t) = t {
                if !t.is_dense() {
                    return Err(Error::NotDense { role });
                }
                t.required_bytes(role)?;
            }
        }
        let numel = src.numel().ok_or_else(|| Error::Overflow {
            role: Role::Src,
            shape: src.shape.clone(),
        })?;
        let src_strides = src.strides_or_dense();
        let dst_strides = dst.strides_or_dense();
        if numel > 0 && overlaps(&dst.shape, &dst_strides) {
            return Err(Error::OverlappingDst {
                shape: dst.shape.clone(),
                strides: dst_strides,
            });
        }
        let scale_shape = scale_shape(&src.shape, &self.groups);
        let walk = Walk {
            shape: &src.shape,
            src_strides: &src_strides,
            dst_strides: &dst_strides,
            groups: &self.groups,
            scale_shape: &scale_shape,
        };
        let dtypes = (src.dtype, self.zps.as_ref().map(|z| z.dtype), dst.dtype);
        let lowering = Lowering::new(dtypes, self.scales.dtype, self.zps_broadcast, numel, &walk);
        Ok(Plan {
            op,
            src: src.clone(),
            dst: dst.clone(),
            scales: self.scales,
            zps: self.zps,
            groups: self.groups,
            scale_shape,
            src_strides,
            dst_strides,
            lowering,
            params: self.params,
        })
    }
}

impl Plan {
    /// The operation validated.
    pub fn op(&self) -> OpKind {
        self.op
    }
    /// Src descriptor.
    pub fn src(&self) -> &TensorDesc {
        &self.src
    }
    /// Dst descriptor.
    pub fn dst(&self) -> &TensorDesc {
        &self.dst
    }
    /// Scales descriptor (for the static op: f32 `[n]`, owned by the plan).
    pub fn scales(&self) -> &TensorDesc {
        &self.scales
    }
    /// Zero-point descriptor, `None` when symmetric. The static op's s64 attribute
    /// list is held as s32 when every value fits, s64 otherwise.
    pub fn zps(&self) -> Option<&TensorDesc> {
        self.zps.as_ref()
    }
    /// True when a single zero point applies to every element.
    pub fn zps_broadcast(&self) -> bool {
        self.lowering.zps_broadcast
    }
    /// The group size `g[d]` of every src dimension (SPEC §3).
    pub fn groups(&self) -> &[usize] {
        &self.groups
    }
    /// The canonical scale shape `ceil(D[d] / g[d])`, same rank as src.
    pub fn scale_shape(&self) -> &[usize] {
        &self.scale_shape
    }
    /// Number of elements of src and dst.
    pub fn numel(&self) -> usize {
        self.lowering.numel
    }
    /// Src strides in elements (dense ones filled in).
    pub fn src_strides(&self) -> &[usize] {
        &self.src_strides
    }
    /// Dst strides in elements (dense ones filled in).
    pub fn dst_strides(&self) -> &[usize] {
        &self.dst_strides
    }
    /// The collapsed loop nest, outermost first. It visits elements in the
    /// row-major order of the src shape, so a flat range of logical indices is a
    /// range of iterations. Empty when there are no elements.
    pub fn loops(&self) -> &[Loop] {
        &self.lowering.loops
    }
    /// What every backend specialises this plan to (computed once, here).
    pub fn lowering(&self) -> &Lowering {
        &self.lowering
    }
    /// The static op's scales and zero points as little-endian bytes.
    pub fn static_params(&self) -> Option<(&[u8], Option<&[u8]>)> {
        self.params
            .as_ref()
            .map(|p| (p.scales.as_slice(), p.zps.as_deref()))
    }
    /// The dtype triple that selects a kernel: (src, zps or `None`, dst).
    pub fn kernel_key(&self) -> (DType, Option<DType>, DType) {
        self.lowering.key()
    }
}

fn not_allowed(op: OpKind, attr: &'static str, qtype: Option<Qtype>) -> Error {
    Error::AttrNotAllowed { op, attr, qtype }
}

/// `axis` in `[-rank, rank - 1]` to `0..rank`.
pub fn normalize_axis(axis: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(Error::AxisOutOfRange { axis, rank });
    }
    Ok(if axis < 0 { axis + r } else { axis } as usize)
}

fn per_tensor_groups(shape: &[usize]) -> Vec<usize> {
    shape.iter().map(|&d| d.max(1)).collect()
}

fn per_channel_groups(shape: &[usize], axis: i64) -> Result<Vec<usize>> {
    let a = normalize_axis(axis, shape.len())?;
    let mut g = per_tensor_groups(shape);
    g[a] = 1;
    Ok(g)
}

fn per_group_groups(shape: &[usize], group_shape: &[i64]) -> Result<Vec<usize>> {
    if group_shape.len() != shape.len() {
        return Err(Error::GroupShapeRank {
            expected: shape.len(),
            got: group_shape.len(),
        });
    }
    group_shape
        .iter()
        .enumerate()
        .map(|(dim, &g)| {
            usize::try_from(g)
                .ok()
                .filter(|&g| g >= 1)
                .ok_or(Error::GroupShapeEntry { dim, got: g })
        })
        .collect()
}

/// `ceil(D[d] / g[d])` per dimension.
fn scale_shape(shape: &[usize], groups: &[usize]) -> Vec<usize> {
    shape
        .iter()
        .zip(groups)
        .map(|(&d, &g)| d.div_ceil(g))
        .collect()
}

/// Converts the static op's s64 zero points to s32 bytes when all fit, else s64 bytes.
fn static_zps(z: &[i64]) -> (DType, Vec<u8>) {
    if z.iter().all(|&v| i32::try_from(v).is_ok()) {
        (
            DType::S32,
            z.iter().flat_map(|&v| (v as i32).to_le_bytes()).collect(),
        )
    } else {
        (DType::S64, z.iter().flat_map(|v| v.to_le_bytes()).collect())
    }
}

fn check_scales_shape(
    qtype: Qtype,
    axis: i64,
    scales: &TensorDesc,
    canonical: &[usize],
    granularity: &str,
) -> Result<()> {
    match qtype {
        Qtype::PerTensor => {
            if scales.shape.is_empty() || scales.shape == [1] {
                Ok(())
            } else {
                Err(shape_error(Role::Scales, granularity, &[1], &scales.shape))
            }
        }
        Qtype::PerChannel => {
            let a = normalize_axis(axis, canonical.len())?;
            check_param_shape(Role::Scales, scales, &[canonical[a]], granularity)
        }
        Qtype::PerGroup => check_param_shape(Role::Scales, scales, canonical, granularity),
    }
}

fn check_param_shape(
    role: Role,
    t: &TensorDesc,
    expected: &[usize],
    granularity: &str,
) -> Result<()> {
    if t.shape == expected {
        Ok(())
    } else {
        Err(shape_error(role, granularity, expected, &t.shape))
    }
}

/// Zps must have the scales' shape, or (when `allow_one`) exactly one element.
/// Returns whether the zero point is broadcast.
fn check_zps_shape(
    z: &TensorDesc,
    scales: &TensorDesc,
    granularity: &str,
    allow_one: bool,
) -> Result<bool> {
    if z.shape == scales.shape {
        return Ok(false);
    }
    if allow_one && z.numel() == Some(1) {
        return Ok(true);
    }
    Err(shape_error(Role::Zps, granularity, &scales.shape, &z.shape))
}

fn shape_error(role: Role, granularity: &str, expected: &[usize], got: &[usize]) -> Error {
    let dim = (expected.len() == got.len())
        .then(|| (0..got.len()).find(|&d| expected[d] != got[d]))
        .flatten();
    Error::ParamShape {
        role,
        granularity: granularity.to_string(),
        expected: expected.to_vec(),
        got: got.to_vec(),
        dim,
    }
}

/// True when two elements of a non-empty view share an address.
fn overlaps(shape: &[usize], strides: &[usize]) -> bool {
    let mut dims: Vec<(usize, usize)> = shape
        .iter()
        .zip(strides)
        .filter(|(d, _)| **d > 1)
        .map(|(&d, &s)| (s, d))
        .collect();
    dims.sort_unstable();
    let mut span = 1usize; // elements covered by the dims seen so far
    for (s, d) in dims {
        if s < span {
            return true;
        }
        span = s.saturating_mul(d);
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dynamic(op: DynamicDequantize, shape: &[usize], scales: &[usize]) -> Plan {
        let src = TensorDesc::new(DType::S8, shape);
        let dst = TensorDesc::new(DType::F32, shape);
        let s = TensorDesc::new(DType::F32, scales);
        Plan::new(&op.into(), &src, Some(&s), None, &dst).unwrap()
    }

    #[test]
    fn per_tensor_collapses_to_one_loop() {
        let p = dynamic(DynamicDequantize::per_tensor(), &[3, 1, 4, 5], &[1]);
        assert_eq!(
            p.loops(),
            [Loop {
                len: 60,
                src_stride: 1,
                dst_stride: 1,
                group: 60,
                scale_stride: 1
            }]
        );
    }

    #[test]
    fn per_channel_axis0_is_grouped_run() {
        let p = dynamic(DynamicDequantize::per_channel(0), &[4, 6], &[4]);
        assert_eq!(p.loops().len(), 1);
        assert_eq!(p.loops()[0].group, 6);
        assert_eq!(p.loops()[0].len, 24);
    }

    #[test]
    fn per_channel_last_axis_keeps_two_loops() {
        let p = dynamic(DynamicDequantize::per_channel(-1), &[4, 6], &[6]);
        assert_eq!(p.loops().len(), 2);
        assert_eq!(p.loops()[1].group, 1);
        assert_eq!(p.loops()[0].group, 4);
    }

    #[test]
    fn per_group_rows_merge() {
        let p = dynamic(DynamicDequantize::per_group(vec![1, 4]), &[3, 8], &[3, 2]);
        assert_eq!(p.loops().len(), 1);
        assert_eq!(p.loops()[0].group, 4);
        // A remainder group cannot merge.
        let p = dynamic(DynamicDequantize::per_group(vec![1, 4]), &[3, 10], &[3, 3]);
        assert_eq!(p.loops().len(), 2);
    }

    #[test]
    fn overlapping_views_detected() {
        assert!(overlaps(&[2, 3], &[1, 1]));
        assert!(!overlaps(&[2, 3], &[1, 2]));
        assert!(!overlaps(&[2, 3], &[3, 1]));
        assert!(overlaps(&[2, 3], &[0, 1]));
        assert!(!overlaps(&[1, 3], &[0, 1]));
    }
}
