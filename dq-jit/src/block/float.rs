//! f16 -> f32 widening as gguf-py does it (`.astype(np.float32)`), by integer code:
//! exact, a NaN keeps its payload and its signalling bit (a hardware conversion
//! would quiet it). The same steps as `dq_runtime::block::f16_to_f32`, scalar (I32
//! in, F32 out) or four lanes (I32X4 in, F32X4 out).

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, Value, types};

use super::lanes;
use super::lower::Emit;

impl Emit<'_> {
    /// The f32 of the f16 bits in the low half of `h` (upper bits zero): I32 -> F32
    /// or I32X4 -> F32X4.
    pub(super) fn f16_to_f32(&mut self, h: Value) -> Value {
        let ty = self.b.func.dfg.value_type(h);
        if !ty.is_vector() {
            return self.f16_to_f32_branchy(h);
        }
        self.f16_to_f32_any(h)
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
        let em = self.and_k(h, 0x7FFF);
        let off = self.b.ins().iadd_imm_s(em, -0x0400);
        let is_normal = self
            .b
            .ins()
            .icmp_imm_s(IntCC::UnsignedLessThan, off, 0x7800);
        self.b.ins().brif(is_normal, normal, &[], rest, &[]);
        self.b.switch_to_block(normal);
        let sign = self.and_k(h, 0x8000);
        let sign = self.shl_k(sign, 16);
        let t = self.shl_k(em, 13);
        let t = self.b.ins().iadd_imm_s(t, (127 - 15) << 23);
        let bits = self.b.ins().bor(sign, t);
        let y = self.b.ins().bitcast(types::F32, lanes(), bits);
        self.b.ins().jump(done, &[y.into()]);
        self.b.switch_to_block(rest);
        let y = self.f16_to_f32_any(h);
        self.b.ins().jump(done, &[y.into()]);
        self.b.switch_to_block(done);
        r
    }

    /// [`f16_to_f32`](Self::f16_to_f32) without branches: every case computed,
    /// the right one selected (scalar or four lanes).
    fn f16_to_f32_any(&mut self, h: Value) -> Value {
        let ty = self.b.func.dfg.value_type(h);
        let (ity, fty) = if ty.is_vector() {
            (types::I32X4, types::F32X4)
        } else {
            (types::I32, types::F32)
        };
        let em = self.and_k(h, 0x7FFF);
        let sign = self.and_k(h, 0x8000);
        let sign = self.shl_k(sign, 16);
        // Exponent and mantissa in f32 position.
        let t = self.shl_k(em, 13);
        // Normal: exponent rebiased by 127 - 15.
        let bias = self.k(ity, (127 - 15) << 23);
        let normal = self.b.ins().iadd(t, bias);
        // Infinity or NaN: all-ones exponent (`t` has f16's all-ones exponent,
        // which lies inside f32's), the mantissa (payload) as it is.
        let inf = self.k(ity, 0x7F80_0000);
        let special = self.b.ins().bor(t, inf);
        // Subnormal or zero: em * 2^-24, exact in f32.
        let f = self.b.ins().fcvt_from_sint(fty, em);
        let scale = self.k(ity, 0x3380_0000);
        let scale = self.b.ins().bitcast(fty, lanes(), scale);
        let sub = self.b.ins().fmul(f, scale);
        let sub = self.b.ins().bitcast(ity, lanes(), sub);
        let c3ff = self.k(ity, 0x03FF);
        let c7bff = self.k(ity, 0x7BFF);
        // `em` is below 2^15: signed compares are unsigned ones here (and `>` is
        // one instruction on x86 where `>=` is two).
        let is_normal = self.b.ins().icmp(IntCC::SignedGreaterThan, em, c3ff);
        let is_special = self.b.ins().icmp(IntCC::SignedGreaterThan, em, c7bff);
        let bits = self.pick(is_normal, normal, sub);
        let bits = self.pick(is_special, special, bits);
        let bits = self.b.ins().bor(sign, bits);
        self.b.ins().bitcast(fty, lanes(), bits)
    }

    /// `v` as an I32 constant or an I32X4 splat.
    pub(super) fn k(&mut self, ty: types::Type, v: i64) -> Value {
        if ty.is_vector() {
            self.splat_c(ty, v as u32 as u64)
        } else {
            self.b.ins().iconst(types::I32, v)
        }
    }

    fn and_k(&mut self, x: Value, c: i64) -> Value {
        let ty = self.b.func.dfg.value_type(x);
        let c = self.k(ty, c);
        self.b.ins().band(x, c)
    }

    fn shl_k(&mut self, x: Value, n: i64) -> Value {
        self.vshl(x, n)
    }

    /// `m ? a : b` for an icmp result `m` (scalar or lane mask).
    fn pick(&mut self, m: Value, a: Value, b: Value) -> Value {
        if self.b.func.dfg.value_type(a).is_vector() {
            self.b.ins().bitselect(m, a, b)
        } else {
            self.b.ins().select(m, a, b)
        }
    }
}
