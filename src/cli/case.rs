//! Turning the case flags into an op and tensor descriptors.

use dq::rules::Zps;
use dq::{AxesDequantize, DType, Dequantize, DynamicDequantize, Op, Qtype, TensorDesc};
use dq_runtime::plan::normalize_axis;

use super::args::{CaseArgs, OpName};
use super::error::CliError;

/// One dequantization case as the flags spell it: the op and descriptors, before
/// any data is attached.
#[derive(Clone, Debug)]
pub struct CaseFlags {
    /// The op as spelled on the command line.
    pub op_name: OpName,
    /// The op descriptor (for the static op: with its scales and zps lists).
    pub op: Op,
    /// Src descriptor (with --src-strides).
    pub src: TensorDesc,
    /// Dst descriptor (with --dst-strides).
    pub dst: TensorDesc,
    /// --zps-type, if given.
    pub zps_type: Option<DType>,
    /// --scales-type, else the dst dtype.
    pub scales_type: DType,
}

/// The static op's attribute lists.
pub type StaticLists = (Vec<f32>, Option<Vec<i64>>);

impl CaseFlags {
    /// Builds the case. `lists` are the static op's scales and zero points.
    ///
    /// # Errors
    /// A missing required flag, or a flag the op does not take.
    pub fn new(a: &CaseArgs, lists: Option<StaticLists>) -> Result<CaseFlags, CliError> {
        let op_name = a.op.ok_or(CliError::Usage("--op is required".into()))?;
        let missing = |flag| CliError::MissingFlag {
            flag,
            op: op_name.name(),
        };
        let src_t = a.src_type.ok_or_else(|| missing("src-type"))?;
        let dst_t = a.dst_type.ok_or_else(|| missing("dst-type"))?;
        let shape = a.shape.clone().ok_or_else(|| missing("shape"))?.0;
        let op = build_op(a, op_name, lists)?;
        let mut src = TensorDesc::new(src_t, &shape);
        src.strides = a.src_strides.clone().map(|s| s.0);
        let mut dst = TensorDesc::new(dst_t, &shape);
        dst.strides = a.dst_strides.clone().map(|s| s.0);
        Ok(CaseFlags {
            op_name,
            op,
            src,
            dst,
            zps_type: a.zps_type,
            scales_type: a.scales_type.unwrap_or(dst_t),
        })
    }

    /// The dtype of a `.bin` zero-point file: `--zps-type`, else the one the op
    /// fixes (the axes form: the src dtype).
    pub fn bin_zps_type(&self) -> Option<DType> {
        self.zps_type.or(match self.op_name.rule().zps {
            Zps::SrcDType => Some(self.src.dtype),
            Zps::OneOf(_) | Zps::Held(_) => None,
        })
    }

    /// The scales shape this case most likely needs, computed leniently: when a flag
    /// is invalid the result is only a guess, and validation reports the real error.
    pub fn param_shape(&self) -> Vec<usize> {
        let shape = &self.src.shape;
        match &self.op {
            Op::Dequantize(o) => match o.qtype {
                Qtype::PerChannel => per_channel_shape(shape, o.axis),
                _ => vec![1],
            },
            Op::Dynamic(o) => match o.qtype {
                Qtype::PerTensor => vec![1],
                Qtype::PerChannel => per_channel_shape(shape, o.axis),
                Qtype::PerGroup => {
                    let g = o.group_shape.as_deref().unwrap_or(&[]);
                    shape
                        .iter()
                        .enumerate()
                        .map(|(d, &n)| n.div_ceil(g.get(d).map_or(1, |&g| g.max(1) as usize)))
                        .collect()
                }
            },
            Op::Axes(o) => {
                let mut axes: Vec<usize> = o
                    .axes
                    .iter()
                    .filter_map(|&a| usize::try_from(a).ok())
                    .filter(|&a| a < shape.len())
                    .collect();
                axes.sort_unstable();
                axes.dedup();
                axes.into_iter().map(|a| shape[a]).collect()
            }
        }
    }
}

fn per_channel_shape(shape: &[usize], axis: i64) -> Vec<usize> {
    normalize_axis(axis, shape.len()).map_or(vec![1], |a| vec![shape[a]])
}

fn build_op(a: &CaseArgs, op_name: OpName, lists: Option<StaticLists>) -> Result<Op, CliError> {
    let not_for = |flag| CliError::FlagNotForOp {
        flag,
        op: op_name.name(),
    };
    if op_name != OpName::Axes && a.axes.is_some() {
        return Err(not_for("axes"));
    }
    Ok(match op_name {
        OpName::Dequantize => {
            if a.zps_type.is_some() {
                return Err(not_for("zps-type"));
            }
            let (scales, zps) = lists.ok_or(CliError::MissingFlag {
                flag: "scales",
                op: op_name.name(),
            })?;
            let mut o = Dequantize::new(scales).qtype(a.qtype.unwrap_or_default());
            o.axis = a.axis.unwrap_or(1);
            o.zps = zps;
            o.group_shape = a.group_shape.clone().map(|g| g.0);
            o.into()
        }
        OpName::Dynamic => {
            let mut o = DynamicDequantize::per_tensor()
                .qtype(a.qtype.unwrap_or_default())
                .axis(a.axis.unwrap_or(1));
            o.group_shape = a.group_shape.clone().map(|g| g.0);
            o.into()
        }
        OpName::Axes => {
            for (flag, given) in [
                ("qtype", a.qtype.is_some()),
                ("axis", a.axis.is_some()),
                ("group-shape", a.group_shape.is_some()),
            ] {
                if given {
                    return Err(not_for(flag));
                }
            }
            AxesDequantize::new(a.axes.clone().map_or(Vec::new(), |x| x.0)).into()
        }
    })
}
