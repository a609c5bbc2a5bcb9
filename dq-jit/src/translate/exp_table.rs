//! f8_e4m3 -> bf16 under `q * s` with a scale in the safe range: a code's
//! result is a 16-entry table (its mantissa, or its whole value when
//! subnormal) plus its exponent, with its sign flipped in; 16 elements a step
//! in byte shuffles and 16-bit lanes, no table in memory.
//!
//! Why this is exact: with `s` normal and `2^-117 <= |s| < 2^118`, every
//! product `x * s` of a non-NaN code is an exact, normal f32 (4 + 8 significant
//! bits, between `2^-126` and `2^127`). A normal code with exponent field `e`
//! and mantissa `m` gives `2^(e - 1)` times the product of the code `(1, m)`,
//! so its f32 bits are those plus `(e - 1) << 23`, and the bf16 rounding
//! (`x + 0x7fff + lsb >> 16`) carries that through as `(e - 1) << 7`, its
//! overflow to the next exponent included. Subnormal codes (`e = 0`) have
//! entries of their own. The sign of `x` flips the product's sign bit (the
//! rounding is symmetric); NaN codes give [`NAN_BITS`]' top half.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, Value, types};
use dq_runtime::minifloat::{NAN_BITS, f8_e4m3_to_f32};
use dq_runtime::{DType, STANDARD_FLOAT};

use super::eval::Ints;
use super::{Lut, Translator, lanes, mem};

/// The biased f32 exponents of a scale the tables serve: `2^-117 <= |s| < 2^118`.
const SAFE_EXP: (i64, i64) = (10, 244);

/// Shortest segment (elements) worth the tables: they cost about a vector step.
const EXP_MIN: usize = 32;

/// The two byte planes of a segment's 16 entries (see [`Translator::exp_tables`]).
#[derive(Clone, Copy)]
pub(super) struct ExpTables {
    lo: Value,
    hi: Value,
}

impl<'a, 'f> Translator<'a, 'f> {
    /// True when constant-scale segments may take exponent tables: f8_e4m3
    /// src, bf16 stores, the formula `q * s`, byte shuffles, and segments that
    /// can be [`EXP_MIN`] long.
    pub(super) fn exp_tables_pay(&self) -> bool {
        let inner = self.inner();
        let longest = if inner.is_constant() {
            inner.len
        } else {
            inner.group.min(inner.len)
        };
        longest >= EXP_MIN
            && self.spec.src == DType::F8E4M3
            && self.spec.out() == DType::BF16
            && self.spec.formula.nodes == STANDARD_FLOAT.nodes
            && self.lut == Lut::Pshufb
    }

    /// Whether scale `s` (the F32 work float) is in the range the tables serve
    /// (see the module doc): its biased exponent in `SAFE_EXP`.
    pub(super) fn exp_tables_ok(&mut self, s: Value) -> Value {
        let bits = self.b.ins().bitcast(types::I32, lanes(), s);
        let e = self.b.ins().ushr_imm_s(bits, 23);
        let e = self.b.ins().band_imm_s(e, 0xff);
        let d = self.b.ins().iadd_imm_s(e, -SAFE_EXP.0);
        self.b
            .ins()
            .icmp_imm_s(IntCC::UnsignedLessThanOrEqual, d, SAFE_EXP.1 - SAFE_EXP.0)
    }

    /// The 16 entries of scale `sv` (F32X4 splat), computed by the formula's
    /// vector code on the codes' values (constants: no NaN among them):
    /// entry `m < 8` is the bf16 result of the code with exponent field 1 and
    /// mantissa `m`, less `1 << 7` (so adding `e << 7` gives exponent `e`'s);
    /// entry `8 + m` is the subnormal code `m`'s result.
    pub(super) fn exp_tables(&mut self, sv: Value) -> ExpTables {
        let codes: Vec<u8> = (8..16).chain(0..8).collect();
        let mut h = [sv; 4];
        for (i, hi) in h.iter_mut().enumerate() {
            let values = codes[4 * i..4 * i + 4]
                .iter()
                .flat_map(|&c| f8_e4m3_to_f32(c).to_bits().to_le_bytes());
            let x = self.vconst_lanes(types::F32X4, values.collect());
            let y = self.eval(Ints::Float(x), sv, true);
            *hi = self.round_16(y);
        }
        for x in &mut h[..2] {
            *x = self.add_c(*x, -0x80);
        }
        let p0 = self.b.ins().unarrow(h[0], h[1]);
        let p1 = self.b.ins().unarrow(h[2], h[3]);
        let p0 = self.b.ins().bitcast(types::I8X16, lanes(), p0);
        let p1 = self.b.ins().bitcast(types::I8X16, lanes(), p1);
        ExpTables {
            lo: self.shuffle(p0, p1, (0..16).map(|i| 2 * i)),
            hi: self.shuffle(p0, p1, (0..16).map(|i| 2 * i + 1)),
        }
    }

    /// 16 elements: the codes at src byte address `sp`, their bf16 results to
    /// dst byte address `dp`.
    pub(super) fn emit_exp_step(&mut self, t: ExpTables, sp: Value, dp: Value) {
        let v = self.b.ins().load(types::I8X16, mem(), sp, 0);
        let bytes = |x: &mut Self, b: u64| x.vconst(types::I8X16, b);
        let (m7, e_bits, eight, zero) = (
            bytes(self, 0x07),
            bytes(self, 0x78),
            bytes(self, 0x08),
            bytes(self, 0),
        );
        // Entry index: the mantissa, 8 up for a subnormal code.
        let m = self.b.ins().band(v, m7);
        let e = self.b.ins().band(v, e_bits);
        let sub = self.b.ins().icmp(IntCC::Equal, e, zero);
        let sub = self.b.ins().band(sub, eight);
        let idx = self.b.ins().bor(m, sub);
        let lo = self.b.ins().x86_pshufb(t.lo, idx);
        let hi = self.b.ins().x86_pshufb(t.hi, idx);
        for k in 0..2u8 {
            let half = 8 * k..8 * k + 8;
            let entry = self.shuffle(lo, hi, half.clone().flat_map(|i| [i, i + 16]));
            let entry = self.b.ins().bitcast(types::I16X8, lanes(), entry);
            // The code in the high byte of each 16-bit lane.
            let w = self.shuffle(zero, v, half.flat_map(|i| [0, i + 16]));
            let w = self.b.ins().bitcast(types::I16X8, lanes(), w);
            let c16 = |x: &mut Self, b: u64| x.vconst(types::I16X8, b);
            let (exp_mask, sign_mask, mag_mask, nan) = (
                c16(self, 0x7800),
                c16(self, 0x8000),
                c16(self, 0x7f00),
                c16(self, (NAN_BITS >> 16) as u64),
            );
            let exp = self.b.ins().band(w, exp_mask);
            let exp = self.vushr(exp, 4);
            let sign = self.b.ins().band(w, sign_mask);
            let r = self.b.ins().iadd(entry, exp);
            let r = self.b.ins().bxor(r, sign);
            let mag = self.b.ins().band(w, mag_mask);
            let is_nan = self.b.ins().icmp(IntCC::Equal, mag, mag_mask);
            let r = self.sel(is_nan, nan, r);
            self.b.ins().store(mem(), r, dp, 16 * k as i32);
        }
    }
}
