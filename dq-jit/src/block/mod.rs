//! GGUF block types through the JIT: each type's [`BlockDecl`] (or its plain float
//! conversion) lowered to a Cranelift loop over whole blocks, compiled once per type
//! and kept for the life of the process.
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
mod lower;
mod params;
mod plain;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use cranelift_codegen::ir::{AbiParam, Function, Signature, types};
use cranelift_codegen::isa::{CallConv, OwnedTargetIsa};
use cranelift_codegen::{Context, verify_function};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{Linkage, Module, default_libcall_names};
use dq_runtime::block::{BlockDecl, gguf};

use crate::compile::host_isa;
use crate::error::{JitError, Stage};

/// A compiled block function: decodes `blocks` whole blocks at `src` into
/// `blocks * block_elems` f32 at `out`.
pub type BlockFn = unsafe extern "C" fn(src: *const u8, blocks: usize, out: *mut f32);

/// One block type compiled by the JIT.
#[derive(Debug)]
pub struct BlockJit {
    /// The type's GGUF name.
    pub name: &'static str,
    /// Bytes per block.
    pub block_bytes: usize,
    /// Elements per block.
    pub block_elems: usize,
    /// Bytes of machine code.
    pub code_bytes: usize,
    /// Compile time in nanoseconds.
    pub compile_ns: u64,
    func: BlockFn,
}

impl BlockJit {
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
        // reads only those blocks and writes only those elements (see `lower` and
        // `plain`), and `&mut out` is exclusive for the call.
        unsafe { (self.func)(bytes.as_ptr(), blocks, out.as_mut_ptr()) };
        Ok(())
    }

    /// The raw entry point (valid for the life of the process).
    pub fn entry(&self) -> BlockFn {
        self.func
    }
}

/// How many block kernels were compiled, and how many lookups found one compiled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockStats {
    /// Kernels compiled (at most one per type per process).
    pub compiled: usize,
    /// Lookups ([`kernel`]) answered from the cache.
    pub reused: usize,
}

static COMPILED: AtomicUsize = AtomicUsize::new(0);
static REUSED: AtomicUsize = AtomicUsize::new(0);

/// The process's block-kernel counters so far.
pub fn stats() -> BlockStats {
    BlockStats {
        compiled: COMPILED.load(Ordering::Relaxed),
        reused: REUSED.load(Ordering::Relaxed),
    }
}

/// The kernel of GGUF type `name` (`Q4_K`, `BF16`, ...): compiled on first use,
/// then reused. The code lives for the process (at most one kernel per type).
///
/// # Errors
/// [`JitError::UnsupportedBlock`] for a type without a declaration or one the
/// lowering does not handle; a Cranelift failure.
pub fn kernel(name: &str) -> Result<&'static BlockJit, JitError> {
    static CACHE: OnceLock<Mutex<HashMap<&'static str, &'static BlockJit>>> = OnceLock::new();
    let gk = gguf::kernel(name).ok_or_else(|| JitError::UnsupportedBlock {
        name: name.to_owned(),
        reason: "not a declared GGUF block type",
    })?;
    let mut map = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(&k) = map.get(gk.name) {
        REUSED.fetch_add(1, Ordering::Relaxed);
        return Ok(k);
    }
    let k: &'static BlockJit = Box::leak(Box::new(compile(
        gk.name,
        gk.block_bytes,
        gk.block_elems,
        gk.decl,
        host_f16(),
    )?));
    COMPILED.fetch_add(1, Ordering::Relaxed);
    map.insert(gk.name, k);
    Ok(k)
}

/// The CLIF text of type `name`'s function (for review and tests).
///
/// # Errors
/// As [`kernel`].
pub fn clif(name: &str) -> Result<String, JitError> {
    let gk = gguf::kernel(name).ok_or_else(|| JitError::UnsupportedBlock {
        name: name.to_owned(),
        reason: "not a declared GGUF block type",
    })?;
    let isa = host_isa()?;
    Ok(build(gk.name, gk.block_bytes, gk.decl, &isa, host_f16())?
        .display()
        .to_string())
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
fn build(
    name: &'static str,
    block_bytes: usize,
    decl: Option<&'static BlockDecl>,
    isa: &OwnedTargetIsa,
    host_f16: bool,
) -> Result<Function, JitError> {
    if isa.pointer_type() != types::I64 {
        return Err(JitError::Not64Bit);
    }
    let sig = signature(isa);
    let cfg = isa.frontend_config();
    // x86's byte shuffle (SSSE3) where the host has it; Cranelift's `swizzle`
    // elsewhere.
    let pshufb = isa.name() == "x64"
        && isa
            .isa_flags()
            .iter()
            .any(|f| f.name == "has_ssse3" && f.as_bool() == Some(true));
    match decl {
        Some(d) => lower::declared(d, sig, cfg, pshufb),
        None => plain::plain(name, block_bytes, sig, cfg, pshufb, host_f16),
    }
}

fn codegen(stage: Stage, e: impl core::fmt::Display) -> JitError {
    JitError::Codegen {
        stage,
        message: e.to_string(),
    }
}

/// True when F16 tensors are widened by the host's F16C
/// ([`host_f16::widen`](crate::host_f16::widen)): an x86-64 CPU with AVX2 and F16C
/// (the check the linear JIT's f16 tables use; false off x86-64).
fn host_f16() -> bool {
    dq_runtime::arch::f16_convert()
}

/// Builds, verifies (debug builds), compiles and finalizes one type.
fn compile(
    name: &'static str,
    block_bytes: usize,
    block_elems: usize,
    decl: Option<&'static BlockDecl>,
    host_f16: bool,
) -> Result<BlockJit, JitError> {
    let t0 = Instant::now();
    let isa = host_isa()?;
    let func = build(name, block_bytes, decl, &isa, host_f16)?;
    if cfg!(debug_assertions) {
        verify_function(&func, &*isa).map_err(|e| JitError::Verifier {
            message: e.to_string(),
        })?;
    }
    let mut module = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
    let id = module
        .declare_function("dq_block", Linkage::Local, &func.signature)
        .map_err(|e| codegen(Stage::Declare, e))?;
    let mut ctx = Context::for_function(func);
    ctx.set_disasm(std::env::var_os("DQ_JIT_DISASM").is_some());
    module
        .define_function(id, &mut ctx)
        .map_err(|e| codegen(Stage::Define, format_args!("{e:?}")))?;
    let code = ctx.compiled_code();
    if let Some(v) = code.and_then(|c| c.vcode.as_ref()) {
        eprintln!("{name}:\n{v}");
    }
    let code_bytes = code.map_or(0, |c| c.code_info().total_size as usize);
    module
        .finalize_definitions()
        .map_err(|e| codegen(Stage::Finalize, e))?;
    let ptr = module.get_finalized_function(id);
    // The code stays mapped for the process: block kernels are cached forever
    // (one per type), so the module is never freed.
    core::mem::forget(module);
    // SAFETY: `ptr` is the finalized entry of a function with exactly the
    // `BlockFn` signature (see `signature`), whose module is never freed.
    let func = unsafe { core::mem::transmute::<*const u8, BlockFn>(ptr) };
    Ok(BlockJit {
        name,
        block_bytes,
        block_elems,
        code_bytes,
        compile_ns: t0.elapsed().as_nanos() as u64,
        func,
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
            let k = compile("F16", 2, 1, None, host).unwrap();
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
