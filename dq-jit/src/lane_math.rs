//! The float conversions both the plan translator and the linear emitter build,
//! on scalars (I32/F32) or four lanes (I32X4/F32X4): an f16 scale widened to
//! f32, and an f32 result rounded to f16 or bf16 bits. Each emitter supplies its
//! builder and where its vector constants live ([`LaneMath::splat`]).

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{InstBuilder, Type, Value, types};
use cranelift_frontend::FunctionBuilder;

use crate::translate::lanes;

/// Conversions over an emitter's builder and constants.
pub(crate) trait LaneMath<'f> {
    /// The function builder.
    fn fb(&mut self) -> &mut FunctionBuilder<'f>;

    /// A vector constant of type `ty` with every 32-bit lane `bits`, placed
    /// where the emitter keeps its constants.
    fn splat(&mut self, ty: Type, bits: u32) -> Value;

    /// `bits` as an I32 (F32) constant, or every lane of an I32X4 (F32X4) one.
    fn k32(&mut self, ty: Type, bits: u32) -> Value {
        match (ty.is_vector(), ty.is_float()) {
            (true, _) => self.splat(ty, bits),
            (false, true) => self.fb().ins().f32const(f32::from_bits(bits)),
            (false, false) => self.fb().ins().iconst(types::I32, i64::from(bits)),
        }
    }

    /// `x op c` for `op` band/bor/iadd, every lane.
    fn bin_c(&mut self, op: Bin, x: Value, c: u32) -> Value {
        let ty = self.fb().func.dfg.value_type(x);
        let c = self.k32(ty, c);
        let ins = self.fb().ins();
        match op {
            Bin::And => ins.band(x, c),
            Bin::Or => ins.bor(x, c),
            Bin::Add => ins.iadd(x, c),
        }
    }

    /// `x << n` or `x >> n` (logical), every lane.
    fn shift(&mut self, x: Value, left: bool, n: i64) -> Value {
        let n = self.fb().ins().iconst(types::I32, n);
        if left {
            self.fb().ins().ishl(x, n)
        } else {
            self.fb().ins().ushr(x, n)
        }
    }

    /// `m ? a : b` for a compare result `m` (scalar or lane mask).
    fn pick(&mut self, m: Value, a: Value, b: Value) -> Value {
        let ty = self.fb().func.dfg.value_type(a);
        if !ty.is_vector() {
            return self.fb().ins().select(m, a, b);
        }
        let m = if self.fb().func.dfg.value_type(m) == ty {
            m
        } else {
            self.fb().ins().bitcast(ty, lanes(), m)
        };
        self.fb().ins().bitselect(m, a, b)
    }

    /// f16 bits (`ity` = I32 or I32X4, values below 2^16) to the exact f32, NaNs
    /// quieted like `half`: normals and subnormals rescaled by 2^112 (exact).
    fn widen_f16(&mut self, h: Value, ity: Type) -> Value {
        let fty = if ity.is_vector() {
            types::F32X4
        } else {
            types::F32
        };
        let sign = self.bin_c(Bin::And, h, 0x8000);
        let sign = self.shift(sign, true, 16);
        let em = self.bin_c(Bin::And, h, 0x7fff);
        let sh = self.shift(em, true, 13);
        let f = self.fb().ins().bitcast(fty, lanes(), sh);
        let k = self.k32(fty, 0x7780_0000);
        let f = self.fb().ins().fmul(f, k);
        let norm = self.fb().ins().bitcast(ity, lanes(), f);
        // Inf and NaN: all-ones exponent; NaN gets its quiet bit.
        let infnan = self.bin_c(Bin::Or, sh, 0x7f80_0000);
        let lim = self.k32(ity, 0x7c00);
        let is_nan = self.fb().ins().icmp(IntCC::SignedGreaterThan, em, lim);
        let quiet = self.bin_c(Bin::Or, infnan, 0x0040_0000);
        let infnan = self.pick(is_nan, quiet, infnan);
        let is_big = self
            .fb()
            .ins()
            .icmp(IntCC::SignedGreaterThanOrEqual, em, lim);
        let r = self.pick(is_big, infnan, norm);
        let r = self.fb().ins().bor(r, sign);
        self.fb().ins().bitcast(fty, lanes(), r)
    }

    /// bf16 bits of f32 `y` in the low half of each I32 lane: the integer RNE of
    /// `dq_runtime::convert::f32_to_bf16_bits`; `plain` leaves out the NaN case
    /// (where every NaN result is known quiet with zero low bits).
    fn round_bf16(&mut self, y: Value, plain: bool) -> Value {
        let ity = self.fb().func.dfg.value_type(y).as_int();
        let x = self.fb().ins().bitcast(ity, lanes(), y);
        let hi = self.shift(x, false, 16);
        let lsb = self.bin_c(Bin::And, hi, 1);
        let r = self.bin_c(Bin::Add, x, 0x7fff);
        let r = self.fb().ins().iadd(r, lsb);
        let r = self.shift(r, false, 16);
        if plain {
            return r;
        }
        let nanv = self.bin_c(Bin::Or, hi, 0x40);
        let nan = self.fb().ins().fcmp(FloatCC::Unordered, y, y);
        self.pick(nan, nanv, r)
    }

    /// f16 bits of f32 `y` in the low half of each I32 lane: exact RNE by float
    /// rescaling (subnormals and overflow included); NaN keeps its top payload
    /// bits with the quiet bit set (as F16C and `half` do).
    fn round_f16(&mut self, y: Value) -> Value {
        let fty = self.fb().func.dfg.value_type(y);
        let ity = fty.as_int();
        let w = self.fb().ins().bitcast(ity, lanes(), y);
        let shl1 = self.fb().ins().iadd(w, w);
        let sign = self.bin_c(Bin::And, w, 0x8000_0000);
        let sign = self.shift(sign, false, 16);
        let bias = self.bin_c(Bin::And, shl1, 0xff00_0000);
        let min_bias = self.k32(ity, 0x7100_0000);
        let bias = self.fb().ins().umax(bias, min_bias);
        let a = self.fb().ins().fabs(y);
        let up = self.k32(fty, 0x7780_0000); // 2^112
        let down = self.k32(fty, 0x0880_0000); // 2^-110
        let base = self.fb().ins().fmul(a, up);
        let base = self.fb().ins().fmul(base, down);
        let bias = self.shift(bias, false, 1);
        let bias = self.bin_c(Bin::Add, bias, 0x0780_0000);
        let bias = self.fb().ins().bitcast(fty, lanes(), bias);
        let base = self.fb().ins().fadd(bias, base);
        let bits = self.fb().ins().bitcast(ity, lanes(), base);
        let exp = self.shift(bits, false, 13);
        let exp = self.bin_c(Bin::And, exp, 0x7c00);
        let man = self.bin_c(Bin::And, bits, 0x0fff);
        let nonsign = self.fb().ins().iadd(exp, man);
        let payload = self.bin_c(Bin::And, w, 0x007f_ffff);
        let payload = self.shift(payload, false, 13);
        let nanv = self.bin_c(Bin::Or, payload, 0x7e00);
        let lim = self.k32(ity, 0xff00_0000);
        let nan = self.fb().ins().icmp(IntCC::UnsignedGreaterThan, shl1, lim);
        let r = self.pick(nan, nanv, nonsign);
        self.fb().ins().bor(r, sign)
    }
}

/// The binary operations with a constant of [`LaneMath::bin_c`].
#[derive(Clone, Copy)]
pub(crate) enum Bin {
    And,
    Or,
    Add,
}
