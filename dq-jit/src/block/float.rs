//! f16 -> f32 widening as gguf-py does it (`.astype(np.float32)`): exact, a NaN
//! keeps its payload and its signalling bit (a hardware conversion would quiet
//! it), as `dq_runtime::convert::f16_to_f32`. Scalar (I32 in, F32 out) with a
//! fast path for normals, or four lanes (I32X4 in, F32X4 out) by
//! [`LaneMath::widen_f16`].

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, Type, Value, types};
use cranelift_frontend::FunctionBuilder;

use super::lanes;
use super::lower::Emit;
use crate::lane_math::{Bin, LaneMath};

impl Emit<'_> {
    /// The f32 of the f16 bits in the low half of `h` (upper bits zero): I32 -> F32
    /// or I32X4 -> F32X4.
    pub(super) fn f16_to_f32(&mut self, h: Value) -> Value {
        let ty = self.b.func.dfg.value_type(h);
        if !ty.is_vector() {
            return self.f16_to_f32_branchy(h);
        }
        self.widen_f16(h, ty, false)
    }

    /// Scalar [`f16_to_f32`](Self::f16_to_f32) with a branch: a normal f16 (the
    /// common case: a block's scale) takes five integer steps; the rest (zero,
    /// subnormal, infinity, NaN) goes to a cold block with every case's code.
    fn f16_to_f32_branchy(&mut self, h: Value) -> Value {
        let (normal, rest, done) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.set_cold_block(rest);
        let r = self.b.append_block_param(done, types::F32);
        // Normal: 0x0400 <= em < 0x7C00, one unsigned compare of em - 0x0400.
        let em = self.bin_c(Bin::And, h, 0x7FFF);
        let off = self.b.ins().iadd_imm_s(em, -0x0400);
        let is_normal = self
            .b
            .ins()
            .icmp_imm_s(IntCC::UnsignedLessThan, off, 0x7800);
        self.b.ins().brif(is_normal, normal, &[], rest, &[]);
        self.b.switch_to_block(normal);
        let sign = self.bin_c(Bin::And, h, 0x8000);
        let sign = self.shift(sign, true, 16);
        let t = self.shift(em, true, 13);
        let t = self.b.ins().iadd_imm_s(t, (127 - 15) << 23);
        let bits = self.b.ins().bor(sign, t);
        let y = self.b.ins().bitcast(types::F32, lanes(), bits);
        self.b.ins().jump(done, &[y.into()]);
        self.b.switch_to_block(rest);
        let y = self.widen_f16(h, types::I32, false);
        self.b.ins().jump(done, &[y.into()]);
        self.b.switch_to_block(done);
        r
    }
}

impl<'f> LaneMath<'f> for Emit<'f> {
    fn fb(&mut self) -> &mut FunctionBuilder<'f> {
        &mut self.b
    }

    fn splat(&mut self, ty: Type, bits: u32) -> Value {
        self.splat_c(ty, u64::from(bits))
    }
}
