//! Compiling to machine code, the one path of every JIT kind: build IR -> verify
//! -> define -> finalize ([`compile`]).
//!
//! Every kernel gets its own `JITModule`, so evicting it from the cache can free
//! exactly its code memory.

use std::cell::RefCell;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use cranelift_codegen::ir::{AbiParam, Function, Signature, UserFuncName, types};
use cranelift_codegen::isa::{CallConv, OwnedTargetIsa};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::{Context, verify_function};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{Linkage, Module, default_libcall_names};

use crate::error::{JitError, Stage};
use crate::spec::{Spec, analyse};
use crate::translate::{Lut, Translator};

/// The compiled function: computes logical elements `start..end`, reading
/// scales as [`Spec::scale_type`] values and storing [`Spec::out`] elements
/// (a kernel's [`CompiledKernel::spec`](crate::CompiledKernel::spec) says which).
pub type KernelFn = unsafe extern "C" fn(
    src: *const u8,
    scales: *const u8,
    zps: *const u8,
    dst: *mut u8,
    start: usize,
    end: usize,
);

/// The host ISA, detected once.
///
/// # Errors
/// [`JitError::UnsupportedHost`] when Cranelift does not support the host.
pub fn host_isa() -> Result<OwnedTargetIsa, JitError> {
    static ISA: OnceLock<Result<OwnedTargetIsa, JitError>> = OnceLock::new();
    ISA.get_or_init(|| {
        let mut flags = settings::builder();
        for (k, v) in [
            // The translator emits clean IR (constants hoisted, addresses carried
            // as loop parameters), so the e-graph pass would add compile time and
            // no speed; the backtracking allocator keeps hot loops free of spills.
            ("opt_level", "none"),
            ("regalloc_algorithm", "backtracking"),
            ("enable_verifier", "false"),
            ("use_colocated_libcalls", "false"),
            ("is_pic", "false"),
        ] {
            flags.set(k, v).map_err(|e| codegen(Stage::Settings, e))?;
        }
        let isa =
            cranelift_native::builder().map_err(|reason| JitError::UnsupportedHost { reason })?;
        isa.finish(settings::Flags::new(flags))
            .map_err(|e| codegen(Stage::Isa, e))
    })
    .clone()
}

thread_local! {
    /// Per-thread builder scratch, reused so a compile does not reallocate it.
    static FN_CTX: RefCell<FunctionBuilderContext> = RefCell::new(FunctionBuilderContext::new());
    /// Per-thread codegen context (its register-allocator state is reused).
    static CG_CTX: RefCell<Context> = RefCell::new(Context::new());
}

/// The kernel's signature under the host's C calling convention.
fn signature(isa: &OwnedTargetIsa) -> Signature {
    let ptr = isa.pointer_type();
    let mut sig = Signature::new(CallConv::triple_default(isa.triple()));
    for _ in 0..4 {
        sig.params.push(AbiParam::new(ptr));
    }
    sig.params.push(AbiParam::new(types::I64));
    sig.params.push(AbiParam::new(types::I64));
    sig
}

/// True when `isa` is x86-64 with SSSE3's byte shuffle (`x86_pshufb`), which
/// every JIT kind uses for 16-entry lookups where the host has it.
pub(crate) fn has_pshufb(isa: &OwnedTargetIsa) -> bool {
    isa.name() == "x64" && has_flag(isa, "has_ssse3")
}

/// True when `isa`'s flag `name` (`has_sse41`, ...) is set.
pub(crate) fn has_flag(isa: &OwnedTargetIsa, name: &str) -> bool {
    isa.isa_flags()
        .iter()
        .any(|f| f.name == name && f.as_bool() == Some(true))
}

/// The byte shuffle `isa` offers for 4-bit table lookups.
fn lut_of(isa: &OwnedTargetIsa) -> Lut {
    // aarch64 would use `swizzle` (`tbl`); off until it has run under
    // `scripts/aarch64-qemu.sh four_bit`.
    if has_pshufb(isa) {
        Lut::Pshufb
    } else {
        Lut::None
    }
}

/// A Cranelift failure at `stage`.
fn codegen(stage: Stage, e: impl core::fmt::Display) -> JitError {
    JitError::Codegen {
        stage,
        message: e.to_string(),
    }
}

/// Builds the IR of `spec` (not compiled) for `isa`.
///
/// # Errors
/// [`analyse`]'s refusal of the formula.
pub fn build_ir(spec: &Spec, isa: &OwnedTargetIsa) -> Result<Function, JitError> {
    let an = analyse(spec)?;
    let mut func = Function::with_name_signature(UserFuncName::default(), signature(isa));
    FN_CTX.with_borrow_mut(|fctx| {
        let b = FunctionBuilder::new(&mut func, fctx);
        Translator::translate(b, spec, an, isa.frontend_config(), lut_of(isa));
    });
    Ok(func)
}

/// The host ISA and the IR `build` makes for it (not compiled): the first step
/// of [`compile`], and what `clif`/`verify` show.
///
/// # Errors
/// [`JitError::UnsupportedHost`], [`JitError::Not64Bit`] on a 32-bit target, or
/// `build`'s error.
pub(crate) fn build(
    build: impl FnOnce(&OwnedTargetIsa) -> Result<Function, JitError>,
) -> Result<(OwnedTargetIsa, Function), JitError> {
    let isa = host_isa()?;
    if isa.pointer_type() != types::I64 {
        return Err(JitError::Not64Bit);
    }
    let func = build(&isa)?;
    Ok((isa, func))
}

/// Runs the Cranelift verifier on `func`.
///
/// # Errors
/// [`JitError::Verifier`] with its message.
pub(crate) fn verify(isa: &OwnedTargetIsa, func: &Function) -> Result<(), JitError> {
    verify_function(func, &**isa).map_err(|e| JitError::Verifier {
        message: e.to_string(),
    })
}

/// A compiled function and the module that owns its code.
pub struct Compiled {
    /// The entry point (valid while `module` lives), of the signature its IR
    /// was built with.
    entry: *const u8,
    /// Machine-code bytes.
    pub code_bytes: usize,
    /// Compile time in nanoseconds.
    pub compile_ns: u64,
    module: Mutex<Option<JITModule>>,
    on_free: Option<Arc<dyn Fn(usize) + Send + Sync>>,
}

impl Compiled {
    /// The entry point, of the signature its IR was built with (valid while
    /// `self` lives).
    pub(crate) fn entry(&self) -> *const u8 {
        self.entry
    }

    /// Sets the callback run with `code_bytes` when the code memory is freed.
    pub fn on_free(&mut self, f: Arc<dyn Fn(usize) + Send + Sync>) {
        self.on_free = Some(f);
    }
}

impl Drop for Compiled {
    fn drop(&mut self) {
        let m = self.module.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = m.take() {
            // SAFETY: the last reference to this kernel is going away, so no thread
            // can still call `entry`, the only pointer into the module's memory.
            unsafe { m.free_memory() };
        }
        if let Some(f) = &self.on_free {
            f(self.code_bytes);
        }
    }
}

// SAFETY: the module is only touched in `Drop` (behind a Mutex); the code it owns
// (`entry`) is immutable once finalized and may be called from any thread.
unsafe impl Send for Compiled {}
// SAFETY: as above.
unsafe impl Sync for Compiled {}

/// The one compile path of every JIT kind: [`build`] the IR for the host,
/// verify it (debug builds), then define and finalize it in its own module.
/// `label` names the function where `DQ_JIT_DISASM` prints its machine code
/// (see the crate docs).
///
/// # Errors
/// [`build`]'s, the verifier's, or Cranelift's.
pub(crate) fn compile(
    label: &str,
    build_ir: impl FnOnce(&OwnedTargetIsa) -> Result<Function, JitError>,
) -> Result<Compiled, JitError> {
    let t0 = Instant::now();
    let (isa, func) = build(build_ir)?;
    if cfg!(debug_assertions) {
        verify(&isa, &func)?;
    }
    let mut module = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
    let id = module
        .declare_function("dq_kernel", Linkage::Local, &func.signature)
        .map_err(|e| codegen(Stage::Declare, e))?;
    // The thread's codegen context is reused: its allocations (register
    // allocator state above all) survive from one compile to the next.
    let code_bytes = CG_CTX.with_borrow_mut(|ctx| {
        ctx.clear();
        ctx.func = func;
        ctx.set_disasm(disasm());
        module
            .define_function(id, ctx)
            .map_err(|e| codegen(Stage::Define, format_args!("{e:?}")))?;
        let code = ctx.compiled_code();
        if let Some(v) = code.and_then(|c| c.vcode.as_ref()) {
            eprintln!("{label}:\n{v}");
        }
        Ok::<_, JitError>(code.map_or(0, |c| c.code_info().total_size as usize))
    })?;
    module
        .finalize_definitions()
        .map_err(|e| codegen(Stage::Finalize, e))?;
    let entry = module.get_finalized_function(id);
    Ok(Compiled {
        entry,
        code_bytes,
        compile_ns: t0.elapsed().as_nanos() as u64,
        module: Mutex::new(Some(module)),
        on_free: None,
    })
}

/// True when `DQ_JIT_DISASM` is set: every compile then prints its machine code
/// to stderr. Read once, here only.
fn disasm() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("DQ_JIT_DISASM").is_some())
}
