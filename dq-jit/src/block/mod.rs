//! GGUF block types through the JIT: each type's [`BlockDecl`](dq_runtime::block::BlockDecl) (or its plain float
//! conversion) lowered to a Cranelift loop over whole blocks, compiled once per type
//! and kept in a [`BlockCache`] (the crate's one cache: bounded, least recently
//! used evicted).
//!
//! The compiled function is `fn(src, blocks, out)`: it reads `blocks` whole blocks
//! from `src` and writes their `blocks * block_elems` f32 values to `out`, nothing
//! else. [`BlockJit::run`] checks the lengths before calling it.
//!
//! ```
//! // One Q8_0 block: d = 0.5 (f16 0x3800), then 32 signed bytes.
//! let mut block = vec![0x00, 0x38];
//! block.extend((0..32).map(|i| (i as i8 - 16) as u8));
//! let mut out = [0f32; 32];
//! let k = dq_jit::block::kernel("Q8_0")?;
//! k.run(&block, &mut out)?;
//! assert_eq!((out[0], out[31]), (-8.0, 7.5));
//! # Ok::<(), dq_jit::JitError>(())
//! ```
//!
//! Bits: those of the generated block driver and gguf-py: f32 operations unfused in
//! the formula's order; f16 parameters widened by integer code, F16 tensors by the
//! host's F16C (where it has AVX2 and F16C) with signalling NaNs restored, NaN
//! payloads kept either way; and where both operands of an addition or product may
//! be NaN, the first one (quieted) is the result, as x86-64 returns it.

mod fields;
mod float;
mod grid;
mod lower;
mod params;
mod plain;

use std::sync::{Arc, OnceLock};

use cranelift_codegen::ir::{AbiParam, Function, Signature, types};
use cranelift_codegen::isa::{CallConv, OwnedTargetIsa};
use dq_runtime::block::{BlockKernel, gguf};

use crate::cache::{Cache, Code};
use crate::compile::{self, Compiled};
use crate::error::JitError;

/// A compiled block function: decodes `blocks` whole blocks at `src` into
/// `blocks * block_elems` f32 at `out`.
pub type BlockFn = unsafe extern "C" fn(src: *const u8, blocks: usize, out: *mut f32);

/// One block type compiled by the JIT.
pub struct BlockJit {
    name: &'static str,
    block_bytes: usize,
    block_elems: usize,
    code: Compiled,
}

impl core::fmt::Debug for BlockJit {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("BlockJit")
            .field("name", &self.name)
            .field("code_bytes", &self.code_bytes())
            .finish_non_exhaustive()
    }
}

impl Code for BlockJit {
    fn code_mut(&mut self) -> &mut Compiled {
        &mut self.code
    }
}

impl BlockJit {
    /// The type's GGUF name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Bytes per block.
    pub fn block_bytes(&self) -> usize {
        self.block_bytes
    }

    /// Elements per block.
    pub fn block_elems(&self) -> usize {
        self.block_elems
    }

    /// Bytes of machine code.
    pub fn code_bytes(&self) -> usize {
        self.code.code_bytes
    }

    /// Compile time in nanoseconds.
    pub fn compile_ns(&self) -> u64 {
        self.code.compile_ns
    }

    /// Decodes `bytes` (whole blocks) into `out` (their elements).
    ///
    /// # Errors
    /// [`JitError::BlockLength`] when `bytes` is not whole blocks or `out` is not
    /// their element count; nothing is written then.
    pub fn run(&self, bytes: &[u8], out: &mut [f32]) -> Result<(), JitError> {
        let blocks = bytes.len() / self.block_bytes;
        if !bytes.len().is_multiple_of(self.block_bytes)
            || blocks.checked_mul(self.block_elems) != Some(out.len())
        {
            return Err(JitError::BlockLength {
                name: self.name,
                bytes: bytes.len(),
                elements: out.len(),
                block_bytes: self.block_bytes,
            });
        }
        if blocks == 0 {
            return Ok(());
        }
        // SAFETY: checked above: `bytes` holds exactly `blocks` whole blocks of
        // `block_bytes`, and `out` exactly `blocks * block_elems` f32; the function
        // reads only those blocks (and the declaration's `'static` grid tables, at
        // indices `BlockDecl::check` bounds) and writes only those elements (see
        // `lower`, `grid` and `plain`), and `&mut out` is exclusive for the call.
        unsafe { (self.entry())(bytes.as_ptr(), blocks, out.as_mut_ptr()) };
        Ok(())
    }

    /// The raw entry point, valid while `self` lives (calling it is `unsafe`:
    /// [`run`](Self::run) checks what it needs).
    pub fn entry(&self) -> BlockFn {
        // SAFETY: the code was built by `build` with exactly the `BlockFn`
        // signature (see `signature`); a transmute of a pointer calls nothing.
        unsafe { core::mem::transmute::<*const u8, BlockFn>(self.code.entry()) }
    }
}

/// How many block kernels were compiled, and how many lookups found one compiled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockStats {
    /// Kernels compiled (one per type, unless evicted and asked for again).
    pub compiled: usize,
    /// Lookups ([`kernel`]) answered from the cache.
    pub reused: usize,
    /// Kernels held now.
    pub kernels: usize,
}

/// Compiles and caches block kernels by GGUF type.
pub struct BlockCache {
    cache: Cache<&'static str, &'static BlockKernel, BlockJit>,
}

impl BlockCache {
    /// An empty cache keeping at most `capacity` kernels; the Cranelift
    /// verifier checks each function in debug builds.
    pub fn new(capacity: usize) -> BlockCache {
        BlockCache {
            cache: Cache::new(capacity),
        }
    }

    /// The kernel of GGUF type `name` (`Q4_K`, `BF16`, ...), from the cache or
    /// compiled.
    ///
    /// # Errors
    /// [`JitError::UnsupportedBlock`] for a type without a declaration or one the
    /// lowering does not handle; a Cranelift failure.
    pub fn kernel(&self, name: &str) -> Result<Arc<BlockJit>, JitError> {
        let gk = declared(name)?;
        self.cache
            .get(&gk.name, || Ok(gk), |gk| compile(gk, host_f16()))
    }

    /// True when type `name`'s kernel is compiled and cached.
    pub fn is_cached(&self, name: &str) -> bool {
        declared(name).is_ok_and(|gk| self.cache.contains(&gk.name))
    }

    /// What it has done.
    pub fn stats(&self) -> BlockStats {
        let s = self.cache.stats();
        BlockStats {
            compiled: s.compiled as usize,
            reused: s.reused as usize,
            kernels: s.cached as usize,
        }
    }
}

/// The process-wide block cache.
fn shared() -> &'static BlockCache {
    static CACHE: OnceLock<BlockCache> = OnceLock::new();
    CACHE.get_or_init(|| BlockCache::new(crate::DEFAULT_CAPACITY))
}

/// The process's block-kernel counters so far.
pub fn stats() -> BlockStats {
    shared().stats()
}

/// The kernel of GGUF type `name` from the process-wide [`BlockCache`]:
/// compiled on first use, then reused.
///
/// # Errors
/// As [`BlockCache::kernel`].
pub fn kernel(name: &str) -> Result<Arc<BlockJit>, JitError> {
    shared().kernel(name)
}

/// The declaration of GGUF type `name`.
fn declared(name: &str) -> Result<&'static BlockKernel, JitError> {
    gguf::kernel(name).ok_or_else(|| JitError::UnsupportedBlock {
        name: name.to_owned(),
        reason: "not a declared GGUF block type",
    })
}

/// The CLIF text of type `name`'s function (for review and tests).
///
/// # Errors
/// As [`kernel`].
pub fn clif(name: &str) -> Result<String, JitError> {
    let gk = declared(name)?;
    let (_, f) = compile::build(|isa| build(gk, isa, host_f16()))?;
    Ok(f.display().to_string())
}

/// Compiles `gk` outside the cache, for tests that run a changed copy of a
/// declaration (a mutated table entry must change the output).
///
/// # Errors
/// As [`kernel`].
#[doc(hidden)]
pub fn compile_uncached(gk: &BlockKernel) -> Result<BlockJit, JitError> {
    compile(gk, host_f16())
}

pub(crate) use crate::translate::{lanes, mem};

/// `fn(src: ptr, blocks: i64, out: ptr)` under the host's C calling convention.
fn signature(isa: &OwnedTargetIsa) -> Signature {
    let ptr = isa.pointer_type();
    let mut sig = Signature::new(CallConv::triple_default(isa.triple()));
    sig.params.push(AbiParam::new(ptr));
    sig.params.push(AbiParam::new(types::I64));
    sig.params.push(AbiParam::new(ptr));
    sig
}

/// The IR of one type: a declared one through [`lower`], a plain float through
/// [`plain`], F16 widened by the host's F16C where `host_f16` ([`host_f16`]).
/// x86's byte shuffle (SSSE3) where the host has it; Cranelift's `swizzle`
/// elsewhere.
fn build(gk: &BlockKernel, isa: &OwnedTargetIsa, host_f16: bool) -> Result<Function, JitError> {
    let (sig, cfg, pshufb) = (
        signature(isa),
        isa.frontend_config(),
        compile::has_pshufb(isa),
    );
    match gk.decl {
        Some(d) => lower::declared(d, sig, cfg, pshufb),
        None => plain::plain(gk.name, gk.block_bytes, sig, cfg, pshufb, host_f16),
    }
}

/// True when F16 tensors are widened by the host's F16C
/// ([`host_f16::widen`](crate::host_f16::widen)): an x86-64 CPU with AVX2 and F16C
/// (the check the linear JIT's f16 tables use; false off x86-64).
fn host_f16() -> bool {
    dq_runtime::arch::f16_convert()
}

/// Compiles one type through the crate's one compile path.
fn compile(gk: &BlockKernel, host_f16: bool) -> Result<BlockJit, JitError> {
    let code = compile::compile(gk.name, |isa| build(gk, isa, host_f16))?;
    Ok(BlockJit {
        name: gk.name,
        block_bytes: gk.block_bytes,
        block_elems: gk.block_elems,
        code,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every f16 bit pattern, widened by the JIT's F16 kernel in integer code and
    /// through the host's F16C, against the runtime's integer widening (gguf-py's
    /// bits: signalling NaNs stay signalling).
    #[test]
    fn f16_widening_is_exact_for_every_pattern() {
        use std::io::Write;
        // Written past libtest's capture, for `.ci/run`'s summary of the paths run.
        let say = |line: String| writeln!(std::io::stderr(), "{line}").unwrap();
        let src: Vec<u8> = (0..=u16::MAX).flat_map(u16::to_le_bytes).collect();
        let paths = if host_f16() {
            vec![false, true]
        } else {
            say("NOT ON THIS CPU: AVX2 + F16C (the JIT's host F16 widening)".into());
            vec![false]
        };
        for host in paths {
            let k = compile(declared("F16").unwrap(), host).unwrap();
            let mut out = vec![0f32; 1 << 16];
            k.run(&src, &mut out).unwrap();
            for (h, y) in (0..=u16::MAX).zip(&out) {
                let want = dq_runtime::block::f16_to_f32(h).to_bits();
                assert_eq!(y.to_bits(), want, "f16 {h:#06x}, host widening {host}");
            }
            say(format!(
                "PATH RAN: JIT F16 tensor widening, host F16C {host}"
            ));
        }
    }
}
