//! The JIT as the format readers use it: dq-jit's block and linear kernels with
//! the cargo feature `jit` (the default), and without it a JIT that refuses every
//! kernel, so `Backend::Jit` is an error and `auto` runs the generated drivers.

#[cfg(feature = "jit")]
pub use dq_jit::block::BlockJit;
#[cfg(feature = "jit")]
pub use dq_jit::{JitError, LinearJitError};

#[cfg(not(feature = "jit"))]
pub use off::{BlockJit, JitError, LinearJitError};

/// The JIT block kernel of GGUF block type `name` (compiled on first use).
///
/// # Errors
/// Why it cannot be compiled (always, in a build without the JIT).
pub fn block_kernel(name: &str) -> Result<std::sync::Arc<BlockJit>, JitError> {
    #[cfg(feature = "jit")]
    return dq_jit::block::kernel(name);
    #[cfg(not(feature = "jit"))]
    {
        let _ = name;
        Err(JitError)
    }
}

/// Block, linear and coded kernels the JIT has compiled in this process.
pub fn compiled() -> usize {
    #[cfg(feature = "jit")]
    return dq_jit::block::stats().compiled
        + dq_jit::linear().stats().compiled as usize
        + dq_jit::coded().compiled() as usize;
    #[cfg(not(feature = "jit"))]
    0
}

/// A build without the JIT: its kernels cannot be had.
#[cfg(not(feature = "jit"))]
mod off {
    /// Why no JIT kernel can be had.
    #[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
    #[error("this build of dq has no JIT (built without the cargo feature `jit`)")]
    pub struct JitError;

    /// The linear JIT's error, in a build without it.
    pub type LinearJitError = JitError;

    /// A JIT block kernel: none exists in a build without the JIT.
    pub enum BlockJit {}

    impl BlockJit {
        /// Never called: no value of this type exists.
        pub fn run(&self, _bytes: &[u8], _out: &mut [f32]) -> Result<(), JitError> {
            match *self {}
        }
    }
}
