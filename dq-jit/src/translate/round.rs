//! Results to dst bits and their stores: f32 with NaNs quieted, f64, and the
//! integer round-to-nearest-even of bf16 and f16 (for tables in a loop over the
//! stack slot); and f16 scales to f32.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{InstBuilder, Type, Value, types};
use dq_runtime::DType;

use super::{Translator, lanes, mem};
use crate::host_f16;
use crate::lane_math::LaneMath;
use cranelift_frontend::FunctionBuilder;

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
        self.pick(nan, q, x)
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
    /// through [`host_f16`]: two I16X8 of the 16 f16 in order. Only under
    /// [`Spec::f16_tables`](crate::spec::Spec::f16_tables()).
    pub(super) fn round_f16_host(&mut self, ys: [Value; 4]) -> Vec<Value> {
        let slot = self.table_slot();
        let out = self.add_imm(slot, 64);
        host_f16::round(&mut self.b, out, ys).to_vec()
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
