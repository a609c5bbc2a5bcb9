//! The error of a dequantization call's validation and execution: every rule of
//! SPEC §4 and §6 has its own variant. Block plans ([`crate::block`]) and linear
//! plans ([`crate::linear`]) report their own errors, `BlockError` and
//! `LinearError`.

use core::str::FromStr;

use crate::dtype::DType;
use crate::op::{OpKind, Qtype};

/// Which tensor of a call an error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// The quantized input.
    Src,
    /// The scales.
    Scales,
    /// The zero points.
    Zps,
    /// The output.
    Dst,
}

impl core::fmt::Display for Role {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Role::Src => "src",
            Role::Scales => "scales",
            Role::Zps => "zps",
            Role::Dst => "dst",
        })
    }
}

/// Everything that can be wrong with a call. Nothing is written when one is returned.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    // --- dtypes -------------------------------------------------------------
    /// A dtype name that SPEC §1 does not define.
    #[error(
        "unknown dtype `{got}` (expected one of s4, u4, s8, u8, s32, f16, bf16, f32, f64, f8_e4m3, f8_e5m2, f4_e2m1, e8m0)"
    )]
    UnknownDType {
        /// The name given.
        got: String,
    },
    /// The src dtype is not accepted by the op.
    #[error("{op}: src dtype {got} is not supported (expected one of {expected})")]
    SrcDType {
        /// The operation.
        op: OpKind,
        /// Allowed dtypes.
        expected: &'static str,
        /// The dtype given.
        got: DType,
    },
    /// The dst dtype is not accepted by the op.
    #[error("{op}: dst dtype {got} is not supported (expected one of {expected})")]
    DstDType {
        /// The operation.
        op: OpKind,
        /// Allowed dtypes.
        expected: &'static str,
        /// The dtype given.
        got: DType,
    },
    /// Scales must have the dst dtype.
    #[error("scales dtype {got} differs from dst dtype {expected}")]
    ScalesDType {
        /// The dst dtype.
        expected: DType,
        /// The scales dtype given.
        got: DType,
    },
    /// DynamicDequantize scales of neither the dst dtype nor e8m0.
    #[error("scales dtype {got} is neither the dst dtype {dst} nor e8m0")]
    ScalesNotDstOrE8m0 {
        /// The dst dtype.
        dst: DType,
        /// The scales dtype given.
        got: DType,
    },
    /// e8m0 scales on an op that takes them in the dst dtype only (SPEC §10).
    #[error("{op}: e8m0 scales are only allowed for DynamicDequantize")]
    E8m0Scales {
        /// The operation.
        op: OpKind,
    },
    /// Zero points with a float src (SPEC §10: float src takes none).
    #[error("{op}: src dtype {src} is a float type and takes no zero points")]
    FloatSrcZps {
        /// The operation.
        op: OpKind,
        /// The src dtype.
        src: DType,
    },
    /// The zero-point dtype is not accepted by the op.
    #[error("{op}: zps dtype {got} is not allowed (expected {expected})")]
    ZpsDType {
        /// The operation.
        op: OpKind,
        /// Allowed dtypes.
        expected: String,
        /// The dtype given.
        got: DType,
    },

    // --- attributes and inputs ----------------------------------------------
    /// A `qtype` string other than per_tensor, per_channel, per_group.
    #[error("unknown qtype `{got}` (expected per_tensor, per_channel or per_group)")]
    UnknownQtype {
        /// The string given.
        got: String,
    },
    /// The qtype is not offered by the op (per_group on static Dequantize).
    #[error("{op}: qtype {qtype} is not allowed")]
    QtypeNotAllowed {
        /// The operation.
        op: OpKind,
        /// The qtype given.
        qtype: Qtype,
    },
    /// An attribute or input the op does not take in this configuration.
    #[error("{op}: `{attr}` is not allowed here{}", qtype.map(|q| format!(" (qtype {q})")).unwrap_or_default())]
    AttrNotAllowed {
        /// The operation.
        op: OpKind,
        /// The attribute or input name.
        attr: &'static str,
        /// The qtype in force, where it matters.
        qtype: Option<Qtype>,
    },
    /// A required attribute or input is missing.
    #[error("{op}: `{attr}` is required{}", qtype.map(|q| format!(" for qtype {q}")).unwrap_or_default())]
    MissingAttr {
        /// The operation.
        op: OpKind,
        /// The attribute or input name.
        attr: &'static str,
        /// The qtype in force, where it matters.
        qtype: Option<Qtype>,
    },
    /// `axis` outside `[-rank, rank - 1]`.
    #[error("axis {axis} is out of range for rank {rank} (expected {} to {})", -(*rank as i64), *rank as i64 - 1)]
    AxisOutOfRange {
        /// The axis given.
        axis: i64,
        /// The src rank.
        rank: usize,
    },
    /// An entry of `axes` outside `[0, rank - 1]`.
    #[error("axes entry {axis} is out of range for rank {rank} (expected 0 to {})", *rank as i64 - 1)]
    AxesOutOfRange {
        /// The entry given.
        axis: i64,
        /// The src rank.
        rank: usize,
    },
    /// An axis listed twice in `axes`.
    #[error("axes entry {axis} is listed twice")]
    DuplicateAxis {
        /// The repeated axis.
        axis: i64,
    },
    /// `group_shape` does not have the rank of src.
    #[error("group_shape has {got} entries, expected {expected} (the rank of src)")]
    GroupShapeRank {
        /// The src rank.
        expected: usize,
        /// The number of entries given.
        got: usize,
    },
    /// A `group_shape` entry below 1.
    #[error("group_shape entry {got} for dimension {dim} is below 1")]
    GroupShapeEntry {
        /// The dimension.
        dim: usize,
        /// The entry given.
        got: i64,
    },
    /// The static op's scale list has the wrong length.
    #[error("{op} ({qtype}): expected {expected} scales, got {got}")]
    ScalesCount {
        /// The operation.
        op: OpKind,
        /// The qtype in force.
        qtype: Qtype,
        /// The count the granularity needs.
        expected: usize,
        /// The count given.
        got: usize,
    },
    /// The static op's zero-point list is not as long as its scale list.
    #[error("{op}: expected {expected} zero points (one per scale), got {got}")]
    ZpsCount {
        /// The operation.
        op: OpKind,
        /// The number of scales.
        expected: usize,
        /// The count given.
        got: usize,
    },
    /// A scales or zps tensor has the wrong shape for the granularity.
    #[error("{role} shape {got:?} is wrong for {granularity}: expected {expected:?}{}", dim.map(|d| format!(" (dimension {d} differs)")).unwrap_or_default())]
    ParamShape {
        /// Scales or zps.
        role: Role,
        /// What the shape must follow ("per_channel on axis 1", ...).
        granularity: String,
        /// The shape required.
        expected: Vec<usize>,
        /// The shape given.
        got: Vec<usize>,
        /// The first dimension that differs, where the ranks agree.
        dim: Option<usize>,
    },

    // --- tensors and buffers ------------------------------------------------
    /// The dst shape differs from the src shape.
    #[error("dst shape {got:?} differs from src shape {expected:?}")]
    DstShape {
        /// The src shape.
        expected: Vec<usize>,
        /// The dst shape given.
        got: Vec<usize>,
    },
    /// A strides list whose length is not the tensor's rank.
    #[error("{role}: {got} strides given for rank {expected}")]
    StridesRank {
        /// The tensor.
        role: Role,
        /// The rank.
        expected: usize,
        /// The number of strides given.
        got: usize,
    },
    /// Strides on a tensor that must be dense (scales, zps).
    #[error("{role} must be dense row-major; strides are only allowed for src and dst")]
    NotDense {
        /// The tensor.
        role: Role,
    },
    /// A dst view in which two elements share memory.
    #[error(
        "dst view overlaps itself: strides {strides:?} for shape {shape:?} map two elements to one place"
    )]
    OverlappingDst {
        /// The dst shape.
        shape: Vec<usize>,
        /// The dst strides.
        strides: Vec<usize>,
    },
    /// The buffer is smaller than the shape, dtype and strides need.
    #[error("{role} buffer too small: {dtype} {shape:?} needs {expected} bytes, got {got}")]
    BufferTooSmall {
        /// The tensor.
        role: Role,
        /// Its dtype.
        dtype: DType,
        /// Its shape.
        shape: Vec<usize>,
        /// Bytes needed.
        expected: usize,
        /// Bytes given.
        got: usize,
    },
    /// A typed constructor was given a slice of the wrong element type.
    #[error("{role}: a slice of {got} elements cannot hold dtype {expected}")]
    ElementType {
        /// The tensor.
        role: Role,
        /// The dtype asked for.
        expected: DType,
        /// The slice's element type.
        got: &'static str,
    },
    /// A tensor dtype that does not match the plan it is run with.
    #[error("{role}: tensor does not match the plan (expected {expected}, got {got})")]
    PlanMismatch {
        /// The tensor.
        role: Role,
        /// The description the plan was made for.
        expected: String,
        /// The description given.
        got: String,
    },
    /// Shape or size arithmetic overflows `usize`.
    #[error("{role}: size of shape {shape:?} overflows usize")]
    Overflow {
        /// The tensor.
        role: Role,
        /// Its shape.
        shape: Vec<usize>,
    },

    // --- execution ----------------------------------------------------------
    /// A sub-range outside `0..=elements`.
    #[error("range {start}..{end} is outside the {elements} elements of the plan")]
    BadRange {
        /// Range start.
        start: usize,
        /// Range end.
        end: usize,
        /// Elements in the plan.
        elements: usize,
    },
    /// A split point outside the job part being split.
    #[error("cannot split the part {start}..{end} at element {at}")]
    SplitOutside {
        /// The split point.
        at: usize,
        /// The part's first element.
        start: usize,
        /// The part's end.
        end: usize,
    },
    /// The chosen backend cannot run this call.
    #[error("backend `{backend}` is unavailable: {reason}")]
    BackendUnavailable {
        /// The backend asked for.
        backend: &'static str,
        /// Why.
        reason: String,
    },
    /// A thread count of 0.
    #[error("thread count must be at least 1")]
    ZeroThreads,
}

/// Result with [`Error`].
pub type Result<T, E = Error> = core::result::Result<T, E>;

// Parsing the spec's names: here, beside the errors they fail with, so that
// `dtype` and `op` stay below this module.

impl FromStr for DType {
    type Err = Error;

    /// Parses a spec name such as `u4` or `bf16`.
    fn from_str(s: &str) -> Result<Self, Error> {
        DType::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| Error::UnknownDType { got: s.to_string() })
    }
}

impl FromStr for Qtype {
    type Err = Error;

    /// Parses `per_tensor`, `per_channel` or `per_group`; anything else is
    /// [`Error::UnknownQtype`] (oneDNN silently treats it as per_tensor; the spec does not).
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "per_tensor" => Ok(Qtype::PerTensor),
            "per_channel" => Ok(Qtype::PerChannel),
            "per_group" => Ok(Qtype::PerGroup),
            _ => Err(Error::UnknownQtype { got: s.to_string() }),
        }
    }
}
