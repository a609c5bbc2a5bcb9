//! Non-temporal stores of whole cache lines, called from JIT code: Cranelift has
//! no non-temporal store. A linear's 16-bit output is written once and not read
//! back, so streaming its lines past the caches saves reading each line before
//! writing it: on AMD EPYC Zen 4 GPTQ and AWQ into a 64-byte aligned output ran
//! markedly faster (BENCHMARKS.md). Lines that do not start on a 64-byte
//! boundary would each cost two partial line writes (measured much slower), so
//! the functions stream only whole, aligned lines.

use cranelift_codegen::ir::Value;
use cranelift_frontend::FunctionBuilder;

/// Emits a call that writes the four I8X16 of `v`, in order, to the 64 bytes at
/// `a` with non-temporal stores. The emitting code guarantees that `a` is
/// 64-byte aligned and the line is inside the output.
pub(crate) fn line(b: &mut FunctionBuilder<'_>, a: Value, v: [Value; 4]) {
    let mut args = vec![a];
    args.extend(v);
    crate::host_f16::call(b, stream_line, &args);
}

/// `movntdq` of `xmm0..xmm3` to the 64 bytes at `rdi`. Called under
/// `preserve_all`; it changes no register.
///
/// Only called by JIT code, with `rdi` 64-byte aligned and valid for writing 64
/// bytes; the caller orders the stores with `sfence` before the output is read.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
unsafe extern "C" fn stream_line() {
    core::arch::naked_asm!(
        "movntdq [rdi], xmm0",
        "movntdq [rdi + 16], xmm1",
        "movntdq [rdi + 32], xmm2",
        "movntdq [rdi + 48], xmm3",
        "ret",
    )
}

/// [`stream_line`] off x86-64, where no linear function is compiled.
#[cfg(not(target_arch = "x86_64"))]
unsafe extern "C" fn stream_line() {
    unreachable!("the linear JIT is x86-64 only")
}
