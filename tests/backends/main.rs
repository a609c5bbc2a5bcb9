//! Each backend and ISA path bit for bit against the reference: the generated
//! kernels (and user kernels of `#[dequant_kernel]`, with the macro's UI cases),
//! the JIT through the facade, the executor's splits and dispatches, many threads
//! at once, and every buffer against a guard page.

#[path = "../support/mod.rs"]
mod support;

mod concurrency;
mod executor;
mod generated;
mod guard_pages;
#[cfg(feature = "jit")]
mod jit;
#[cfg(feature = "jit")]
mod linear_stream;
mod split_policy;
mod user_kernel;
