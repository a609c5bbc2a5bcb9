//! `#[dequant_kernel]`: compile-time dequantization kernels for dq.
//!
//! ```ignore
//! use dq::dequant_kernel;
//!
//! /// Dequantize, then ReLU.
//! #[dequant_kernel(src = [s4, u4], zps = [none, u4], dst = [bf16])]
//! fn dequantize_relu(q: int, z: int, s: float) { max((q - z) * s, 0.0) }
//! ```
//!
//! The attribute lists dtype sets, `src = [...], zps = [...], dst = [...]` and
//! optionally `scales = [dst, e8m0]` (scales of the dst dtype, the default, and/or
//! e8m0); several sets may be given, separated by `;`. Every combination of a set
//! must be allowed by one of dq's ops. The body is the element formula over the
//! three parameters (src value, zero point, scale): `+ - *`, unary `-`, `min`,
//! `max`, `abs`, float literals, parentheses and `let` bindings, typed as
//! `dq::formula` documents.
//!
//! The src value is typed by its parameter: `q: int` for integer src, `q: float`
//! for a float src (f8_e4m3, f8_e5m2, f4_e2m1: `q` is its exact value, `z` is 0
//! and `q - z` is `q`), `q: _` for both (the body is lowered once per kind):
//!
//! ```ignore
//! #[dequant_kernel(src = [f4_e2m1], zps = [none], dst = [bf16], scales = [e8m0])]
//! fn mxfp4_relu(x: float, z: _, s: float) { max(x * s, 0.0) }
//! ```
//!
//! The function becomes a `static` [`GeneratedKernel`] of the same name holding the
//! formula as IR and one monomorphized kernel per combination and ISA.
//!
//! [`GeneratedKernel`]: ../dq_runtime/kernels/struct.GeneratedKernel.html
#![deny(missing_docs)]

use proc_macro::TokenStream;

mod ast;
mod expand;
mod validate;

/// Declares a dequantization kernel; see the crate docs.
#[proc_macro_attribute]
pub fn dequant_kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand::dequant_kernel(attr.into(), item.into()).into()
}
