//! Zero points, scales, the formula, and results to output bits.
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{InstBuilder, Value, types};
use dq_runtime::DType;
use dq_runtime::linear::ScaleType;

use super::{Emit, lanes, mem};

impl Emit<'_, '_> {
    // ---- parameters and the formula -------------------------------------------

    /// The zero point of `(n, g)` less the weights' offset (I32): `q - z` is then
    /// `field - zeff`.
    pub(super) fn zeff(&mut self, n: Value, g: Value) -> Value {
        let woff = self.s.weights.offset;
        match self.s.zeros {
            Some(z) => {
                let f = self.packed_get(&z, self.p.zeros, n, g);
                let d = z.offset.wrapping_sub(woff);
                self.b.ins().iadd_imm_s(f, i64::from(d))
            }
            None => self.i32c(-i64::from(woff)),
        }
    }

    /// The scale of `(n, g)` widened exactly to f32 (as `Scales::get`).
    pub(super) fn scale(&mut self, n: Value, g: Value) -> Value {
        let a = self.mul_c(n, self.s.scale_strides.0);
        let b = self.mul_c(g, self.s.scale_strides.1);
        let i = self.b.ins().iadd(a, b);
        let size = self.s.scale.size();
        let off = self.mul_c(i, size);
        let addr = self.b.ins().iadd(self.p.scales, off);
        match self.s.scale {
            ScaleType::F32 => self.b.ins().load(types::F32, mem(), addr, 0),
            ScaleType::BF16 => {
                let h = self.b.ins().uload16(types::I32, mem(), addr, 0);
                // half's bf16 -> f32: NaNs get their quiet bit.
                let em = self.and_c(h, 0x7fff);
                let lim = self.i32c(0x7f80);
                let nan = self.b.ins().icmp(IntCC::UnsignedGreaterThan, em, lim);
                let q = self.or_c(h, 0x40);
                let h = self.sel(nan, q, h);
                let x = self.shl(h, 16);
                self.b.ins().bitcast(types::F32, lanes(), x)
            }
            ScaleType::F16 => {
                let h = self.b.ins().uload16(types::I32, mem(), addr, 0);
                self.f16_to_f32(h)
            }
        }
    }

    /// f16 bits (I32 or I32X4, values below 2^16) to the exact f32, NaNs quieted
    /// like `half` and `dq_runtime`'s conversion.
    pub(super) fn f16_to_f32(&mut self, h: Value) -> Value {
        let ity = self.b.func.dfg.value_type(h);
        let fty = if ity.is_vector() {
            types::F32X4
        } else {
            types::F32
        };
        let sign = self.and_c(h, 0x8000);
        let sign = self.shl(sign, 16);
        let em = self.and_c(h, 0x7fff);
        let sh = self.shl(em, 13);
        let f = self.b.ins().bitcast(fty, lanes(), sh);
        let k = if ity.is_vector() {
            self.splat_c(fty, 0x7780_0000)
        } else {
            self.b.ins().f32const(f32::from_bits(0x7780_0000))
        };
        let f = self.b.ins().fmul(f, k);
        let norm = self.b.ins().bitcast(ity, lanes(), f);
        let infnan = self.or_c(sh, 0x7f80_0000);
        let lim = self.c32(ity, 0x7c00);
        let is_nan = self.b.ins().icmp(IntCC::SignedGreaterThan, em, lim);
        let quiet = self.or_c(infnan, 0x0040_0000);
        let infnan = self.sel(is_nan, quiet, infnan);
        let big = self.b.ins().icmp(IntCC::SignedGreaterThanOrEqual, em, lim);
        let r = self.sel(big, infnan, norm);
        let r = self.b.ins().bor(r, sign);
        self.b.ins().bitcast(fty, lanes(), r)
    }

    /// `f32(q - z) * s`: `d = field - zeff` (I32 or I32X4), `s` F32 or F32X4.
    pub(super) fn formula(&mut self, d: Value, s: Value) -> Value {
        let fty = self.b.func.dfg.value_type(s);
        let x = self.b.ins().fcvt_from_sint(fty, d);
        self.b.ins().fmul(x, s)
    }

    /// f32 bits with NaNs quieted (`quiet_f32`).
    pub(super) fn f32_bits(&mut self, y: Value) -> Value {
        let ty = self.b.func.dfg.value_type(y).as_int();
        let x = self.b.ins().bitcast(ty, lanes(), y);
        let q = self.or_c(x, 0x0040_0000);
        let nan = self.b.ins().fcmp(FloatCC::Unordered, y, y);
        self.sel(nan, q, x)
    }

    /// f16/bf16 bits (low half of each I32 lane) of f32 `y`.
    pub(super) fn round_16(&mut self, y: Value) -> Value {
        if self.s.out == DType::BF16 {
            self.round_bf16(y)
        } else {
            self.round_f16(y)
        }
    }

    /// The integer RNE of `dq_runtime::convert::f32_to_bf16_bits`.
    pub(super) fn round_bf16(&mut self, y: Value) -> Value {
        let ity = self.b.func.dfg.value_type(y).as_int();
        let x = self.b.ins().bitcast(ity, lanes(), y);
        let hi = self.ushr(x, 16);
        let lsb = self.and_c(hi, 1);
        let r = self.add_c(x, 0x7fff);
        let r = self.b.ins().iadd(r, lsb);
        let r = self.ushr(r, 16);
        let nanv = self.or_c(hi, 0x40);
        let nan = self.b.ins().fcmp(FloatCC::Unordered, y, y);
        self.sel(nan, nanv, r)
    }

    /// f16 round-to-nearest-even by float rescaling (subnormals and overflow
    /// included); NaN keeps its top payload bits with the quiet bit set (as F16C
    /// and `half` do).
    pub(super) fn round_f16(&mut self, y: Value) -> Value {
        let fty = self.b.func.dfg.value_type(y);
        let ity = fty.as_int();
        let fconst = |t: &mut Self, bits: u32| {
            if fty.is_vector() {
                t.splat_c(fty, bits)
            } else {
                t.b.ins().f32const(f32::from_bits(bits))
            }
        };
        let w = self.b.ins().bitcast(ity, lanes(), y);
        let shl1 = self.b.ins().iadd(w, w);
        let sign = self.and_c(w, 0x8000_0000);
        let sign = self.ushr(sign, 16);
        let bias = self.and_c(shl1, 0xff00_0000);
        let min_bias = self.c32(ity, 0x7100_0000);
        let bias = self.b.ins().umax(bias, min_bias);
        let a = self.b.ins().fabs(y);
        let up = fconst(self, 0x7780_0000); // 2^112
        let down = fconst(self, 0x0880_0000); // 2^-110
        let base = self.b.ins().fmul(a, up);
        let base = self.b.ins().fmul(base, down);
        let bias = self.ushr(bias, 1);
        let bias = self.add_c(bias, 0x0780_0000);
        let bias = self.b.ins().bitcast(fty, lanes(), bias);
        let base = self.b.ins().fadd(bias, base);
        let bits = self.b.ins().bitcast(ity, lanes(), base);
        let exp = self.ushr(bits, 13);
        let exp = self.and_c(exp, 0x7c00);
        let man = self.and_c(bits, 0x0fff);
        let nonsign = self.b.ins().iadd(exp, man);
        let payload = self.and_c(w, 0x007f_ffff);
        let payload = self.ushr(payload, 13);
        let nanv = self.or_c(payload, 0x7e00);
        let lim = self.c32(ity, 0xff00_0000);
        let nan = self.b.ins().icmp(IntCC::UnsignedGreaterThan, shl1, lim);
        let r = self.sel(nan, nanv, nonsign);
        self.b.ins().bor(r, sign)
    }

    /// Output bytes per element.
    pub(super) fn osz(&self) -> usize {
        if self.s.out == DType::F32 { 4 } else { 2 }
    }

    /// Stores scalar result `y` at byte address `a`.
    pub(super) fn store1(&mut self, y: Value, a: Value) {
        if self.s.out == DType::F32 {
            let x = self.f32_bits(y);
            self.b.ins().store(mem(), x, a, 0);
        } else {
            let x = self.round_16(y);
            self.b.ins().istore16(mem(), x, a, 0);
        }
    }

    /// Stores F32X4 results at byte address `a`: four f32, or the 16-bit roundings
    /// (I32X4 of them returned for the caller to pack when `pack`).
    pub(super) fn store4(&mut self, ys: &[Value], a: Value) {
        if self.s.out == DType::F32 {
            for (i, &y) in ys.iter().enumerate() {
                let x = self.f32_bits(y);
                self.b.ins().store(mem(), x, a, 16 * i as i32);
            }
            return;
        }
        let h: Vec<Value> = ys.iter().map(|&y| self.round_16(y)).collect();
        for (i, pair) in h.chunks(2).enumerate() {
            if let [x, y] = *pair {
                let p = self.b.ins().unarrow(x, y);
                self.b.ins().store(mem(), p, a, 16 * i as i32);
            } else {
                let p = self.b.ins().unarrow(pair[0], pair[0]);
                let p = self.b.ins().bitcast(types::I64X2, lanes(), p);
                let lo = self.b.ins().extractlane(p, 0);
                self.b.ins().store(mem(), lo, a, 16 * i as i32);
            }
        }
    }
}
