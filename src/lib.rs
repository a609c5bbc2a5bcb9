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

pub use dq_jit;
pub use dq_macros::dequant_kernel;
pub use dq_runtime::*;

use std::sync::OnceLock;

pub mod buffer;
pub mod case;
pub mod formats;
pub mod model;
pub mod npy;

/// The README's Rust examples, compiled and run as doctests so they stay in sync.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

pub mod generated;

/// What `#[dequant_kernel]` expansions name; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use dq_runtime::formula::{FormulaIr, Node, may_pass_signaling};
    pub use dq_runtime::kernels::{Entry, Formula, GeneratedKernel, Lanes, dtypes};
}

/// How to run a call: which backend, on how many threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// The backend (default `auto`).
    pub backend: Backend,
    /// Worker threads (default 1: the caller's thread).
    pub threads: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            backend: Backend::Auto,
            threads: 1,
        }
    }
}

/// The backends this build of dq offers, in the order `auto` prefers them: the JIT
/// (where it pays), then the generated kernels.
pub fn backends() -> &'static Backends {
    static BACKENDS: OnceLock<Backends> = OnceLock::new();
    BACKENDS.get_or_init(|| Backends::new(vec![dq_jit::standard(), &generated::dequantize]))
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
    let kernel = backends().select(opts.backend, &plan)?;
    plan.bind(src, scales, zps, dst)?
        .run_parallel(kernel, opts.threads)
}
