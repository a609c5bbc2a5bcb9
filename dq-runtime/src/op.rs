//! Op descriptors for the three operations of SPEC §4.

use core::fmt;

/// Which operation a descriptor is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// oneDNN Graph static `Dequantize` (scales and zps are attributes).
    Dequantize,
    /// oneDNN Graph `DynamicDequantize` (scales and zps are tensors).
    Dynamic,
    /// nGraph `Dequantize` with an `axes` set.
    Axes,
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OpKind::Dequantize => "Dequantize",
            OpKind::Dynamic => "DynamicDequantize",
            OpKind::Axes => "Dequantize(axes)",
        })
    }
}

/// Quantization granularity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Qtype {
    /// One scale for the whole tensor.
    #[default]
    PerTensor,
    /// One scale per index along `axis`.
    PerChannel,
    /// One scale per block of `group_shape` elements.
    PerGroup,
}

impl Qtype {
    /// The attribute spelling (`per_tensor`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            Qtype::PerTensor => "per_tensor",
            Qtype::PerChannel => "per_channel",
            Qtype::PerGroup => "per_group",
        }
    }
}

impl fmt::Display for Qtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Static `Dequantize` (SPEC §4.1): s8/u8 to f32, scales and zero points as attributes.
///
/// ```
/// use dq_runtime::{Dequantize, Qtype};
/// let op = Dequantize::new(vec![0.1, 0.2]).per_channel(1).zps(vec![0, 3]);
/// assert_eq!(op.qtype, Qtype::PerChannel);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Dequantize {
    /// Granularity: per_tensor (default) or per_channel.
    pub qtype: Qtype,
    /// Channel axis for per_channel, may be negative; default 1.
    pub axis: i64,
    /// The scales (required).
    pub scales: Vec<f32>,
    /// Zero points; `None` means all zero.
    pub zps: Option<Vec<i64>>,
    /// Not an attribute of this op: setting it is an error, kept so it can be reported.
    pub group_shape: Option<Vec<i64>>,
}

impl Dequantize {
    /// Per-tensor op with the given scales and no zero points.
    pub fn new(scales: Vec<f32>) -> Self {
        Dequantize {
            qtype: Qtype::PerTensor,
            axis: 1,
            scales,
            zps: None,
            group_shape: None,
        }
    }

    /// Sets the granularity.
    pub fn qtype(mut self, qtype: Qtype) -> Self {
        self.qtype = qtype;
        self
    }

    /// Per-channel along `axis`.
    pub fn per_channel(mut self, axis: i64) -> Self {
        self.qtype = Qtype::PerChannel;
        self.axis = axis;
        self
    }

    /// Sets the zero points.
    pub fn zps(mut self, zps: Vec<i64>) -> Self {
        self.zps = Some(zps);
        self
    }

    /// Sets `group_shape`, which this op rejects (for callers forwarding raw attributes).
    pub fn group_shape(mut self, g: Vec<i64>) -> Self {
        self.group_shape = Some(g);
        self
    }
}

/// `DynamicDequantize` (SPEC §4.2): scales and optional zero points are input tensors.
///
/// ```
/// use dq_runtime::{DynamicDequantize, Qtype};
/// let op = DynamicDequantize::per_group(vec![1, 128]);
/// assert_eq!(op.qtype, Qtype::PerGroup);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DynamicDequantize {
    /// Granularity (default per_tensor).
    pub qtype: Qtype,
    /// Channel axis for per_channel, may be negative; default 1.
    pub axis: i64,
    /// Group shape, required for per_group and an error otherwise.
    pub group_shape: Option<Vec<i64>>,
}

impl DynamicDequantize {
    /// Per-tensor.
    pub fn per_tensor() -> Self {
        DynamicDequantize {
            qtype: Qtype::PerTensor,
            axis: 1,
            group_shape: None,
        }
    }

    /// Per-channel along `axis`.
    pub fn per_channel(axis: i64) -> Self {
        DynamicDequantize {
            qtype: Qtype::PerChannel,
            axis,
            group_shape: None,
        }
    }

    /// Per-group with one group size per src dimension.
    pub fn per_group(group_shape: Vec<i64>) -> Self {
        DynamicDequantize {
            qtype: Qtype::PerGroup,
            axis: 1,
            group_shape: Some(group_shape),
        }
    }

    /// Sets the granularity.
    pub fn qtype(mut self, qtype: Qtype) -> Self {
        self.qtype = qtype;
        self
    }

    /// Sets `axis`.
    pub fn axis(mut self, axis: i64) -> Self {
        self.axis = axis;
        self
    }

    /// Sets `group_shape`.
    pub fn group_shape(mut self, g: Vec<i64>) -> Self {
        self.group_shape = Some(g);
        self
    }
}

/// nGraph `Dequantize` with an `axes` set (SPEC §4.3).
///
/// ```
/// use dq_runtime::AxesDequantize;
/// let op = AxesDequantize::new(vec![0, 2]);
/// assert_eq!(op.axes, [0, 2]);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AxesDequantize {
    /// Distinct axes in `0..rank`, in any order; empty means per-tensor.
    pub axes: Vec<i64>,
}

impl AxesDequantize {
    /// The op with the given axes.
    pub fn new(axes: Vec<i64>) -> Self {
        AxesDequantize { axes }
    }
}

/// Any of the three operations.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// Static Dequantize.
    Dequantize(Dequantize),
    /// DynamicDequantize.
    Dynamic(DynamicDequantize),
    /// nGraph Dequantize with axes.
    Axes(AxesDequantize),
}

impl Op {
    /// Which operation this is.
    pub fn kind(&self) -> OpKind {
        match self {
            Op::Dequantize(_) => OpKind::Dequantize,
            Op::Dynamic(_) => OpKind::Dynamic,
            Op::Axes(_) => OpKind::Axes,
        }
    }
}

impl From<Dequantize> for Op {
    fn from(o: Dequantize) -> Self {
        Op::Dequantize(o)
    }
}

impl From<DynamicDequantize> for Op {
    fn from(o: DynamicDequantize) -> Self {
        Op::Dynamic(o)
    }
}

impl From<AxesDequantize> for Op {
    fn from(o: AxesDequantize) -> Self {
        Op::Axes(o)
    }
}
