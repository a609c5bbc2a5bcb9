//! The scalar reference backend: SPEC §5, one element at a time, straight from
//! the group map (it does not use the collapsed loop nest, so it checks it).

use core::ops::Range;

use crate::convert::{store_f32, store_f64};
use crate::dtype::{DType, load_code_f32, load_f32, load_float, load_int};
use crate::error::{Error, Result};
use crate::formula::{FormulaIr, STANDARD};
use crate::job::{Backend, Job, Kernel};
use crate::plan::Plan;

/// The reference backend for a formula (the spec's by default).
#[derive(Clone, Copy, Debug)]
pub struct Reference {
    /// The formula it interprets.
    pub formula: &'static FormulaIr,
}

impl Default for Reference {
    fn default() -> Self {
        Reference { formula: &STANDARD }
    }
}

impl Kernel for Reference {
    fn backend(&self) -> Backend {
        Backend::Reference
    }

    fn supports(&self, plan: &Plan) -> Result<()> {
        if let Err(problem) = self.formula.validate() {
            return Err(Error::BackendUnavailable {
                backend: "reference",
                reason: format!("formula `{}`: {problem}", self.formula.name),
            });
        }
        let src = plan.src().dtype;
        match self.formula.for_src(src) {
            Some(_) => Ok(()),
            None => Err(Error::BackendUnavailable {
                backend: "reference",
                reason: format!(
                    "formula `{}` does not read a src of dtype {src}",
                    self.formula.name
                ),
            }),
        }
    }

    /// Never: the reference is the fallback, not a choice for speed.
    fn pays(&self, _plan: &Plan) -> bool {
        false
    }

    unsafe fn run(&self, job: &Job<'_>, range: Range<usize>) {
        let plan = job.plan();
        let shape = &plan.src().shape;
        let (src_t, dst_t) = (plan.src().dtype, plan.dst().dtype);
        let zps_t = plan.zps().map(|z| z.dtype);
        let scales_t = plan.scales().dtype;
        // `supports` checked it: the formula itself, or its float-src form.
        let formula = self.formula.for_src(src_t).unwrap_or(self.formula);
        let scale_strides = crate::TensorDesc::dense_strides(plan.scale_shape());
        let mut idx = vec![0usize; shape.len()];
        for l in range {
            unravel(l, shape, &mut idx);
            let (mut so, mut dof, mut si) = (0, 0, 0);
            for d in 0..shape.len() {
                so += idx[d] * plan.src_strides()[d];
                dof += idx[d] * plan.dst_strides()[d];
                si += idx[d] / plan.groups()[d] * scale_strides[d];
            }
            let zi = if plan.zps_broadcast() { 0 } else { si };
            let z = zps_t.map_or(0, |t| load_int(t, job.zps(), zi));
            // SAFETY: `dof` is the dst offset of an element in this call's range,
            // which no concurrent call shares (Kernel::run contract).
            if dst_t == DType::F64 {
                let q = load_int(src_t, job.src(), so);
                let y = formula.eval(q, z, load_float(DType::F64, job.scales(), si));
                let out = unsafe { job.dst_bytes(dof * 8..dof * 8 + 8) };
                store_f64(out, 0, y);
            } else {
                let s = load_f32(scales_t, job.scales(), si);
                let y = if src_t.is_float_src() {
                    // SPEC §10: the exact value of the src element, times s; a NaN
                    // src gives its own NaN (see `minifloat`).
                    let x = load_code_f32(src_t, job.src(), so);
                    if x.is_nan() {
                        x
                    } else {
                        formula.eval_float(x, s)
                    }
                } else {
                    formula.eval(load_int(src_t, job.src(), so), z, s)
                };
                let w = dst_t.bits() / 8;
                // SAFETY: as above.
                let out = unsafe { job.dst_bytes(dof * w..dof * w + w) };
                store_f32(dst_t, out, 0, y);
            }
        }
    }
}

/// Row-major multi-index of logical element `l`.
fn unravel(mut l: usize, shape: &[usize], idx: &mut [usize]) {
    for d in (0..shape.len()).rev() {
        idx[d] = l % shape[d];
        l /= shape[d];
    }
}
