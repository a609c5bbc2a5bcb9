//! Dequantizing one linear's weight into a caller's f32, f16 or bf16 buffer, on a
//! chosen backend and number of threads.

use dq_runtime::Backend;

use super::error::{HfError, Result};
use super::linear::{QuantLinear, Scheme};
use super::reference;
use crate::Options;
use crate::formats::element::{self, Element};
use crate::formats::race::{self, Pick};
use dq_runtime::linear::{Groups, Linear};

impl QuantLinear<'_> {
    /// Dequantizes the `[N, K]` weight into `out` (row-major, `N * K` elements): the
    /// f32 values of SPEC §11, or their round-to-nearest-even for f16/bf16.
    ///
    /// `opts.threads()` threads (0 is taken as 1) each write a run of whole rows; the
    /// bits do not depend on the count. Every backend runs every scheme: `Generated`
    /// and `Auto` through its plan ([`QuantLinear::plan`], the generated backend's
    /// tiled driver), `Jit` through the same plan compiled per linear shape by
    /// Cranelift (`dq_jit::linear`), `Reference` through [`reference`](mod@reference).
    /// Float weights ([`Scheme::Float`]: FP8, NVFP4) run as the runtime's
    /// elementwise plan instead, on the backend asked for.
    /// `Auto` races the generated driver and the JIT on the first large calls of
    /// each kind of linear and keeps the faster ([`race`](crate::formats::race)).
    ///
    /// ```
    /// use dq::formats::hf::Checkpoint;
    /// use dq::{Backend, Options};
    /// use half::f16;
    /// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/hf/gptq-v2-4bit-g64-actorder");
    /// let ckpt = Checkpoint::open(dir)?;
    /// let up = ckpt.linear("model.layers.0.mlp.up_proj").expect("a quantized linear");
    /// let opts = Options::new().with_backend(Backend::Auto).with_threads(3);
    /// let mut w = vec![f16::ZERO; up.n() * up.k()];
    /// up.dequantize(&mut w, &opts)?;
    /// let f32s = dq::formats::hf::reference::dequantize_f32(&up);
    /// assert_eq!(w[5], f16::from_f32(f32s[5]));
    /// # Ok::<(), dq::formats::hf::HfError>(())
    /// ```
    ///
    /// # Errors
    /// [`HfError::OutputLength`] when `out` is not `N * K` elements (nothing is
    /// written then), or [`HfError::Jit`] when the JIT cannot compile the linear.
    pub fn dequantize<T: Element>(&self, out: &mut [T], opts: &Options) -> Result<()> {
        let expected = self.n() * self.k();
        if out.len() != expected {
            return Err(HfError::OutputLength {
                linear: self.name().to_owned(),
                expected,
                got: out.len(),
            });
        }
        if self.runs_coded() {
            return self.dequantize_coded(out, opts);
        }
        if opts.backend() == Backend::Reference {
            let decode = |rows: std::ops::Range<usize>, buf: &mut [f32]| {
                reference::rows(self, rows, buf);
            };
            opts.scope(|| element::split(out, self.k(), opts.threads(), &decode));
            return Ok(());
        }
        if let Scheme::Float { .. } = self.scheme() {
            return super::float::dequantize(self, out, opts);
        }
        let plan = self.plan()?;
        let key = || {
            let map = match plan.map() {
                Groups::Index(_) => "g_idx",
                _ => "groups",
            };
            format!("{:?} {map} {}", self.scheme(), std::any::type_name::<T>())
        };
        let (pick, timed) = match opts.backend() {
            Backend::Jit => (Pick::Jit, false),
            Backend::Auto if out.len() >= race::MIN_ELEMENTS => race::next(&key()),
            _ => (Pick::Generated, false),
        };
        let t = std::time::Instant::now();
        let pick = match pick {
            Pick::Jit => match self.run_jit(&plan, out, opts) {
                Ok(()) => Pick::Jit,
                // `auto` falls back to the generated driver where the JIT cannot compile.
                Err(_) if opts.backend() == Backend::Auto => self.run_generated(&plan, out, opts),
                Err(e) => return Err(e),
            },
            Pick::Generated => self.run_generated(&plan, out, opts),
        };
        if timed {
            race::report(
                &key(),
                pick,
                t.elapsed().as_nanos() as f64 / out.len() as f64,
            );
        }
        Ok(())
    }

    /// The weight through the generated backend's tiled driver.
    fn run_generated<T: Element>(&self, plan: &Linear<'_>, out: &mut [T], opts: &Options) -> Pick {
        let decode = |rows: std::ops::Range<usize>, part: &mut [T]| {
            plan.run(rows, part)
                .expect("rows split inside 0..N, with K elements each");
        };
        opts.scope(|| element::split_direct(out, self.k(), opts.threads(), &decode));
        Pick::Generated
    }

    /// The weight through the linear's JIT function (compiled once, before the
    /// threads start: they then find it cached).
    #[cfg(not(feature = "jit"))]
    fn run_jit<T: Element>(&self, _: &Linear<'_>, _: &mut [T], _: &Options) -> Result<()> {
        Err(HfError::Jit {
            linear: self.name().to_owned(),
            source: crate::formats::jit::JitError,
        })
    }

    /// The weight through the linear's JIT function (compiled once, before the
    /// threads start: they then find it cached).
    #[cfg(feature = "jit")]
    fn run_jit<T: Element>(&self, plan: &Linear<'_>, out: &mut [T], opts: &Options) -> Result<()> {
        let jit = dq_jit::linear();
        jit.kernel(plan, <T as dq_runtime::linear::Out>::OUT)
            .map_err(|source| HfError::Jit {
                linear: self.name().to_owned(),
                source: source.into(),
            })?;
        let decode = |rows: std::ops::Range<usize>, part: &mut [T]| {
            jit.run(plan, rows, part)
                .expect("rows split inside 0..N, with K elements each; compiled above");
        };
        opts.scope(|| element::split_direct(out, self.k(), opts.threads(), &decode));
        Ok(())
    }
}
