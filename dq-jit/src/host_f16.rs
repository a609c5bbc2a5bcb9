//! f16 <-> f32 by the host's F16C instructions, called from JIT code: Cranelift
//! has no f16 conversion, and rounding in integer code costs about 25
//! instructions a vector. Kernels and linear functions round their 16-entry
//! tables (and 256-entry byte tables, 16 at a time) this way where the host has
//! F16C ([`dq_runtime::arch::f16_convert`]); GGUF's F16 tensors are widened this
//! way, 32 elements a call ([`widen`]).

use cranelift_codegen::ir::{AbiParam, InstBuilder, Signature, Value, types};
use cranelift_codegen::isa::CallConv;
use cranelift_frontend::FunctionBuilder;

use crate::translate::mem;

/// Emits a call that writes the f16 bits of the 16 f32 of `ys` (four F32X4, in
/// order) to the 32 bytes at `out`: nearest-even, NaNs quieted as F16C does (the
/// rounding of [`LaneMath::round_f16`](crate::lane_math::LaneMath::round_f16)).
/// Returns them loaded back as two I16X8 (16-byte halves: those find the
/// helper's 16-byte stores, no store-forwarding stall). The emitting code
/// guarantees `out` is writable for 32 bytes and that the host has AVX and F16C.
pub(crate) fn round(b: &mut FunctionBuilder<'_>, out: Value, ys: [Value; 4]) -> [Value; 2] {
    let mut args = vec![out];
    args.extend(ys);
    call(b, f16_of_16, &args);
    [0, 16].map(|at| b.ins().load(types::I16X8, mem(), out, at))
}

/// Emits a call of the naked helper `f` under Cranelift's `preserve_all`
/// convention (it changes no register), with `args` as its parameters.
pub(crate) fn call(b: &mut FunctionBuilder<'_>, f: unsafe extern "C" fn(), args: &[Value]) {
    let mut sig = Signature::new(CallConv::PreserveAll);
    sig.params = args
        .iter()
        .map(|&a| AbiParam::new(b.func.dfg.value_type(a)))
        .collect();
    let sig = b.import_signature(sig);
    let callee = b.ins().iconst(types::I64, f as usize as i64);
    b.ins().call_indirect(sig, callee, args);
}

/// Elements a call of [`widen`] converts.
pub(crate) const WIDEN: i64 = 32;

/// Emits a call that widens the 32 f16 at `src` to the 32 f32 at `out`, exactly,
/// a signalling NaN staying signalling (gguf-py's bits, those of
/// [`dq_runtime::block::f16_to_f32`]; F16C alone would quiet it). The emitting
/// code guarantees `src` readable for 64 bytes, `out` writable for 128 and that
/// the host has AVX2 and F16C.
///
/// Measured on AMD EPYC Zen 4 (`cargo run --release -p dq-jit --example
/// block_speed`): this call, 32 elements at a time, runs F16 -> f32 as fast as
/// the generated backend or faster, in cache and from memory, where the integer
/// widening in four F32X4 lanes (about 15 instructions a vector) and 16 a call
/// were slower (BENCHMARKS.md).
pub(crate) fn widen(b: &mut FunctionBuilder<'_>, src: Value, out: Value) {
    call(b, f32_of_32, &[src, out]);
}

/// Asm widening the 8 f16 at `rdi + SRC` to the 8 f32 at `rsi + DST`, with
/// `ymm2` holding f32's quiet bit in every lane; uses `ymm0`, `ymm1` and `ymm3`.
#[cfg(target_arch = "x86_64")]
#[rustfmt::skip]
macro_rules! widen8 {
    ($src:literal, $dst:literal) => {
        concat!(
            "vcvtph2ps ymm0, [rdi + ", $src, "]\n",
            "vpmovzxwd ymm1, [rdi + ", $src, "]\n",
            // The input's quiet bit (f16 bit 9) at f32's (bit 22); where that is
            // clear in a NaN lane, F16C's quiet bit is cleared again.
            "vpslld ymm1, ymm1, 13\n",
            "vpandn ymm1, ymm1, ymm2\n",
            "vcmpunordps ymm3, ymm0, ymm0\n",
            "vpand ymm1, ymm1, ymm3\n",
            "vpxor ymm0, ymm0, ymm1\n",
            "vmovups [rsi + ", $dst, "], ymm0",
        )
    };
}

/// Widens the 32 f16 at `rdi` to the 32 f32 at `rsi` with F16C, then clears the
/// quiet bit F16C set in the lanes whose input was a signalling NaN (a NaN result
/// whose input had bit 9 clear).
///
/// Called under `preserve_all` (see [`f16_of_16`]): the four registers it works
/// in are saved and restored, their upper halves cleared.
///
/// Only called by JIT code, with `rdi` valid for reading 64 bytes and `rsi` for
/// writing 128, on a CPU with AVX2 and F16C.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
unsafe extern "C" fn f32_of_32() {
    core::arch::naked_asm!(
        "sub rsp, 64",
        "vmovdqu [rsp], xmm0",
        "vmovdqu [rsp + 16], xmm1",
        "vmovdqu [rsp + 32], xmm2",
        "vmovdqu [rsp + 48], xmm3",
        // 0x0040_0000 (f32's quiet bit) in every lane.
        "vpcmpeqd ymm2, ymm2, ymm2",
        "vpsrld ymm2, ymm2, 31",
        "vpslld ymm2, ymm2, 22",
        widen8!("0", "0"),
        widen8!("16", "32"),
        widen8!("32", "64"),
        widen8!("48", "96"),
        "vmovdqu xmm0, [rsp]",
        "vmovdqu xmm1, [rsp + 16]",
        "vmovdqu xmm2, [rsp + 32]",
        "vmovdqu xmm3, [rsp + 48]",
        "add rsp, 64",
        "ret",
    )
}

/// [`f32_of_32`] off x86-64, where no kernel widens through the host (emitters
/// call [`widen`] only where the host has F16C).
#[cfg(not(target_arch = "x86_64"))]
unsafe extern "C" fn f32_of_32() {
    unreachable!("host f16 widening is x86-64 only")
}

/// Writes the f16 bits (as [`round`] says) of the 16 f32 in `xmm0..xmm3` (four
/// each, in order) to the 32 bytes at `rdi`, with the host's conversion
/// instructions.
///
/// It is called under Cranelift's `preserve_all` convention, so it changes no
/// register: the two it works in are saved on the stack and restored (their
/// upper halves, which Cranelift's 128-bit code never uses, are cleared). The
/// caller then keeps its vectors in registers across the call, and its 16-byte
/// loads of the result find 16-byte stores (no store-forwarding stall).
///
/// Only called by JIT code, with `rdi` valid for writing 32 bytes, on a CPU with
/// AVX and F16C.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
unsafe extern "C" fn f16_of_16() {
    core::arch::naked_asm!(
        "sub rsp, 32",
        "vmovdqu [rsp], xmm4",
        "vmovdqu [rsp + 16], xmm5",
        "vcvtps2ph xmm4, xmm0, 0",
        "vcvtps2ph xmm5, xmm1, 0",
        "vpunpcklqdq xmm4, xmm4, xmm5",
        "vmovdqu [rdi], xmm4",
        "vcvtps2ph xmm4, xmm2, 0",
        "vcvtps2ph xmm5, xmm3, 0",
        "vpunpcklqdq xmm4, xmm4, xmm5",
        "vmovdqu [rdi + 16], xmm4",
        "vmovdqu xmm4, [rsp]",
        "vmovdqu xmm5, [rsp + 16]",
        "add rsp, 32",
        "ret",
    )
}

/// [`f16_of_16`] off x86-64, where no kernel has f16 tables
/// (emitters call [`round`] only where the host has F16C).
#[cfg(not(target_arch = "x86_64"))]
unsafe extern "C" fn f16_of_16() {
    unreachable!("f16 tables are x86-64 only")
}
