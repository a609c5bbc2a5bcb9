//! One test per validation rule (SPEC §4 and §6): each asserts the exact
//! `dq::Error` variant with its fields, and that the dst buffer (filled with a
//! sentinel) is untouched after the error.

use dq::kernel::{Backends, Reference};
use dq::{
    AxesDequantize, Backend, DType, Dequantize, DynamicDequantize, Error, Op, OpKind, Options,
    Plan, Qtype, Role, Tensor, TensorDesc, TensorMut,
};

const SENTINEL: u8 = 0xa5;

/// One call: descriptors plus buffers sized for them (unless overridden).
#[derive(Clone)]
struct Call {
    op: Op,
    src: TensorDesc,
    src_len: Option<usize>,
    scales: Option<TensorDesc>,
    scales_len: Option<usize>,
    zps: Option<TensorDesc>,
    zps_len: Option<usize>,
    dst: TensorDesc,
    dst_len: Option<usize>,
    opts: Options,
}

/// Bytes for a view, or a small buffer when the view's size cannot be computed.
fn size(d: &TensorDesc, role: Role) -> usize {
    d.required_bytes(role).unwrap_or(64).min(1 << 20)
}

impl Call {
    fn new(op: impl Into<Op>, src: DType, shape: &[usize], dst: DType) -> Call {
        Call {
            op: op.into(),
            src: TensorDesc::new(src, shape),
            src_len: None,
            scales: None,
            scales_len: None,
            zps: None,
            zps_len: None,
            dst: TensorDesc::new(dst, shape),
            dst_len: None,
            opts: Options::default(),
        }
    }

    /// Dynamic/axes call with dense scales of the dst dtype.
    fn dynamic(
        op: impl Into<Op>,
        src: DType,
        shape: &[usize],
        dst: DType,
        scales: &[usize],
    ) -> Call {
        Call::new(op, src, shape, dst).scales(dst, scales)
    }

    fn scales(mut self, dtype: DType, shape: &[usize]) -> Call {
        self.scales = Some(TensorDesc::new(dtype, shape));
        self
    }

    fn zps(mut self, dtype: DType, shape: &[usize]) -> Call {
        self.zps = Some(TensorDesc::new(dtype, shape));
        self
    }

    /// Runs the whole public path (`dq::dequantize`) into a sentinel-filled dst and
    /// returns the error, asserting dst was not written.
    fn err(&self) -> Error {
        let src = vec![1u8; self.src_len.unwrap_or_else(|| size(&self.src, Role::Src))];
        let scales: Option<Vec<u8>> = self.scales.as_ref().map(|d| {
            let n = self.scales_len.unwrap_or_else(|| size(d, Role::Scales));
            // 1.0 in any float dtype is not all-zero; any bytes are valid here.
            vec![0x3c; n]
        });
        let zps: Option<Vec<u8>> = self
            .zps
            .as_ref()
            .map(|d| vec![0u8; self.zps_len.unwrap_or_else(|| size(d, Role::Zps))]);
        let mut out = vec![SENTINEL; self.dst_len.unwrap_or_else(|| size(&self.dst, Role::Dst))];
        let st = self.scales.as_ref().map(|d| Tensor {
            desc: d.clone(),
            data: scales.as_deref().unwrap(),
        });
        let zt = self.zps.as_ref().map(|d| Tensor {
            desc: d.clone(),
            data: zps.as_deref().unwrap(),
        });
        let src_t = Tensor {
            desc: self.src.clone(),
            data: &src,
        };
        let mut dst = TensorMut {
            desc: self.dst.clone(),
            data: &mut out,
        };
        let e = dq::dequantize(
            &self.op,
            &src_t,
            st.as_ref(),
            zt.as_ref(),
            &mut dst,
            &self.opts,
        )
        .expect_err("the call must be rejected");
        assert!(
            out.iter().all(|&b| b == SENTINEL),
            "dst was written although the call failed with {e}"
        );
        e
    }

    /// Runs the call and asserts it succeeds (the positive side of a rule).
    fn ok(&self) {
        let src = vec![1u8; size(&self.src, Role::Src)];
        let scales = self
            .scales
            .as_ref()
            .map(|d| vec![0u8; size(d, Role::Scales)]);
        let zps = self.zps.as_ref().map(|d| vec![0u8; size(d, Role::Zps)]);
        let mut out = vec![SENTINEL; size(&self.dst, Role::Dst)];
        let st = self.scales.as_ref().map(|d| Tensor {
            desc: d.clone(),
            data: scales.as_deref().unwrap(),
        });
        let zt = self.zps.as_ref().map(|d| Tensor {
            desc: d.clone(),
            data: zps.as_deref().unwrap(),
        });
        let src_t = Tensor {
            desc: self.src.clone(),
            data: &src,
        };
        let mut dst = TensorMut {
            desc: self.dst.clone(),
            data: &mut out,
        };
        dq::dequantize(
            &self.op,
            &src_t,
            st.as_ref(),
            zt.as_ref(),
            &mut dst,
            &self.opts,
        )
        .expect("the call must be accepted");
    }
}

fn per_tensor() -> DynamicDequantize {
    DynamicDequantize::per_tensor()
}

// --- dtypes ----------------------------------------------------------------------

#[test]
fn unknown_dtype_name() {
    assert_eq!(
        "i8".parse::<DType>(),
        Err(Error::UnknownDType { got: "i8".into() })
    );
}

#[test]
fn static_src_dtype() {
    let e = Call::new(Dequantize::new(vec![1.0]), DType::S4, &[4], DType::F32).err();
    assert_eq!(
        e,
        Error::SrcDType {
            op: OpKind::Dequantize,
            expected: "s8, u8, f8_e4m3, f8_e5m2",
            got: DType::S4
        }
    );
}

#[test]
fn static_dst_dtype() {
    let e = Call::new(Dequantize::new(vec![1.0]), DType::U8, &[4], DType::F16).err();
    assert_eq!(
        e,
        Error::DstDType {
            op: OpKind::Dequantize,
            expected: "f32",
            got: DType::F16
        }
    );
}

#[test]
fn dynamic_src_dtype() {
    let e = Call::dynamic(per_tensor(), DType::S32, &[4], DType::F32, &[1]).err();
    assert_eq!(
        e,
        Error::SrcDType {
            op: OpKind::Dynamic,
            expected: "s8, u8, s4, u4, f8_e4m3, f8_e5m2, f4_e2m1",
            got: DType::S32
        }
    );
}

#[test]
fn dynamic_dst_dtype() {
    let e = Call::dynamic(per_tensor(), DType::S8, &[4], DType::F64, &[1]).err();
    assert_eq!(
        e,
        Error::DstDType {
            op: OpKind::Dynamic,
            expected: "f32, f16, bf16",
            got: DType::F64
        }
    );
}

#[test]
fn axes_src_dtype() {
    let e = Call::dynamic(
        AxesDequantize::new(vec![]),
        DType::U4,
        &[4],
        DType::F32,
        &[],
    )
    .zps(DType::U4, &[])
    .err();
    assert_eq!(
        e,
        Error::SrcDType {
            op: OpKind::Axes,
            expected: "s8, u8, s32",
            got: DType::U4
        }
    );
}

#[test]
fn axes_dst_dtype() {
    let e = Call::dynamic(AxesDequantize::new(vec![]), DType::S8, &[4], DType::S8, &[])
        .zps(DType::S8, &[])
        .err();
    assert_eq!(
        e,
        Error::DstDType {
            op: OpKind::Axes,
            expected: "f16, bf16, f32, f64",
            got: DType::S8
        }
    );
}

#[test]
fn scales_dtype_must_be_dst_dtype() {
    let e = Call::new(per_tensor(), DType::U8, &[4], DType::BF16)
        .scales(DType::F32, &[1])
        .err();
    assert_eq!(
        e,
        Error::ScalesNotDstOrE8m0 {
            dst: DType::BF16,
            got: DType::F32
        }
    );
    let e = Call::new(AxesDequantize::new(vec![]), DType::U8, &[4], DType::F64)
        .scales(DType::F32, &[])
        .zps(DType::U8, &[])
        .err();
    assert_eq!(
        e,
        Error::ScalesDType {
            expected: DType::F64,
            got: DType::F32
        }
    );
}

#[test]
fn dynamic_zps_dtype() {
    for bad in [DType::F32, DType::S64, DType::BF16] {
        let e = Call::dynamic(per_tensor(), DType::U4, &[4], DType::F32, &[1])
            .zps(bad, &[1])
            .err();
        assert_eq!(
            e,
            Error::ZpsDType {
                op: OpKind::Dynamic,
                expected: "one of s4, u4, s8, u8, s32".into(),
                got: bad
            }
        );
    }
    // Every listed pair is accepted, e.g. u4 src with u8 zps.
    for good in [DType::S4, DType::U4, DType::S8, DType::U8, DType::S32] {
        Call::dynamic(per_tensor(), DType::U4, &[4], DType::F32, &[1])
            .zps(good, &[1])
            .ok();
    }
}

#[test]
fn axes_zps_dtype_is_src_dtype() {
    let e = Call::dynamic(
        AxesDequantize::new(vec![]),
        DType::S8,
        &[4],
        DType::F32,
        &[],
    )
    .zps(DType::U8, &[])
    .err();
    assert_eq!(
        e,
        Error::ZpsDType {
            op: OpKind::Axes,
            expected: "s8 (the src dtype)".into(),
            got: DType::U8
        }
    );
}

// --- attributes ------------------------------------------------------------------

#[test]
fn unknown_qtype() {
    assert_eq!(
        "per_row".parse::<Qtype>(),
        Err(Error::UnknownQtype {
            got: "per_row".into()
        })
    );
    assert_eq!("per_group".parse::<Qtype>(), Ok(Qtype::PerGroup));
}

#[test]
fn qtype_not_allowed_per_group_on_static() {
    let op = Dequantize::new(vec![1.0]).qtype(Qtype::PerGroup);
    let e = Call::new(op, DType::S8, &[4], DType::F32).err();
    assert_eq!(
        e,
        Error::QtypeNotAllowed {
            op: OpKind::Dequantize,
            qtype: Qtype::PerGroup
        }
    );
}

#[test]
fn attr_not_allowed_group_shape_on_static() {
    let op = Dequantize::new(vec![1.0]).group_shape(vec![1, 2]);
    let e = Call::new(op, DType::S8, &[2, 2], DType::F32).err();
    assert_eq!(
        e,
        Error::AttrNotAllowed {
            op: OpKind::Dequantize,
            attr: "group_shape",
            qtype: Some(Qtype::PerTensor)
        }
    );
}

#[test]
fn attr_not_allowed_group_shape_on_dynamic_per_tensor() {
    let op = per_tensor().group_shape(vec![1, 2]);
    let e = Call::dynamic(op, DType::S8, &[2, 2], DType::F32, &[1]).err();
    assert_eq!(
        e,
        Error::AttrNotAllowed {
            op: OpKind::Dynamic,
            attr: "group_shape",
            qtype: Some(Qtype::PerTensor)
        }
    );
}

#[test]
fn attr_not_allowed_group_shape_on_dynamic_per_channel() {
    let op = DynamicDequantize::per_channel(1).group_shape(vec![1, 2]);
    let e = Call::dynamic(op, DType::S8, &[2, 2], DType::F32, &[2]).err();
    assert_eq!(
        e,
        Error::AttrNotAllowed {
            op: OpKind::Dynamic,
            attr: "group_shape",
            qtype: Some(Qtype::PerChannel)
        }
    );
}

#[test]
fn attr_not_allowed_scales_or_zps_input_on_static() {
    let e = Call::new(Dequantize::new(vec![1.0]), DType::S8, &[4], DType::F32)
        .scales(DType::F32, &[1])
        .err();
    assert_eq!(
        e,
        Error::AttrNotAllowed {
            op: OpKind::Dequantize,
            attr: "scales input",
            qtype: None
        }
    );
    let e = Call::new(Dequantize::new(vec![1.0]), DType::S8, &[4], DType::F32)
        .zps(DType::S8, &[1])
        .err();
    assert_eq!(
        e,
        Error::AttrNotAllowed {
            op: OpKind::Dequantize,
            attr: "zps input",
            qtype: None
        }
    );
}

#[test]
fn missing_scales() {
    let e = Call::new(per_tensor(), DType::S8, &[4], DType::F32).err();
    assert_eq!(
        e,
        Error::MissingAttr {
            op: OpKind::Dynamic,
            attr: "scales",
            qtype: None
        }
    );
    let e = Call::new(AxesDequantize::new(vec![]), DType::S8, &[4], DType::F32)
        .zps(DType::S8, &[])
        .err();
    assert_eq!(
        e,
        Error::MissingAttr {
            op: OpKind::Axes,
            attr: "scales",
            qtype: None
        }
    );
}

#[test]
fn missing_zps_for_axes() {
    let e = Call::dynamic(
        AxesDequantize::new(vec![]),
        DType::S8,
        &[4],
        DType::F32,
        &[],
    )
    .err();
    assert_eq!(
        e,
        Error::MissingAttr {
            op: OpKind::Axes,
            attr: "zps",
            qtype: None
        }
    );
}

#[test]
fn missing_group_shape_for_per_group() {
    let op = per_tensor().qtype(Qtype::PerGroup);
    let e = Call::dynamic(op, DType::S8, &[2, 4], DType::F32, &[2, 1]).err();
    assert_eq!(
        e,
        Error::MissingAttr {
            op: OpKind::Dynamic,
            attr: "group_shape",
            qtype: Some(Qtype::PerGroup)
        }
    );
}

#[test]
fn axis_out_of_range_positive() {
    let e = Call::dynamic(
        DynamicDequantize::per_channel(2),
        DType::S8,
        &[2, 3],
        DType::F32,
        &[3],
    )
    .err();
    assert_eq!(e, Error::AxisOutOfRange { axis: 2, rank: 2 });
    let op = Dequantize::new(vec![1.0, 1.0]).per_channel(5);
    let e = Call::new(op, DType::U8, &[2, 3], DType::F32).err();
    assert_eq!(e, Error::AxisOutOfRange { axis: 5, rank: 2 });
}

#[test]
fn axis_out_of_range_negative() {
    let e = Call::dynamic(
        DynamicDequantize::per_channel(-3),
        DType::S8,
        &[2, 3],
        DType::F32,
        &[3],
    )
    .err();
    assert_eq!(e, Error::AxisOutOfRange { axis: -3, rank: 2 });
    // -2 is the first dimension, -1 the last.
    Call::dynamic(
        DynamicDequantize::per_channel(-2),
        DType::S8,
        &[2, 3],
        DType::F32,
        &[2],
    )
    .ok();
    Call::dynamic(
        DynamicDequantize::per_channel(-1),
        DType::S8,
        &[2, 3],
        DType::F32,
        &[3],
    )
    .ok();
    // Rank 0 has no axis at all.
    let e = Call::dynamic(
        DynamicDequantize::per_channel(0),
        DType::S8,
        &[],
        DType::F32,
        &[1],
    )
    .err();
    assert_eq!(e, Error::AxisOutOfRange { axis: 0, rank: 0 });
}

#[test]
fn axes_out_of_range() {
    for bad in [2i64, -1] {
        let e = Call::dynamic(
            AxesDequantize::new(vec![0, bad]),
            DType::S8,
            &[2, 3],
            DType::F32,
            &[2],
        )
        .zps(DType::S8, &[2])
        .err();
        assert_eq!(e, Error::AxesOutOfRange { axis: bad, rank: 2 });
    }
}

#[test]
fn duplicate_axis() {
    let e = Call::dynamic(
        AxesDequantize::new(vec![1, 0, 1]),
        DType::S8,
        &[2, 3],
        DType::F32,
        &[2, 3],
    )
    .zps(DType::S8, &[2, 3])
    .err();
    assert_eq!(e, Error::DuplicateAxis { axis: 1 });
}

#[test]
fn group_shape_rank() {
    let op = DynamicDequantize::per_group(vec![128]);
    let e = Call::dynamic(op, DType::U4, &[2, 128], DType::BF16, &[2, 1]).err();
    assert_eq!(
        e,
        Error::GroupShapeRank {
            expected: 2,
            got: 1
        }
    );
}

#[test]
fn group_shape_entry_below_one() {
    let op = DynamicDequantize::per_group(vec![1, 0]);
    let e = Call::dynamic(op, DType::U4, &[2, 128], DType::BF16, &[2, 1]).err();
    assert_eq!(e, Error::GroupShapeEntry { dim: 1, got: 0 });
    let op = DynamicDequantize::per_group(vec![-4, 32]);
    let e = Call::dynamic(op, DType::U4, &[2, 128], DType::BF16, &[2, 4]).err();
    assert_eq!(e, Error::GroupShapeEntry { dim: 0, got: -4 });
}

#[test]
fn static_scales_count() {
    let e = Call::new(
        Dequantize::new(vec![1.0, 2.0]),
        DType::S8,
        &[2, 3],
        DType::F32,
    )
    .err();
    assert_eq!(
        e,
        Error::ScalesCount {
            op: OpKind::Dequantize,
            qtype: Qtype::PerTensor,
            expected: 1,
            got: 2
        }
    );
    let op = Dequantize::new(vec![1.0, 2.0]).per_channel(1);
    let e = Call::new(op, DType::S8, &[2, 3], DType::F32).err();
    assert_eq!(
        e,
        Error::ScalesCount {
            op: OpKind::Dequantize,
            qtype: Qtype::PerChannel,
            expected: 3,
            got: 2
        }
    );
}

#[test]
fn static_zps_count() {
    let op = Dequantize::new(vec![1.0, 2.0]).per_channel(0).zps(vec![1]);
    let e = Call::new(op, DType::S8, &[2, 3], DType::F32).err();
    assert_eq!(
        e,
        Error::ZpsCount {
            op: OpKind::Dequantize,
            expected: 2,
            got: 1
        }
    );
}

#[test]
fn param_shape_scales() {
    // per_channel: wrong length, same rank: the dimension is named.
    let e = Call::dynamic(
        DynamicDequantize::per_channel(1),
        DType::S8,
        &[2, 3],
        DType::F32,
        &[2],
    )
    .err();
    assert_eq!(
        e,
        Error::ParamShape {
            role: Role::Scales,
            granularity: "per_channel on axis 1".into(),
            expected: vec![3],
            got: vec![2],
            dim: Some(0)
        }
    );
    // per_group with a remainder group: ceil(10 / 4) = 3 scales per row.
    let op = DynamicDequantize::per_group(vec![1, 4]);
    let e = Call::dynamic(op, DType::U4, &[4, 10], DType::F32, &[4, 2]).err();
    assert_eq!(
        e,
        Error::ParamShape {
            role: Role::Scales,
            granularity: "per_group [1, 4]".into(),
            expected: vec![4, 3],
            got: vec![4, 2],
            dim: Some(1)
        }
    );
    // per_tensor: [1] or scalar only; a different rank names no dimension.
    let e = Call::dynamic(per_tensor(), DType::S8, &[4], DType::F32, &[1, 1]).err();
    assert_eq!(
        e,
        Error::ParamShape {
            role: Role::Scales,
            granularity: "per_tensor".into(),
            expected: vec![1],
            got: vec![1, 1],
            dim: None
        }
    );
    Call::dynamic(per_tensor(), DType::S8, &[4], DType::F32, &[]).ok();
    // axes: scales dims follow sorted(axes).
    let e = Call::dynamic(
        AxesDequantize::new(vec![2, 0]),
        DType::S8,
        &[2, 3, 4],
        DType::F32,
        &[4, 2],
    )
    .zps(DType::S8, &[4, 2])
    .err();
    assert_eq!(
        e,
        Error::ParamShape {
            role: Role::Scales,
            granularity: "axes [2, 0]".into(),
            expected: vec![2, 4],
            got: vec![4, 2],
            dim: Some(0)
        }
    );
}

#[test]
fn param_shape_zps() {
    let e = Call::dynamic(
        DynamicDequantize::per_channel(1),
        DType::S8,
        &[2, 3],
        DType::F32,
        &[3],
    )
    .zps(DType::S8, &[2])
    .err();
    assert_eq!(
        e,
        Error::ParamShape {
            role: Role::Zps,
            granularity: "per_channel on axis 1".into(),
            expected: vec![3],
            got: vec![2],
            dim: Some(0)
        }
    );
    // A single zero point broadcasts in the dynamic op ...
    Call::dynamic(
        DynamicDequantize::per_channel(1),
        DType::S8,
        &[2, 3],
        DType::F32,
        &[3],
    )
    .zps(DType::S8, &[1])
    .ok();
    // ... but not in the axes form.
    let e = Call::dynamic(
        AxesDequantize::new(vec![1]),
        DType::S8,
        &[2, 3],
        DType::F32,
        &[3],
    )
    .zps(DType::S8, &[1])
    .err();
    assert_eq!(
        e,
        Error::ParamShape {
            role: Role::Zps,
            granularity: "axes [1]".into(),
            expected: vec![3],
            got: vec![1],
            dim: Some(0)
        }
    );
}

// --- tensors and buffers ---------------------------------------------------------

#[test]
fn dst_shape_differs() {
    let mut c = Call::dynamic(per_tensor(), DType::S8, &[2, 3], DType::F32, &[1]);
    c.dst = TensorDesc::new(DType::F32, &[3, 2]);
    assert_eq!(
        c.err(),
        Error::DstShape {
            expected: vec![2, 3],
            got: vec![3, 2]
        }
    );
}

#[test]
fn strides_rank() {
    let mut c = Call::dynamic(per_tensor(), DType::S8, &[2, 3], DType::F32, &[1]);
    c.src = c.src.with_strides(&[1]);
    c.src_len = Some(6);
    assert_eq!(
        c.err(),
        Error::StridesRank {
            role: Role::Src,
            expected: 2,
            got: 1
        }
    );
    let mut c = Call::dynamic(per_tensor(), DType::S8, &[2, 3], DType::F32, &[1]);
    c.dst = c.dst.with_strides(&[3, 1, 1]);
    c.dst_len = Some(24);
    assert_eq!(
        c.err(),
        Error::StridesRank {
            role: Role::Dst,
            expected: 2,
            got: 3
        }
    );
}

#[test]
fn scales_and_zps_must_be_dense() {
    let mut c = Call::dynamic(
        DynamicDequantize::per_channel(1),
        DType::S8,
        &[2, 3],
        DType::F32,
        &[3],
    );
    c.scales = Some(TensorDesc::new(DType::F32, &[3]).with_strides(&[2]));
    assert_eq!(c.err(), Error::NotDense { role: Role::Scales });
    let mut c = Call::dynamic(
        DynamicDequantize::per_channel(1),
        DType::S8,
        &[2, 3],
        DType::F32,
        &[3],
    );
    c.zps = Some(TensorDesc::new(DType::S8, &[3]).with_strides(&[2]));
    assert_eq!(c.err(), Error::NotDense { role: Role::Zps });
    // Explicit strides equal to the dense ones are dense.
    let mut c = Call::dynamic(
        DynamicDequantize::per_channel(1),
        DType::S8,
        &[2, 3],
        DType::F32,
        &[3],
    );
    c.scales = Some(TensorDesc::new(DType::F32, &[3]).with_strides(&[1]));
    c.ok();
}

#[test]
fn overlapping_dst() {
    let mut c = Call::dynamic(per_tensor(), DType::S8, &[2, 3], DType::F32, &[1]);
    c.dst = c.dst.with_strides(&[1, 1]);
    assert_eq!(
        c.err(),
        Error::OverlappingDst {
            shape: vec![2, 3],
            strides: vec![1, 1]
        }
    );
    // A size-1 dimension may have any stride (it is never stepped).
    let mut c = Call::dynamic(per_tensor(), DType::S8, &[1, 3], DType::F32, &[1]);
    c.dst = c.dst.with_strides(&[0, 1]);
    c.ok();
}

fn too_small(role: Role, dtype: DType, shape: &[usize], expected: usize, got: usize) -> Error {
    Error::BufferTooSmall {
        role,
        dtype,
        shape: shape.to_vec(),
        expected,
        got,
    }
}

#[test]
fn buffer_too_small_src_4bit_odd_count() {
    // 5 nibbles need ceil(5 / 2) = 3 bytes: 2 fail, 3 pass.
    let mut c = Call::dynamic(per_tensor(), DType::U4, &[5], DType::F32, &[1]);
    c.src_len = Some(2);
    assert_eq!(c.err(), too_small(Role::Src, DType::U4, &[5], 3, 2));
    c.src_len = Some(3);
    c.ok();
    // A strided view needs one past its furthest element: shape [2, 2] strides [4, 1]
    // reaches nibble 5, so 3 bytes.
    let mut c = Call::dynamic(per_tensor(), DType::S4, &[2, 2], DType::F32, &[1]);
    c.src = c.src.with_strides(&[4, 1]);
    c.src_len = Some(2);
    assert_eq!(c.err(), too_small(Role::Src, DType::S4, &[2, 2], 3, 2));
}

#[test]
fn buffer_too_small_scales() {
    let mut c = Call::dynamic(
        DynamicDequantize::per_channel(0),
        DType::S8,
        &[3, 2],
        DType::BF16,
        &[3],
    );
    c.scales_len = Some(5);
    assert_eq!(c.err(), too_small(Role::Scales, DType::BF16, &[3], 6, 5));
}

#[test]
fn buffer_too_small_zps_4bit() {
    let mut c = Call::dynamic(
        DynamicDequantize::per_channel(0),
        DType::S4,
        &[3, 2],
        DType::F32,
        &[3],
    )
    .zps(DType::S4, &[3]);
    c.zps_len = Some(1);
    assert_eq!(c.err(), too_small(Role::Zps, DType::S4, &[3], 2, 1));
}

#[test]
fn buffer_too_small_dst() {
    let mut c = Call::dynamic(per_tensor(), DType::S8, &[2, 3], DType::F16, &[1]);
    c.dst_len = Some(11);
    assert_eq!(c.err(), too_small(Role::Dst, DType::F16, &[2, 3], 12, 11));
}

#[test]
fn plan_mismatch_at_bind() {
    let src_desc = TensorDesc::new(DType::U8, &[4]);
    let scales = Tensor::from_slice(&[1.0f32], &[1]);
    let dst_desc = TensorDesc::new(DType::F32, &[4]);
    let plan = Plan::new(
        &per_tensor().into(),
        &src_desc,
        Some(&scales.desc),
        None,
        &dst_desc,
    )
    .unwrap();
    let other = Tensor::from_slice(&[1i8, 2, 3, 4], &[4]);
    let mut out = [SENTINEL; 16];
    let mut dst = TensorMut::from_bytes(DType::F32, &[4], &mut out);
    let e = plan
        .bind(&other, Some(&scales), None, &mut dst)
        .unwrap_err();
    assert_eq!(
        e,
        Error::PlanMismatch {
            role: Role::Src,
            expected: "u8[4]".into(),
            got: "s8[4]".into()
        }
    );
    assert!(out.iter().all(|&b| b == SENTINEL));
}

#[test]
fn zps_presence_must_match_the_plan_at_bind() {
    let src = Tensor::from_slice(&[1u8, 2], &[2]);
    let scales = Tensor::from_slice(&[1.0f32], &[1]);
    let zps = Tensor::from_slice(&[1u8], &[1]);
    let dst_desc = TensorDesc::new(DType::F32, &[2]);
    let op: Op = per_tensor().into();
    let with = Plan::new(
        &op,
        &src.desc,
        Some(&scales.desc),
        Some(&zps.desc),
        &dst_desc,
    )
    .unwrap();
    let without = Plan::new(&op, &src.desc, Some(&scales.desc), None, &dst_desc).unwrap();
    let mut out = [SENTINEL; 8];
    let mut dst = TensorMut::from_bytes(DType::F32, &[2], &mut out);
    assert_eq!(
        with.bind(&src, Some(&scales), None, &mut dst).unwrap_err(),
        Error::MissingAttr {
            op: OpKind::Dynamic,
            attr: "zps",
            qtype: None
        }
    );
    let mut dst = TensorMut::from_bytes(DType::F32, &[2], &mut out);
    assert_eq!(
        without
            .bind(&src, Some(&scales), Some(&zps), &mut dst)
            .unwrap_err(),
        Error::AttrNotAllowed {
            op: OpKind::Dynamic,
            attr: "zps (the plan has none)",
            qtype: None
        }
    );
    assert!(out.iter().all(|&b| b == SENTINEL));
}

#[test]
fn overflow_of_shape_product() {
    let shape = [usize::MAX / 2, 3];
    let mut c = Call::dynamic(per_tensor(), DType::S8, &shape, DType::F32, &[1]);
    c.src_len = Some(16);
    c.dst_len = Some(16);
    assert_eq!(
        c.err(),
        Error::Overflow {
            role: Role::Src,
            shape: shape.to_vec()
        }
    );
}

#[test]
fn overflow_of_strided_reach() {
    // The element count is small, but the furthest element is past usize::MAX bytes.
    let mut c = Call::dynamic(per_tensor(), DType::S8, &[2, 2], DType::F32, &[1]);
    c.dst = c.dst.with_strides(&[usize::MAX / 4, 1]);
    c.dst_len = Some(16);
    assert_eq!(
        c.err(),
        Error::Overflow {
            role: Role::Dst,
            shape: vec![2, 2]
        }
    );
    let mut c = Call::dynamic(per_tensor(), DType::S8, &[2, 2], DType::F32, &[1]);
    c.src = c.src.with_strides(&[usize::MAX, 1]);
    c.src_len = Some(4);
    assert_eq!(
        c.err(),
        Error::Overflow {
            role: Role::Src,
            shape: vec![2, 2]
        }
    );
}

// --- execution -------------------------------------------------------------------

#[test]
fn bad_range() {
    let src = Tensor::from_slice(&[1u8, 2, 3, 4], &[4]);
    let scales = Tensor::from_slice(&[1.0f32], &[1]);
    let dst_desc = TensorDesc::new(DType::F32, &[4]);
    let plan = Plan::new(
        &per_tensor().into(),
        &src.desc,
        Some(&scales.desc),
        None,
        &dst_desc,
    )
    .unwrap();
    let mut out = [SENTINEL; 16];
    let mut dst = TensorMut::from_bytes(DType::F32, &[4], &mut out);
    let mut job = plan.bind(&src, Some(&scales), None, &mut dst).unwrap();
    let r = Reference::default();
    assert_eq!(
        job.run_range(&r, 0..5),
        Err(Error::BadRange {
            start: 0,
            end: 5,
            elements: 4
        })
    );
    #[allow(clippy::reversed_empty_ranges)]
    let backwards = 3..2;
    assert_eq!(
        job.run_range(&r, backwards),
        Err(Error::BadRange {
            start: 3,
            end: 2,
            elements: 4
        })
    );
    assert_eq!(job.run_range(&r, 4..4), Ok(()));
    assert!(out.iter().all(|&b| b == SENTINEL));
}

#[test]
fn zero_threads() {
    let mut c = Call::dynamic(per_tensor(), DType::S8, &[4], DType::F32, &[1]);
    c.opts = c.opts.with_threads(0);
    assert_eq!(c.err(), Error::ZeroThreads);
}

#[test]
fn backend_unavailable_never_falls_back() {
    let src = TensorDesc::new(DType::S8, &[4]);
    let scales = TensorDesc::new(DType::F32, &[1]);
    let plan = Plan::new(
        &per_tensor().into(),
        &src,
        Some(&scales),
        None,
        &src.clone_as(DType::F32),
    )
    .unwrap();
    let none = Backends::default();
    for (choice, name) in [(Backend::Generated, "generated"), (Backend::Jit, "jit")] {
        assert_eq!(
            none.select(choice, &plan).err(),
            Some(Error::BackendUnavailable {
                backend: name,
                reason: "not built into this version of dq".into()
            })
        );
    }
    assert_eq!(
        none.select(Backend::Auto, &plan).unwrap().backend(),
        Backend::Reference
    );
    // Through the public call: dst untouched when the chosen backend is absent.
    let b = dq::backends();
    for choice in [Backend::Generated, Backend::Jit] {
        if b.get(choice).is_some() {
            continue;
        }
        let mut c = Call::dynamic(per_tensor(), DType::S8, &[4], DType::F32, &[1]);
        c.opts = c.opts.with_backend(choice);
        assert!(
            matches!(c.err(), Error::BackendUnavailable { backend, .. } if backend == choice.name())
        );
    }
}

/// Shorthand used above: the same shape with another dtype.
trait CloneAs {
    fn clone_as(&self, dtype: DType) -> TensorDesc;
}

impl CloneAs for TensorDesc {
    fn clone_as(&self, dtype: DType) -> TensorDesc {
        TensorDesc::new(dtype, &self.shape)
    }
}
