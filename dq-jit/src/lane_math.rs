//! The float conversions every emitter builds (the plan translator, the linear
//! and block emitters), on scalars (I32/F32) or four lanes (I32X4/F32X4): f16
//! widened to f32, and an f32 result rounded to f16 or bf16 bits; and the byte
//! tables of 16 two-byte results for `x86_pshufb` lookups. Each emitter
//! supplies its builder and where its vector constants live
//! ([`LaneMath::splat`]).

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{ConstantData, InstBuilder, Type, Value, types};
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

    /// f16 bits (`ity` = I32 or I32X4, values below 2^16) to the exact f32:
    /// normals and subnormals rescaled by 2^112 (exact). `quiet`: NaNs quieted
    /// like `half` and F16C; else a NaN keeps its payload and signalling bit
    /// (`dq_runtime::convert::f16_to_f32`).
    fn widen_f16(&mut self, h: Value, ity: Type, quiet: bool) -> Value {
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
        let infnan = if quiet {
            let is_nan = self.fb().ins().icmp(IntCC::SignedGreaterThan, em, lim);
            let q = self.bin_c(Bin::Or, infnan, 0x0040_0000);
            self.pick(is_nan, q, infnan)
        } else {
            infnan
        };
        let is_big = self
            .fb()
            .ins()
            .icmp(IntCC::SignedGreaterThanOrEqual, em, lim);
        let r = self.pick(is_big, infnan, norm);
        let r = self.fb().ins().bor(r, sign);
        self.fb().ins().bitcast(fty, lanes(), r)
    }

    /// The bf16 bits of a non-NaN f32 `y` in the high half of each I32 lane (the
    /// integer RNE of `dq_runtime::convert::f32_to_bf16_bits`: `x + 0x7fff +
    /// lsb` of its bits `x`), and `x >> 16`.
    fn bf16_rne_hi(&mut self, y: Value) -> (Value, Value) {
        let ity = self.fb().func.dfg.value_type(y).as_int();
        let x = self.fb().ins().bitcast(ity, lanes(), y);
        let hi = self.shift(x, false, 16);
        let lsb = self.bin_c(Bin::And, hi, 1);
        let r = self.bin_c(Bin::Add, x, 0x7fff);
        (self.fb().ins().iadd(r, lsb), hi)
    }

    /// bf16 bits of f32 `y` in the low half of each I32 lane: the integer RNE of
    /// `dq_runtime::convert::f32_to_bf16_bits`; `plain` leaves out the NaN case
    /// (where every NaN result is known quiet with zero low bits).
    fn round_bf16(&mut self, y: Value, plain: bool) -> Value {
        let (r, hi) = self.bf16_rne_hi(y);
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

    /// A constant shuffle of the 32 bytes of `a` then `b`.
    fn shuffle(&mut self, a: Value, b: Value, order: impl IntoIterator<Item = u8>) -> Value {
        let order: Vec<u8> = order.into_iter().collect();
        debug_assert_eq!(order.len(), 16);
        let imm = self
            .fb()
            .func
            .dfg
            .immediates
            .push(ConstantData::from(order));
        self.fb().ins().shuffle(a, b, imm)
    }

    /// The 16 values below 2^16 in the I32X4 `h` as two I16X8, in order.
    fn pack16(&mut self, h: [Value; 4]) -> [Value; 2] {
        let e0 = self.fb().ins().unarrow(h[0], h[1]);
        let e1 = self.fb().ins().unarrow(h[2], h[3]);
        [e0, e1]
    }

    /// The byte tables of 16 two-byte entries (`e`: entries 0..8, 8..16, each
    /// I16X8 or I8X16): the low bytes of the 16 in order, and their high bytes
    /// (I8X16 each), for `x86_pshufb` lookups.
    fn planes16(&mut self, e: [Value; 2]) -> (Value, Value) {
        let [a, b] = e.map(|x| {
            if self.fb().func.dfg.value_type(x) == types::I8X16 {
                x
            } else {
                self.fb().ins().bitcast(types::I8X16, lanes(), x)
            }
        });
        // Low bytes to the low half, high bytes to the high half, then the
        // halves paired up.
        let split = (0..8).map(|n| 2 * n).chain((0..8).map(|n| 2 * n + 1));
        let a = self.shuffle(a, a, split.clone());
        let b = self.shuffle(b, b, split);
        let lo = self.shuffle(a, b, (0..8).chain(16..24));
        let hi = self.shuffle(a, b, (8..16).chain(24..32));
        (lo, hi)
    }
}

/// The binary operations with a constant of [`LaneMath::bin_c`].
#[derive(Clone, Copy)]
pub(crate) enum Bin {
    And,
    Or,
    Add,
}
