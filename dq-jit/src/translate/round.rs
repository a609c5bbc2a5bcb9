//! Results to dst bits and their stores: f32 with NaNs quieted, f64, and the
//! integer round-to-nearest-even of bf16 and f16 (for tables in a loop over the
//! stack slot); and f16 scales to f32.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{AbiParam, InstBuilder, Signature, Type, Value, types};
use cranelift_codegen::isa::CallConv;
use dq_runtime::DType;

use super::{Translator, lanes, mem};
use crate::lane_math::LaneMath;
use cranelift_frontend::FunctionBuilder;

/// Writes the f16 bits (nearest-even, NaNs quieted as F16C does: the rounding of
/// [`LaneMath::round_f16`]) of the 16 f32 in `xmm0..xmm3` (four each, in order)
/// to the 32 bytes at `rdi`, with the host's conversion instructions; kernels
/// call it once per 4-bit table (or 16 times per 8-bit one).
///
/// It is called under Cranelift's `preserve_all` convention, so it changes no
/// register: the two it works in are saved on the stack and restored (their
/// upper halves, which Cranelift's 128-bit code never uses, are cleared). The
/// caller then keeps its vectors in registers across the call, and its 16-byte
/// loads of the result find 16-byte stores (no store-forwarding stall).
///
/// Only called by JIT code, with `rdi` valid for writing 32 bytes, on a CPU with
/// AVX and F16C ([`Spec::f16_tables`](crate::spec::Spec::f16_tables) requires
/// them).
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
/// ([`Spec::f16_tables`](crate::spec::Spec::f16_tables) requires F16C).
#[cfg(not(target_arch = "x86_64"))]
unsafe extern "C" fn f16_of_16() {
    unreachable!("f16 tables are x86-64 only")
}

impl<'a, 'f> Translator<'a, 'f> {
    /// The byte address of output element `dof` (in elements of the kernel's
    /// output, [`Spec::out_bytes`](crate::spec::Spec::out_bytes) each).
    pub(super) fn dst_addr(&mut self, dof: Value) -> Value {
        let off = self.mul_imm(dof, self.spec.out_bytes() as i64);
        self.add(self.dst, off)
    }

    /// Result `y` (the work float) stored as output element `dof`.
    pub(super) fn store_scalar(&mut self, dof: Value, y: Value) {
        let addr = self.dst_addr(dof);
        match self.spec.out() {
            DType::F64 if self.an.quiet => {
                let x = self.b.ins().bitcast(types::I64, lanes(), y);
                self.b.ins().store(mem(), x, addr, 0);
            }
            DType::F64 => {
                let x = self.b.ins().bitcast(types::I64, lanes(), y);
                let q = self.b.ins().bor_imm_s(x, 0x0008_0000_0000_0000);
                let nan = self.b.ins().fcmp(FloatCC::Unordered, y, y);
                let x = self.b.ins().select(nan, q, x);
                self.b.ins().store(mem(), x, addr, 0);
            }
            DType::F32 => {
                let x = self.f32_bits(y);
                self.b.ins().store(mem(), x, addr, 0);
            }
            _ => {
                let x = self.round_16(y);
                self.b.ins().istore16(mem(), x, addr, 0);
            }
        }
    }

    /// 16 results at dst byte address `addr` (contiguous).
    pub(super) fn store_vec_at(&mut self, addr: Value, ys: [Value; 4]) {
        if self.spec.out() == DType::F32 {
            for (k, y) in ys.into_iter().enumerate() {
                let x = self.f32_bits(y);
                self.b.ins().store(mem(), x, addr, 16 * k as i32);
            }
            return;
        }
        let h: Vec<Value> = ys.into_iter().map(|y| self.round_16(y)).collect();
        for k in 0..2 {
            let packed = self.b.ins().unarrow(h[2 * k], h[2 * k + 1]);
            self.b.ins().store(mem(), packed, addr, 16 * k as i32);
        }
    }

    /// f32 (scalar or F32X4) to its bits with NaNs quieted (a no-op when the
    /// analysis proved the result is never a signalling NaN).
    pub(super) fn f32_bits(&mut self, y: Value) -> Value {
        let ty = self.b.func.dfg.value_type(y).as_int();
        let x = self.b.ins().bitcast(ty, lanes(), y);
        if self.an.quiet {
            return x;
        }
        let q = self.or_c(x, 0x0040_0000);
        let nan = self.b.ins().fcmp(FloatCC::Unordered, y, y);
        self.sel(nan, q, x)
    }

    /// f32 (scalar or F32X4) to f16/bf16 bits in the low half of each I32 lane.
    pub(super) fn round_16(&mut self, y: Value) -> Value {
        if self.spec.dst == DType::BF16 {
            self.round_bf16(y, self.an.plain_bf16)
        } else {
            self.round_f16(y)
        }
    }

    /// [`LaneMath::round_f16`] of four F32X4, by a loop over the stack
    /// slot: one copy of the rounding code instead of four (compile time).
    pub(super) fn round_f16_looped(&mut self, ys: [Value; 4]) -> Vec<Value> {
        let addr = self.table_slot();
        for (k, &y) in ys.iter().enumerate() {
            self.b.ins().store(mem(), y, addr, 16 * k as i32);
        }
        let end = self.add_imm(addr, 64);
        let (body, done) = (self.b.create_block(), self.b.create_block());
        let p = self.b.append_block_param(body, types::I64);
        self.b.ins().jump(body, &[addr.into()]);
        self.b.switch_to_block(body);
        let y = self.b.ins().load(types::F32X4, mem(), p, 0);
        let h = self.local_consts(|t| t.round_f16(y));
        self.b.ins().store(mem(), h, p, 0);
        let pn = self.add_imm(p, 16);
        let more = self.b.ins().icmp(IntCC::UnsignedLessThan, pn, end);
        self.b.ins().brif(more, body, &[pn.into()], done, &[]);
        self.b.switch_to_block(done);
        (0..4)
            .map(|k| self.b.ins().load(types::I32X4, mem(), addr, 16 * k))
            .collect()
    }

    /// f16 bits of four F32X4 (16 values) by the host's F16C conversion, called
    /// through [`f16_of_16`]: two I16X8 of the 16 f16 in order. Only under
    /// [`Spec::f16_tables`](crate::spec::Spec::f16_tables).
    pub(super) fn round_f16_host(&mut self, ys: [Value; 4]) -> Vec<Value> {
        let slot = self.table_slot();
        let out = self.add_imm(slot, 64);
        let mut sig = Signature::new(CallConv::PreserveAll);
        sig.params = vec![AbiParam::new(types::I64)];
        sig.params.extend([AbiParam::new(types::F32X4); 4]);
        let sig = self.b.import_signature(sig);
        let f: unsafe extern "C" fn() = f16_of_16;
        let callee = self.b.ins().iconst(types::I64, f as usize as i64);
        let mut args = vec![out];
        args.extend(ys);
        self.b.ins().call_indirect(sig, callee, &args);
        (0..2)
            .map(|k| self.b.ins().load(types::I16X8, mem(), out, 16 * k))
            .collect()
    }
}

impl<'f> LaneMath<'f> for Translator<'_, 'f> {
    fn fb(&mut self) -> &mut FunctionBuilder<'f> {
        &mut self.b
    }

    fn splat(&mut self, ty: Type, bits: u32) -> Value {
        self.vconst(ty, u64::from(bits))
    }
}
