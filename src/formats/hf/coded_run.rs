//! Dequantizing a coded linear (bitsandbytes, MLX, MXFP4) on a backend: the
//! reference decoder, the generated driver or the JIT ([`dq_jit::coded`]) over
//! its declarations ([`QuantLinear::coded_plans`]), `auto` racing the last two.

use std::ops::Range;

use dq_runtime::Backend;
use dq_runtime::linear::coded::Coded;

use super::error::{HfError, Result};
use super::linear::QuantLinear;
use crate::Options;
use crate::formats::element::{self, Element};
use crate::formats::race::{self, Pick};

/// Rows of one declaration into part of the output.
type RunPlan<T> = dyn Fn(&Coded<'_>, Range<usize>, &mut [T]) + Sync;

impl QuantLinear<'_> {
    /// [`dequantize`](Self::dequantize) of a coded linear.
    pub(crate) fn dequantize_coded<T: Element>(&self, out: &mut [T], opts: &Options) -> Result<()> {
        if opts.backend() == Backend::Reference {
            let decode =
                |rows: Range<usize>, buf: &mut [f32]| super::reference::rows(self, rows, buf);
            opts.scope(|| element::split(out, self.k(), opts.threads(), &decode));
            return Ok(());
        }
        let plans = self.coded_plans()?;
        let key = || format!("{} {}", self.scheme(), std::any::type_name::<T>());
        let (pick, timed) = match opts.backend() {
            Backend::Jit => (Pick::Jit, false),
            Backend::Auto if out.len() >= race::MIN_ELEMENTS => race::next(&key()),
            _ => (Pick::Generated, false),
        };
        let t = std::time::Instant::now();
        let generated = |plan: &Coded<'_>, rows: Range<usize>, part: &mut [T]| {
            plan.run(rows, part)
                .expect("rows split inside each plan, K elements each");
        };
        let pick = match pick {
            Pick::Jit => match self.coded_jit(&plans, out, opts) {
                Ok(()) => Pick::Jit,
                // `auto` falls back to the generated driver where the JIT cannot compile.
                Err(_) if opts.backend() == Backend::Auto => {
                    self.run_coded(&plans, out, opts, &generated);
                    Pick::Generated
                }
                Err(e) => return Err(e),
            },
            Pick::Generated => {
                self.run_coded(&plans, out, opts, &generated);
                Pick::Generated
            }
        };
        if timed {
            let ns = t.elapsed().as_nanos() as f64 / out.len() as f64;
            race::report(&key(), pick, ns);
        }
        Ok(())
    }

    /// `run` over `plans` (one per MXFP4 expert, else one), rows split over
    /// `opts`' threads.
    fn run_coded<T: Element>(
        &self,
        plans: &[Coded<'_>],
        out: &mut [T],
        opts: &Options,
        run: &RunPlan<T>,
    ) {
        let (per, k) = (self.rows_per_plan(), self.k());
        let decode = |rows: Range<usize>, part: &mut [T]| {
            let mut r = rows.start;
            while r < rows.end {
                let (e, end) = (r / per, ((r / per + 1) * per).min(rows.end));
                let at = (r - rows.start) * k..(end - rows.start) * k;
                run(&plans[e], r - e * per..end - e * per, &mut part[at]);
                r = end;
            }
        };
        opts.scope(|| element::split_direct(out, k, opts.threads(), &decode));
    }

    /// The plans on the JIT (compiled before the threads start: they then find
    /// them cached).
    #[cfg(feature = "jit")]
    fn coded_jit<T: Element>(
        &self,
        plans: &[Coded<'_>],
        out: &mut [T],
        opts: &Options,
    ) -> Result<()> {
        let jit = dq_jit::coded();
        for plan in plans {
            jit.kernel(plan, <T as dq_runtime::linear::Out>::OUT)
                .map_err(|source| HfError::Jit {
                    linear: self.name().to_owned(),
                    source: source.into(),
                })?;
        }
        let run = |plan: &Coded<'_>, rows: Range<usize>, part: &mut [T]| {
            jit.run(plan, rows, part)
                .expect("rows split inside each plan, K elements each; compiled above");
        };
        self.run_coded(plans, out, opts, &run);
        Ok(())
    }

    /// A build without the JIT: an error.
    #[cfg(not(feature = "jit"))]
    fn coded_jit<T: Element>(&self, _: &[Coded<'_>], _: &mut [T], _: &Options) -> Result<()> {
        Err(HfError::Jit {
            linear: self.name().to_owned(),
            source: crate::formats::jit::JitError,
        })
    }
}
