//! # dq — bit-exact, fast dequantization
//!
//! dq turns s8/u8/s4/u4 (and s32) tensors with their scales and zero points back into
//! f32/f16/bf16/f64 with the semantics of oneDNN Graph `Dequantize` /
//! `DynamicDequantize` and nGraph `Dequantize` with `axes`, bit for bit (the
//! contract: `docs/SPEC.md`, cited in comments as `SPEC §N`). Every backend — the
//! scalar reference, the compile-time generated kernels and the Cranelift JIT —
//! produces the same bits.
//!
//! ```
//! use dq::{Backend, DynamicDequantize, Options, Tensor, TensorMut};
//! // Per-channel s8 of shape [1, 2, 2] along axis 1.
//! let src = Tensor::from_slice(&[10i8, -20, 30, -40], &[1, 2, 2]);
//! let scales = Tensor::from_slice(&[0.1f32, 0.2], &[2]);
//! let mut out = [0f32; 4];
//! let mut dst = TensorMut::from_slice(&mut out, &[1, 2, 2]);
//! let op = DynamicDequantize::per_channel(1).into();
//! dq::dequantize(&op, &src, Some(&scales), None, &mut dst, &Options::default())?;
//! assert_eq!(out, [10.0 * 0.1, -20.0 * 0.1, 30.0 * 0.2, -40.0 * 0.2]);
//! # Ok::<(), dq::Error>(())
//! ```
#![deny(missing_docs)]

extern crate self as dq;

// The ops and the one-call API.
pub use dq_macros::dequant_kernel;
pub use dq_runtime::{AxesDequantize, Dequantize, DynamicDequantize, Op, OpKind, Qtype};
pub use dq_runtime::{Backend, DType, Error, Result, Role};
pub use dq_runtime::{Element, Job, JobPart, Plan, Tensor, TensorDesc, TensorMut};
pub use options::Options;

// Named modules of the layers below, for users who build on them.
pub use dq_runtime::{arch, block, convert, dtype, exec, linear, minifloat, policy, races, rules};

use dq_runtime::Backends;
use std::sync::OnceLock;

pub mod buffer;
pub mod case;
/// The `dq` command line: compiled into the library so that other front ends (the
/// Python package) run a subcommand with the CLI's exact semantics
/// ([`cli::convert_command`]); the `dq` binary is [`cli::main`].
#[doc(hidden)]
#[allow(missing_docs)]
pub mod cli;
pub mod formats;
pub mod model;
pub mod npy;
mod options;

/// The README's Rust examples, compiled and run as doctests so they stay in sync.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

pub mod generated;

/// Kernels: the trait every backend implements, the backends themselves, and the
/// formula IR a `#[dequant_kernel]` is compiled from.
pub mod kernel {
    pub use crate::generated::standard;
    pub use dq_runtime::formula::{FormulaFacts, FormulaIr, Node, QKind, STANDARD, STANDARD_FLOAT};
    pub use dq_runtime::kernels::Entry;
    pub use dq_runtime::{Backends, GeneratedKernel, Kernel, KernelStats, Reference};
    pub use dq_runtime::{Loop, Lowering};
}

/// The Cranelift JIT backend (the default cargo feature `jit`).
#[cfg(feature = "jit")]
pub use dq_jit as jit;

/// What `#[dequant_kernel]` expansions name; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use dq_runtime::formula::{FormulaIr, Node, may_pass_signaling};
    pub use dq_runtime::kernels::{Entry, Formula, GeneratedKernel, Lanes, dtypes};
}

/// The backends this build of dq offers, in the order `auto` prefers them: the JIT
/// (where it pays), then the generated kernels.
pub fn backends() -> &'static Backends {
    static BACKENDS: OnceLock<Backends> = OnceLock::new();
    BACKENDS.get_or_init(|| {
        #[cfg(feature = "jit")]
        let all: Vec<&'static dyn dq_runtime::Kernel> =
            vec![dq_jit::standard(), &generated::standard];
        #[cfg(not(feature = "jit"))]
        let all: Vec<&'static dyn dq_runtime::Kernel> = vec![&generated::standard];
        Backends::new(all)
    })
}

/// Validates and runs one dequantization.
///
/// For the static [`Dequantize`] op, pass `None` for `scales` and `zps`.
///
/// # Errors
/// Any validation [`Error`]; nothing is written to `dst` then.
pub fn dequantize(
    op: &Op,
    src: &Tensor<'_>,
    scales: Option<&Tensor<'_>>,
    zps: Option<&Tensor<'_>>,
    dst: &mut TensorMut<'_>,
    opts: &Options,
) -> Result<()> {
    let plan = Plan::new(
        op,
        &src.desc,
        scales.map(|t| &t.desc),
        zps.map(|t| &t.desc),
        &dst.desc,
    )?;
    let kernel = backends().select(opts.backend(), &plan)?;
    let mut job = plan.bind(src, scales, zps, dst)?;
    opts.scope(|| job.run_parallel(kernel, opts.threads()))
}
