//! Zero points, scales, the formula, and results to output bits.
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{InstBuilder, Value, types};
use dq_runtime::DType;
use dq_runtime::linear::ScaleType;

use super::{Emit, lanes, mem};
use crate::lane_math::{Bin, LaneMath};

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
        let bits = self.scale_bits(n, g);
        self.widen_scale(bits)
    }

    /// The stored bits of scale `(n, g)`, zero-extended to I32.
    pub(super) fn scale_bits(&mut self, n: Value, g: Value) -> Value {
        let a = self.mul_c(n, self.s.scale_strides.0);
        let b = self.mul_c(g, self.s.scale_strides.1);
        let i = self.b.ins().iadd(a, b);
        let size = self.s.scale.size();
        let off = self.mul_c(i, size);
        let addr = self.b.ins().iadd(self.p.scales, off);
        match self.s.scale {
            ScaleType::F32 => self.b.ins().load(types::I32, mem(), addr, 0),
            ScaleType::BF16 | ScaleType::F16 => self.b.ins().uload16(types::I32, mem(), addr, 0),
        }
    }

    /// Scale bits (I32 or I32X4, from [`scale_bits`](Self::scale_bits)) widened
    /// exactly to f32 (F32 or F32X4).
    pub(super) fn widen_scale(&mut self, h: Value) -> Value {
        let ity = self.b.func.dfg.value_type(h);
        let fty = if ity.is_vector() {
            types::F32X4
        } else {
            types::F32
        };
        match self.s.scale {
            ScaleType::F32 => self.b.ins().bitcast(fty, lanes(), h),
            ScaleType::BF16 => {
                // half's bf16 -> f32: NaNs get their quiet bit.
                let em = self.bin_c(Bin::And, h, 0x7fff);
                let lim = self.k32(ity, 0x7f80);
                let nan = self.b.ins().icmp(IntCC::SignedGreaterThan, em, lim);
                let q = self.bin_c(Bin::Or, h, 0x40);
                let h = self.pick(nan, q, h);
                let x = self.shift(h, true, 16);
                self.b.ins().bitcast(fty, lanes(), x)
            }
            ScaleType::F16 => self.widen_f16(h, ity, true),
        }
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
        self.pick(nan, q, x)
    }

    /// f16/bf16 bits (low half of each I32 lane) of f32 `y`.
    pub(super) fn round_16(&mut self, y: Value) -> Value {
        if self.s.out == DType::BF16 {
            self.round_bf16(y, false)
        } else {
            self.round_f16(y)
        }
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
