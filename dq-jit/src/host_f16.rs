//! f16 <-> f32 by the host's F16C instructions, called from JIT code: Cranelift
//! has no f16 conversion, and rounding in integer code costs about 25
//! instructions a vector. Kernels and linear functions round their 16-entry
//! tables (and 256-entry byte tables, 16 at a time) this way where the host has
//! F16C ([`dq_runtime::arch::f16_convert`]); GGUF's F16 tensors are widened this
//! way, 32 elements a call ([`widen`]).
//!
//! Also the two ways JIT code calls the host: [`call_c`], an ordinary call, and
//! [`call`], a call of a naked helper that changes no register.

use cranelift_codegen::ir::{AbiParam, InstBuilder, Signature, Value, types};
use cranelift_codegen::isa::CallConv;
use cranelift_frontend::FunctionBuilder;

use crate::translate::{lanes, mem};

/// Emits a call that writes the f16 bits of the 16 f32 of `ys` (four F32X4, in
/// order) to the 32 bytes at `out`: nearest-even, NaNs quieted as F16C does (the
/// rounding of [`LaneMath::round_f16`](crate::lane_math::LaneMath::round_f16)).
/// Returns them loaded back as two I16X8 (from 8-byte loads: those find the
/// helper's 8-byte stores, no store-forwarding stall). The emitting code
/// guarantees `out` is writable for 32 bytes and that the host has AVX and F16C.
///
/// A naked helper: once per table, in code that keeps its vectors in registers
/// across the call, it measured markedly faster than an ordinary call, whose
/// convention makes the caller save every vector register (BENCHMARKS.md).
pub(crate) fn round(b: &mut FunctionBuilder<'_>, out: Value, ys: [Value; 4]) -> [Value; 2] {
    let mut args = vec![out];
    args.extend(ys);
    call(b, f16_of_16, &args);
    [0, 16].map(|at| {
        let lo = b.ins().load(types::I64, mem(), out, at);
        let hi = b.ins().load(types::I64, mem(), out, at + 8);
        let v = b.ins().scalar_to_vector(types::I64X2, lo);
        let v = b.ins().insertlane(v, hi, 1);
        b.ins().bitcast(types::I16X8, lanes(), v)
    })
}

/// Emits a call of the naked helper `f` under Cranelift's `preserve_all`
/// convention (it changes no register: `dq-jit`'s register test holds every
/// vector and mask register across each naked helper), with `args` as its
/// parameters.
pub(crate) fn call(b: &mut FunctionBuilder<'_>, f: unsafe extern "C" fn(), args: &[Value]) {
    call_as(b, CallConv::PreserveAll, f as *const u8, args);
}

/// Emits an ordinary call of the `extern "C"` function at `f` (the kernel's own
/// convention, the platform's C one), with the integer or pointer `args`.
pub(crate) fn call_c(b: &mut FunctionBuilder<'_>, f: *const u8, args: &[Value]) {
    let conv = b.func.signature.call_conv;
    call_as(b, conv, f, args);
}

/// Emits an indirect call of the code at `f` under `conv`, with `args`.
fn call_as(b: &mut FunctionBuilder<'_>, conv: CallConv, f: *const u8, args: &[Value]) {
    let mut sig = Signature::new(conv);
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
/// An ordinary call, 32 elements at a time: on AMD EPYC Zen 4 it runs F16 -> f32
/// faster than the generated backend in cache and level with it from memory,
/// faster than a naked helper, where the integer widening in four F32X4 lanes
/// (about 15 instructions a vector) was markedly slower (BENCHMARKS.md).
pub(crate) fn widen(b: &mut FunctionBuilder<'_>, src: Value, out: Value) {
    call_c(b, f32_of_32 as *const u8, &[src, out]);
}

/// Widens the 32 f16 at `src` to the 32 f32 at `out` with F16C, then clears the
/// quiet bit F16C set in the lanes whose input was a signalling NaN (a NaN
/// result whose input had bit 9, f16's quiet bit, clear).
///
/// # Safety
/// `src` is valid for reading 64 bytes and `out` for writing 128; the CPU has
/// AVX2 and F16C. Only JIT code calls it, as [`widen`] says.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
unsafe extern "C" fn f32_of_32(src: *const u8, out: *mut u8) {
    use core::arch::x86_64::*;
    let quiet = _mm256_set1_epi32(0x0040_0000);
    for k in 0..4 {
        // SAFETY: 16 of the 64 readable bytes at `src`, 32 of the 128 writable
        // at `out` (the caller's promise).
        unsafe {
            let h = _mm_loadu_si128(src.add(16 * k).cast());
            let y = _mm256_castps_si256(_mm256_cvtph_ps(h));
            // The input's quiet bit at f32's (bit 22); where that is clear in a
            // NaN lane, F16C's quiet bit is cleared again.
            let q = _mm256_slli_epi32::<13>(_mm256_cvtepu16_epi32(h));
            let nan = _mm256_cmpgt_epi32(
                _mm256_and_si256(y, _mm256_set1_epi32(0x7fff_ffff)),
                _mm256_set1_epi32(0x7f80_0000),
            );
            let fix = _mm256_and_si256(_mm256_andnot_si256(q, quiet), nan);
            _mm256_storeu_si256(out.add(32 * k).cast(), _mm256_xor_si256(y, fix));
        }
    }
}

/// [`f32_of_32`] off x86-64, where no kernel widens through the host (emitters
/// call [`widen`] only where the host has F16C).
#[cfg(not(target_arch = "x86_64"))]
unsafe extern "C" fn f32_of_32(_: *const u8, _: *mut u8) {
    unreachable!("host f16 widening is x86-64 only")
}

/// Writes the f16 bits (as [`round`] says) of the 16 f32 in `xmm0..xmm3` (four
/// each, in order) to the 32 bytes at `rdi`, 8 bytes from each register.
///
/// It is called under Cranelift's `preserve_all` convention and changes no
/// register (it converts straight to memory); the caller then keeps its
/// vectors in registers across the call.
///
/// Only called by JIT code, with `rdi` valid for writing 32 bytes, on a CPU with
/// AVX and F16C.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
unsafe extern "C" fn f16_of_16() {
    core::arch::naked_asm!(
        "vcvtps2ph qword ptr [rdi], xmm0, 0",
        "vcvtps2ph qword ptr [rdi + 8], xmm1, 0",
        "vcvtps2ph qword ptr [rdi + 16], xmm2, 0",
        "vcvtps2ph qword ptr [rdi + 24], xmm3, 0",
        "ret",
    )
}

/// [`f16_of_16`] off x86-64, where no kernel has f16 tables
/// (emitters call [`round`] only where the host has F16C).
#[cfg(not(target_arch = "x86_64"))]
unsafe extern "C" fn f16_of_16() {
    unreachable!("f16 tables are x86-64 only")
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use crate::host_store::regs::{Regs, available, call_holding};

    /// [`f16_of_16`](super::f16_of_16) writes the f16 of `xmm0..xmm3`'s 16 f32
    /// (F16C's rounding, as `half`'s) and changes no vector or mask register.
    #[test]
    fn f16_of_16_changes_no_register() {
        if !available("f16_of_16's register test") {
            return;
        }
        let mut out = [0u16; 16];
        let before = Regs::pattern();
        let dst = out.as_mut_ptr();
        let after = call_holding!(super::f16_of_16, &before, (dst, 0usize, 0usize));
        after.check(&before, "f16_of_16");
        let want: Vec<u16> = (0..4)
            .flat_map(|x| {
                before.z[x][..2]
                    .iter()
                    .flat_map(|q| [*q as u32, (q >> 32) as u32])
            })
            .map(|e| half::f16::from_f32(f32::from_bits(e)).to_bits())
            .collect();
        assert_eq!(out.to_vec(), want);
    }
}
