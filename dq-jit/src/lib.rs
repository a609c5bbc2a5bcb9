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
#![deny(missing_docs)]

pub mod block;
mod cache;
mod compile;
mod error;
mod host_f16;
mod host_lut;
mod host_prefetch;
mod host_store;
mod lane_math;
mod linear;
mod scales;
mod spec;
mod stream;
mod translate;

use core::ops::Range;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use dq_runtime::policy::{self, StoreStrategy};
use dq_runtime::{
    Backend, Error, FormulaIr, Job, KernelStats, Plan, Reference, Result, STANDARD, arch,
};

pub use cache::{CompiledKernel, Kernel};
pub use compile::KernelFn;
pub use error::{FormulaProblem, JitError, Stage};
pub use linear::{
    CHUNK, LinearJit, LinearJitError, LinearKernel, LinearStats, Shape, TILE_ROWS, TILE_WORDS,
    linear,
};
pub use spec::{HostLookups, Spec};

/// Kernels a JIT keeps before evicting the least recently used one.
pub const DEFAULT_CAPACITY: usize = 256;

/// Ranges writing at least this many dst bytes stream their output with
/// non-temporal stores when the plan's store strategy
/// ([`policy::store_for`]) is [`StoreStrategy::NonTemporal`] and dst is dense.
/// The JIT has no prefetching stores: under the other strategies it stores
/// directly.
pub const STREAM_MIN_BYTES: usize = 1 << 16;

/// Work (elements) above which a one-off compile is worth it next to the compiled-in
/// generated kernels: 4M elements take many times a compile (BENCHMARKS.md).
pub const PAYS_ELEMENTS: usize = 1 << 22;

/// A JIT for one formula: compiles plans on demand and caches the kernels.
pub struct Jit {
    formula: &'static FormulaIr,
    cache: cache::Cache,
}

impl Jit {
    /// A JIT for `formula` keeping at most `capacity` kernels.
    ///
    /// Compiled IR is checked by the Cranelift verifier in debug builds.
    pub fn new(formula: &'static FormulaIr, capacity: usize) -> Jit {
        Jit {
            formula,
            cache: cache::Cache::new(
                formula,
                capacity,
                cfg!(debug_assertions),
                spec::Host::default(),
            ),
        }
    }

    /// This JIT with f16 results converted by the host's f16 instructions (F16C)
    /// from f32 blocks when `on` (the default, where the host has them), or always
    /// rounded by integer code in the kernel (slower; for tests of that code on
    /// hosts with F16C). Both give the same bits.
    pub fn with_f16_conversion(self, on: bool) -> Jit {
        let host = self.cache.host();
        self.with_host(spec::Host { f16: on, ..host })
    }

    /// This JIT with 4-bit lookups done by the host's AVX-512 permutes
    /// ([`Spec::host_lookups`]) when `on` (the default, where the
    /// selected ISA is AVX-512), or always by Cranelift's byte shuffles (slower;
    /// for tests of that code on AVX-512 hosts). Both give the same bits.
    pub fn with_host_lookups(self, on: bool) -> Jit {
        let host = self.cache.host();
        self.with_host(spec::Host {
            lookups: on,
            ..host
        })
    }

    /// This JIT (emptied) with kernels that may call `host`'s instructions.
    fn with_host(self, host: spec::Host) -> Jit {
        Jit {
            cache: cache::Cache::new(
                self.formula,
                self.cache.capacity(),
                cfg!(debug_assertions),
                host,
            ),
            ..self
        }
    }

    /// The formula it compiles.
    pub fn formula(&self) -> &'static FormulaIr {
        self.formula
    }

    /// The kernel for `plan`, from the cache or freshly compiled.
    ///
    /// # Errors
    /// [`Error::BackendUnavailable`] with the [`JitError`]'s text when the plan has
    /// no elements, the formula is malformed, or Cranelift fails.
    pub fn kernel(&self, plan: &Plan) -> Result<Kernel> {
        Ok(self.cache.get(plan)?)
    }

    /// True when the kernel for `plan` is already compiled.
    pub fn is_cached(&self, plan: &Plan) -> bool {
        self.cache.contains(plan)
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

    /// What a kernel for `plan` is compiled with (f16 blocks and tables, widened
    /// scales), without compiling it.
    ///
    /// # Errors
    /// As [`kernel`](Self::kernel), for a plan without elements or a formula that
    /// does not accept its dtypes.
    pub fn spec(&self, plan: &Plan) -> Result<Spec> {
        Ok(self.cache.spec(plan)?)
    }

    /// The CLIF text of the function compiled for `plan` (for review and tests).
    ///
    /// # Errors
    /// As [`kernel`](Self::kernel).
    pub fn clif(&self, plan: &Plan) -> Result<String> {
        Ok(self.ir(plan)?.display().to_string())
    }

    /// Runs the Cranelift verifier on the IR built for `plan`.
    ///
    /// # Errors
    /// [`Error::BackendUnavailable`] with the verifier's message
    /// ([`JitError::Verifier`]), or as [`kernel`](Self::kernel).
    pub fn verify(&self, plan: &Plan) -> Result<()> {
        let isa = compile::host_isa()?;
        let f = self.ir(plan)?;
        cranelift_codegen::verify_function(&f, &*isa).map_err(|e| {
            Error::from(JitError::Verifier {
                message: e.to_string(),
            })
        })
    }

    fn ir(&self, plan: &Plan) -> Result<cranelift_codegen::ir::Function> {
        let isa = compile::host_isa()?;
        Ok(compile::build_ir(&self.cache.spec(plan)?, &isa)?)
    }
}

/// The JIT for the spec's formula ([`STANDARD`]), shared by the process.
pub fn standard() -> &'static Jit {
    for_formula(&STANDARD)
}

/// The process-wide JIT for `formula` (one per distinct formula, created on first use).
pub fn for_formula(formula: &'static FormulaIr) -> &'static Jit {
    static JITS: OnceLock<Mutex<HashMap<FormulaIr, &'static Jit>>> = OnceLock::new();
    let mut map = JITS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    map.entry(*formula)
        .or_insert_with(|| Box::leak(Box::new(Jit::new(formula, DEFAULT_CAPACITY))))
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

impl CompiledKernel {
    /// Bytes of machine code.
    pub fn code_bytes(&self) -> usize {
        self.code.code_bytes
    }

    /// The raw entry point, valid while `self` lives.
    pub fn entry(&self) -> KernelFn {
        self.code.func
    }

    /// Computes the dst elements of `job` whose logical index is in `range`,
    /// storing as [`streams`](Self::streams) says (`&mut`: nothing else runs the job
    /// meanwhile).
    ///
    /// # Errors
    /// [`Error::BackendUnavailable`] when `job`'s plan is not the one compiled
    /// ([`JitError::OtherPlan`]), or [`Error::BadRange`] when `range` is outside the
    /// plan.
    pub fn run(&self, job: &mut Job<'_>, range: Range<usize>) -> Result<()> {
        self.run_with(job, range)
    }

    /// True when running `len` elements streams the output (non-temporal stores)
    /// rather than storing it directly: the kernel streams its lookups itself
    /// ([`HostLookups::Stream`]), or the plan's store strategy is
    /// [`StoreStrategy::NonTemporal`], the range writes at least
    /// [`STREAM_MIN_BYTES`] and dst is dense (through a per-thread block buffer).
    pub fn streams(&self, len: usize) -> bool {
        let l = &self.spec.lowering;
        self.spec.host_lookups == Some(HostLookups::Stream)
            || policy::store_for(l.output_bytes()) == StoreStrategy::NonTemporal
                && len.saturating_mul(l.dst_bytes()) >= STREAM_MIN_BYTES
                && l.dst_dense
    }

    /// [`run`](Self::run), for a caller that owns `range` of the job.
    fn run_with(&self, job: &Job<'_>, range: Range<usize>) -> Result<()> {
        let plan = job.plan();
        if plan.lowering() != &self.spec.lowering {
            return Err(JitError::OtherPlan.into());
        }
        if range.start > range.end || range.end > plan.numel() {
            return Err(Error::BadRange {
                start: range.start,
                end: range.end,
                elements: plan.numel(),
            });
        }
        if range.is_empty() {
            return Ok(());
        }
        if self.spec.f32_scales {
            // Piece by piece: the widened scales of a piece stay small (and in
            // cache) however large the plan.
            for piece in scales::pieces(range) {
                let span = scales::span(&self.spec, piece.clone());
                scales::with_f32(job.scales(), span, |s| self.run_on(job, s, piece));
            }
        } else {
            self.run_on(job, job.scales().as_ptr(), range);
        }
        Ok(())
    }

    /// [`run_with`](Self::run_with) once its checks passed, reading the scales
    /// as the kernel reads them at `scales` (valid for every scale index of
    /// `range`).
    fn run_on(&self, job: &Job<'_>, scales: *const u8, range: Range<usize>) {
        let stream = self.streams(range.len());
        if self.spec.host_lookups == Some(HostLookups::Stream) {
            // SAFETY: as below; the kernel's lookups stream their stores, which the
            // fence orders before the output is read.
            unsafe { self.call(job, scales, job.dst_ptr(), range) };
            arch::stream_fence();
        } else if self.spec.f16_blocks {
            self.run_f16_blocks(job, scales, range, stream);
        } else if stream {
            self.run_streaming(job, scales, range);
        } else {
            // SAFETY: the plan matches the compiled spec and `bind` validated every
            // buffer for it (`scales` as the caller says); `range` is inside the
            // plan, and the kernel writes only the dst elements of `range`, which
            // this call owns (the contract of Kernel::run, or `run`'s `&mut Job`).
            unsafe { self.call(job, scales, job.dst_ptr(), range) };
        }
    }

    /// Runs `range` block by block: the kernel writes each block's results (dense,
    /// `Spec::out_bytes` an element; streaming and f16 blocks both need a dense dst)
    /// into a thread-local staging buffer, then `flush(s, bytes)` moves the block
    /// that starts at element `s` to dst.
    fn run_blocks(
        &self,
        job: &Job<'_>,
        scales: *const u8,
        range: Range<usize>,
        mut flush: impl FnMut(usize, &[u8]),
    ) {
        thread_local! {
            static BUF: RefCell<Box<stream::Block>> =
                RefCell::new(Box::new(stream::Block([0; stream::BLOCK_BYTES])));
        }
        debug_assert!(self.spec.dst_dense);
        let w = self.spec.out_bytes();
        let per = stream::BLOCK_BYTES / w;
        BUF.with_borrow_mut(|b| {
            let buf = &mut b.0;
            let mut s = range.start;
            while s < range.end {
                let e = (s + per).min(range.end);
                // Dense output: element `l` lives at byte `l * w`, so this base puts
                // elements s..e at buf[0..(e - s) * w].
                let base = buf.as_mut_ptr().wrapping_sub(s * w);
                // SAFETY: as in `run_with` for src/scales/zps; the kernel's writes
                // land in `buf` (dense, see above), which holds `per` elements.
                unsafe { self.call(job, scales, base, s..e) };
                flush(s, &buf[..(e - s) * w]);
                s = e;
            }
        });
    }

    /// Computes blocks into a thread-local buffer and streams them to dst.
    fn run_streaming(&self, job: &Job<'_>, scales: *const u8, range: Range<usize>) {
        let w = self.spec.dst_bytes();
        self.run_blocks(job, scales, range, |s, block| {
            // SAFETY: the block's bytes s*w.. of dst belong to this call's range,
            // and `bind` checked the dst buffer holds every element.
            unsafe { arch::stream_copy(job.dst_ptr().add(s * w), block) }
        });
        arch::stream_fence();
    }

    /// Under [`Spec::f16_blocks`](crate::Spec): computes blocks of f32 results and
    /// converts each to f16 into dst (with non-temporal stores when `stream`).
    fn run_f16_blocks(&self, job: &Job<'_>, scales: *const u8, range: Range<usize>, stream: bool) {
        self.run_blocks(job, scales, range, |s, block| {
            // The block starts the 64-byte aligned staging buffer.
            let x = stream::as_f32s(block);
            // SAFETY: bytes 2s..2(s + x.len()) of dst belong to this call's range,
            // `bind` checked the dst buffer holds every element, and nothing else
            // writes them during this call (Kernel::run gives the range to it).
            unsafe {
                let dst = job.dst_ptr().add(s * 2);
                if stream {
                    arch::f32_to_f16_stream(dst, x);
                } else {
                    arch::f32_to_f16(dst, x);
                }
            }
        });
        if stream {
            arch::stream_fence();
        }
    }

    /// # Safety
    /// `job`'s plan matches `self.spec`, `range` is inside it, `scales` is a base
    /// at which the kernel's scale reads for `range` are valid ([`Spec::scale_type`]
    /// values), and `dst` one at which its dst writes for `range` are valid and
    /// exclusive.
    unsafe fn call(&self, job: &Job<'_>, scales: *const u8, dst: *mut u8, range: Range<usize>) {
        // SAFETY: forwarded from the caller's contract.
        unsafe {
            (self.code.func)(
                job.src().as_ptr(),
                scales,
                job.zps().as_ptr(),
                dst,
                range.start,
                range.end,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dq_runtime::{DType, DynamicDequantize, TensorDesc};

    /// The CLIF of one tiny specialisation, so changes in emitted code show in review.
    /// `DQ_BLESS=1 cargo test -p dq-jit` rewrites `tests/tiny.clif`.
    #[test]
    fn clif_of_a_tiny_specialisation() {
        let shape = [3];
        let plan = Plan::new(
            &DynamicDequantize::per_tensor().into(),
            &TensorDesc::new(DType::S8, &shape),
            Some(&TensorDesc::new(DType::F32, &[1])),
            None,
            &TensorDesc::new(DType::F32, &shape),
        )
        .unwrap();
        let text = Jit::new(&STANDARD, 1).clif(&plan).unwrap();
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tiny.clif");
        if std::env::var_os("DQ_BLESS").is_some() {
            std::fs::write(path, &text).unwrap();
        }
        let want = std::fs::read_to_string(path).expect("tests/tiny.clif (DQ_BLESS=1 writes it)");
        assert_eq!(
            text, want,
            "emitted CLIF changed: review, then rerun with DQ_BLESS=1"
        );
    }
}
