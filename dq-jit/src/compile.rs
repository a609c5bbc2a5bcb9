//! Compiling one [`Spec`] to machine code: build IR -> verify -> define -> finalize.
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
/// (a kernel's [`Jit::spec`](crate::Jit::spec) says which).
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

/// The byte shuffle `isa` offers for 4-bit table lookups.
fn lut_of(isa: &OwnedTargetIsa) -> Lut {
    match isa.name() {
        "x64" => {
            let ssse3 = isa
                .isa_flags()
                .iter()
                .any(|f| f.name == "has_ssse3" && f.as_bool() == Some(true));
            if ssse3 { Lut::Pshufb } else { Lut::None }
        }
        // aarch64 would use `swizzle` (`tbl`); off until it has run under
        // `scripts/aarch64-qemu.sh four_bit`.
        _ => Lut::None,
    }
}

/// A Cranelift failure at `stage`.
fn codegen(stage: Stage, e: impl core::fmt::Display) -> JitError {
    JitError::Codegen {
        stage,
        message: e.to_string(),
    }
}

/// Builds the IR of `spec` (not compiled).
///
/// # Errors
/// [`JitError::Not64Bit`] on a 32-bit target, or [`analyse`]'s refusal of the formula.
pub fn build_ir(spec: &Spec, isa: &OwnedTargetIsa) -> Result<Function, JitError> {
    if isa.pointer_type() != types::I64 {
        return Err(JitError::Not64Bit);
    }
    let an = analyse(spec)?;
    let mut func = Function::with_name_signature(UserFuncName::default(), signature(isa));
    FN_CTX.with_borrow_mut(|fctx| {
        let b = FunctionBuilder::new(&mut func, fctx);
        Translator::translate(b, spec, an, isa.frontend_config(), lut_of(isa));
    });
    Ok(func)
}

/// A compiled kernel and the module that owns its code.
pub struct Compiled {
    /// The entry point (valid while `module` lives).
    pub func: KernelFn,
    /// Machine-code bytes.
    pub code_bytes: usize,
    /// Compile time in nanoseconds.
    pub compile_ns: u64,
    module: Mutex<Option<JITModule>>,
    on_free: Option<Arc<dyn Fn(usize) + Send + Sync>>,
}

impl Compiled {
    /// The entry point as a raw pointer (for functions of another signature
    /// than [`KernelFn`]; valid while `self` lives).
    pub(crate) fn raw(&self) -> *const u8 {
        self.func as *const u8
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
            // can still call `func`, the only pointer into the module's memory.
            unsafe { m.free_memory() };
        }
        if let Some(f) = &self.on_free {
            f(self.code_bytes);
        }
    }
}

// SAFETY: the module is only touched in `Drop` (behind a Mutex); the code it owns
// is immutable once finalized and may be called from any thread.
unsafe impl Send for Compiled {}
// SAFETY: as above.
unsafe impl Sync for Compiled {}

/// Compiles `spec`; `verify` runs the Cranelift verifier on the IR first.
///
/// # Errors
/// The IR was refused ([`build_ir`], the verifier), or Cranelift failed.
pub fn compile(spec: &Spec, verify: bool) -> Result<Compiled, JitError> {
    let t0 = Instant::now();
    let isa = host_isa()?;
    let func = build_ir(spec, &isa)?;
    compile_function(func, isa, verify, t0)
}

/// Compiles a built function (its own signature) into its own module; `verify`
/// runs the Cranelift verifier first. `t0`: when the compile began (for
/// [`Compiled::compile_ns`]). The entry is typed [`KernelFn`]; a caller with
/// another signature takes [`Compiled::raw`].
///
/// # Errors
/// The verifier refused the IR, or Cranelift failed.
pub(crate) fn compile_function(
    func: Function,
    isa: OwnedTargetIsa,
    verify: bool,
    t0: Instant,
) -> Result<Compiled, JitError> {
    if verify {
        verify_function(&func, &*isa).map_err(|e| JitError::Verifier {
            message: e.to_string(),
        })?;
    }
    let mut module = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
    let id = module
        .declare_function("dq_kernel", Linkage::Local, &func.signature)
        .map_err(|e| codegen(Stage::Declare, e))?;
    let disasm = std::env::var_os("DQ_JIT_DISASM").is_some();
    // The thread's codegen context is reused: its allocations (register
    // allocator state above all) survive from one compile to the next.
    let code_bytes = CG_CTX.with_borrow_mut(|ctx| {
        ctx.clear();
        ctx.func = func;
        ctx.set_disasm(disasm);
        module
            .define_function(id, ctx)
            .map_err(|e| codegen(Stage::Define, format_args!("{e:?}")))?;
        let code = ctx.compiled_code();
        if let Some(v) = code.and_then(|c| c.vcode.as_ref()) {
            eprintln!("{v}");
        }
        Ok::<_, JitError>(code.map_or(0, |c| c.code_info().total_size as usize))
    })?;
    module
        .finalize_definitions()
        .map_err(|e| codegen(Stage::Finalize, e))?;
    let ptr = module.get_finalized_function(id);
    // SAFETY: `ptr` is the finalized entry of the function, kept alive by `module`
    // below. Built by `compile` it has exactly the `KernelFn` signature (see
    // `signature`); other callers never call `func` and cast `raw()` back to the
    // signature they built (a transmute of a pointer calls nothing).
    let func = unsafe { core::mem::transmute::<*const u8, KernelFn>(ptr) };
    Ok(Compiled {
        func,
        code_bytes,
        compile_ns: t0.elapsed().as_nanos() as u64,
        module: Mutex::new(Some(module)),
        on_free: None,
    })
}
