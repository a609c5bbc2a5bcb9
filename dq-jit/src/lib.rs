//! dq-jit: a Cranelift JIT that compiles one dequantization plan — shapes, strides,
//! group sizes and dtypes baked in as constants — into a native loop, with a
//! bounded, thread-safe kernel cache.
//!
//! ```
//! use dq_runtime::{DynamicDequantize, Plan, Tensor, TensorMut};
//! let src = Tensor::from_slice(&[0u8, 10, 20, 30], &[4]);
//! let scales = Tensor::from_slice(&[0.5f32], &[1]);
//! let zps = Tensor::from_slice(&[10u8], &[1]);
//! let mut out = [0f32; 4];
//! let mut dst = TensorMut::from_slice(&mut out, &[4]);
//! let op = DynamicDequantize::per_tensor().into();
//! let plan = Plan::new(&op, &src.desc, Some(&scales.desc), Some(&zps.desc), &dst.desc)?;
//! plan.bind(&src, Some(&scales), Some(&zps), &mut dst)?.run(dq_jit::standard())?;
//! assert_eq!(out, [-5.0, 0.0, 5.0, 10.0]);
//! # Ok::<(), dq_runtime::Error>(())
//! ```
//!
//! Custom formulas (the IR `#[dequant_kernel]` emits) get their own JIT with
//! [`for_formula`]. GGUF block types (their `dq_runtime::block` declarations) get
//! one kernel each, compiled on first use and kept: [`block::kernel`].
//! Quantized linears (GPTQ, AWQ, compressed-tensors:
//! `dq_runtime::linear::Linear`) get one function per linear shape from [`linear`].
//!
//! All three kinds keep their kernels in one kind of cache (bounded, least
//! recently used evicted, one compile per key) and compile through one path
//! (build IR, verify in debug builds, define, finalize).
//!
//! Environment: `DQ_JIT_DISASM` (any value), read once at the first compile,
//! prints the machine code of every function compiled afterwards to stderr.
#![deny(missing_docs)]

pub mod block;
mod cache;
mod compile;
mod error;
mod hoist;
mod host_f16;
mod host_lut;
mod host_prefetch;
mod host_store;
mod kernel;
mod lane_math;
mod linear;
mod scales;
mod spec;
mod stream;
mod translate;

use core::ops::Range;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use dq_runtime::{
    Backend, FormulaFacts, FormulaIr, Job, KernelStats, Lowering, Plan, Reference, Result, STANDARD,
};

pub use compile::KernelFn;
pub use dq_runtime::FormulaProblem;
pub use error::{JitError, Stage};
pub use kernel::{CompiledKernel, Kernel};
pub use linear::coded::{COLUMN_ROWS, CodedJit, CodedKernel, CodedShape, coded};
pub use linear::{
    CHUNK, LinearJit, LinearJitError, LinearKernel, LinearStats, Shape, TILE_ROWS, TILE_WORDS,
    linear,
};
pub use spec::{HostLookups, Spec};

/// Kernels a JIT keeps before evicting the least recently used one.
pub const DEFAULT_CAPACITY: usize = 256;

/// Ranges writing at least this many dst bytes stream their output with
/// non-temporal stores when the plan's store strategy
/// ([`policy::store_for`](dq_runtime::policy::store_for)) is
/// [`StoreStrategy::NonTemporal`](dq_runtime::policy::StoreStrategy) and dst is
/// dense. The JIT has no prefetching stores: under the other strategies it
/// stores directly.
pub const STREAM_MIN_BYTES: usize = 1 << 16;

/// Work (elements) above which a one-off compile is worth it next to the compiled-in
/// generated kernels: 4M elements take many times a compile (BENCHMARKS.md).
pub const PAYS_ELEMENTS: usize = 1 << 22;

/// A JIT for one formula: compiles plans on demand and caches the kernels.
pub struct Jit {
    formula: &'static FormulaIr,
    /// The formula's facts, or why its IR is malformed (checked once, when the
    /// JIT is made, so no cache lock is held while it is read).
    facts: core::result::Result<FormulaFacts, JitError>,
    /// The host instructions its kernels may call.
    host: spec::Host,
    cache: cache::Cache<Lowering, Spec, CompiledKernel>,
}

impl Jit {
    /// A JIT for `formula` keeping at most `capacity` kernels. A malformed
    /// formula ([`FormulaIr::validate`]) makes a JIT whose every kernel request
    /// fails with [`JitError::Formula`].
    ///
    /// Compiled IR is checked by the Cranelift verifier in debug builds.
    pub fn new(formula: &'static FormulaIr, capacity: usize) -> Jit {
        Jit::with_host_of(formula, capacity, spec::Host::default())
    }

    fn with_host_of(formula: &'static FormulaIr, capacity: usize, host: spec::Host) -> Jit {
        let facts = formula
            .validate()
            .map(|()| formula.facts())
            .map_err(|problem| JitError::Formula {
                formula: formula.name,
                problem,
            });
        Jit {
            formula,
            facts,
            host,
            cache: cache::Cache::new(capacity),
        }
    }

    /// This JIT with f16 results converted by the host's f16 instructions (F16C)
    /// from f32 blocks when `on` (the default, where the host has them), or always
    /// rounded by integer code in the kernel (slower; for tests of that code on
    /// hosts with F16C). Both give the same bits.
    pub fn with_f16_conversion(self, on: bool) -> Jit {
        let host = spec::Host {
            f16: on,
            ..self.host
        };
        Jit::with_host_of(self.formula, self.cache.capacity(), host)
    }

    /// This JIT with 4-bit lookups done by the host's AVX-512 permutes
    /// ([`Spec::host_lookups()`]) when `on` (the default, where the
    /// selected ISA is AVX-512), or always by Cranelift's byte shuffles (slower;
    /// for tests of that code on AVX-512 hosts). Both give the same bits.
    pub fn with_host_lookups(self, on: bool) -> Jit {
        let host = spec::Host {
            lookups: on,
            ..self.host
        };
        Jit::with_host_of(self.formula, self.cache.capacity(), host)
    }

    /// The formula it compiles.
    pub fn formula(&self) -> &'static FormulaIr {
        self.formula
    }

    /// The kernel for `plan`, from the cache or freshly compiled.
    ///
    /// # Errors
    /// [`Error::BackendUnavailable`](dq_runtime::Error::BackendUnavailable) with the [`JitError`]'s text when the plan has
    /// no elements, the formula is malformed, or Cranelift fails.
    pub fn kernel(&self, plan: &Plan) -> Result<Kernel> {
        let kernel = self.cache.get(
            plan.lowering(),
            || self.fresh_spec(plan),
            |spec| {
                let code = compile::compile(self.formula.name, |isa| compile::build_ir(spec, isa))?;
                Ok(CompiledKernel::new(spec.clone(), code))
            },
        )?;
        Ok(kernel)
    }

    /// True when the kernel for `plan` is already compiled.
    pub fn is_cached(&self, plan: &Plan) -> bool {
        self.cache.contains(plan.lowering())
    }

    /// True when running `plan` here pays next to compiled-in kernels: the kernel is
    /// cached, or the work is at least [`PAYS_ELEMENTS`].
    pub fn pays(&self, plan: &Plan) -> bool {
        plan.numel() >= PAYS_ELEMENTS || self.is_cached(plan)
    }

    /// Drops every cached kernel (kernels still held elsewhere stay valid).
    pub fn clear(&self) {
        self.cache.clear();
    }

    /// What the kernel for `plan` is compiled with (f16 blocks and tables,
    /// widened scales), without compiling it: the cached kernel's spec where
    /// the cache holds one, else the spec it would be compiled from now (which
    /// follows the process's store strategy and ISA).
    ///
    /// # Errors
    /// As [`kernel`](Self::kernel), for a plan without elements or a formula that
    /// does not accept its dtypes.
    pub fn spec(&self, plan: &Plan) -> Result<Spec> {
        match self.cache.prep(plan.lowering()) {
            Some(spec) => Ok(spec),
            None => Ok(self.fresh_spec(plan)?),
        }
    }

    /// The spec `plan`'s kernel is compiled from, from the current globals.
    fn fresh_spec(&self, plan: &Plan) -> core::result::Result<Spec, JitError> {
        let facts = self.facts.clone()?;
        Spec::new(self.formula, facts, plan.lowering(), self.host)
    }

    /// The CLIF text of the function compiled for `plan` (for review and
    /// tests): that of [`spec`](Self::spec).
    ///
    /// # Errors
    /// As [`kernel`](Self::kernel).
    pub fn clif(&self, plan: &Plan) -> Result<String> {
        Ok(self.ir(plan)?.1.display().to_string())
    }

    /// Runs the Cranelift verifier on the IR built for `plan`.
    ///
    /// # Errors
    /// [`Error::BackendUnavailable`](dq_runtime::Error::BackendUnavailable) with the verifier's message
    /// ([`JitError::Verifier`]), or as [`kernel`](Self::kernel).
    pub fn verify(&self, plan: &Plan) -> Result<()> {
        let (isa, f) = self.ir(plan)?;
        Ok(compile::verify(&isa, &f)?)
    }

    fn ir(
        &self,
        plan: &Plan,
    ) -> Result<(
        cranelift_codegen::isa::OwnedTargetIsa,
        cranelift_codegen::ir::Function,
    )> {
        let spec = self.spec(plan)?;
        Ok(compile::build(|isa| compile::build_ir(&spec, isa))?)
    }
}

/// The JIT for the spec's formula ([`STANDARD`]), shared by the process.
pub fn standard() -> &'static Jit {
    for_formula(&STANDARD)
}

/// The process-wide JIT for `formula` (one per distinct formula, created on
/// first use). A malformed formula gets a JIT that refuses every plan
/// ([`Jit::new`]); it is checked before the process's map of JITs is locked.
pub fn for_formula(formula: &'static FormulaIr) -> &'static Jit {
    static JITS: OnceLock<Mutex<HashMap<FormulaIr, &'static Jit>>> = OnceLock::new();
    let jits = JITS.get_or_init(Default::default);
    let lock = || jits.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&jit) = lock().get(formula) {
        return jit;
    }
    let jit = Jit::new(formula, DEFAULT_CAPACITY);
    // A racing thread may have added one meanwhile: theirs is kept.
    lock()
        .entry(*formula)
        .or_insert_with(|| Box::leak(Box::new(jit)))
}

impl dq_runtime::Kernel for Jit {
    fn backend(&self) -> Backend {
        Backend::Jit
    }

    fn supports(&self, plan: &Plan) -> Result<()> {
        if plan.numel() == 0 {
            return Ok(());
        }
        self.kernel(plan).map(drop)
    }

    /// [`Jit::pays`].
    fn pays(&self, plan: &Plan) -> bool {
        Jit::pays(self, plan)
    }

    unsafe fn run(&self, job: &Job<'_>, range: Range<usize>) {
        if range.is_empty() {
            return;
        }
        let done = self
            .kernel(job.plan())
            .and_then(|k| k.run_with(job, range.clone()));
        if done.is_err() {
            // Only reachable if a kernel evicted after `supports` fails to recompile:
            // the reference computes the same bits.
            let reference = Reference {
                formula: self.formula,
            };
            // SAFETY: this call's contract, passed on unchanged (the reference
            // supports every plan).
            unsafe { dq_runtime::Kernel::run(&reference, job, range) };
        }
    }

    fn stats(&self) -> Option<KernelStats> {
        Some(self.cache.stats())
    }
}
