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
//! The attribute lists dtype sets, `src = [...], zps = [...], dst = [...]`; several
//! sets may be given, separated by `;`. Every combination of a set must be allowed
//! by one of dq's ops. The body is the element formula over the three parameters
//! (src value, zero point, scale): `+ - *`, unary `-`, `min`, `max`, `abs`, float
//! literals, parentheses and `let` bindings, typed as `dq::formula` documents.
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
