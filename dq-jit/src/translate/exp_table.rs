//! f8_e4m3 -> bf16 under `q * s` with a scale in the safe range: a code's
//! result is one of two 16-entry tables, indexed by its low nibble, plus a
//! multiple of its high nibble in the exponent, with its sign flipped in; 16
//! elements a step in byte lanes (two byte planes), no table in memory.
//!
//! Why this is exact: with `s` normal and `2^-117 <= |s| < 2^118`, every
//! product `x * s` of a non-NaN code is an exact, normal f32 (4 + 8 significant
//! bits, between `2^-126` and `2^127`). Code `c` with `h = (c >> 4) & 7 >= 1` is
//! `4^(h - 1)` times code `16 + (c & 15)` (exponent fields two apart per step of
//! `h`), so its f32 product's bits are that code's plus `2 (h - 1) << 23`, and the
//! bf16 rounding (`x + 0x7fff + lsb >> 16`) carries that through as `h - 1`
//! added to the result's high byte, its overflow to the next exponent included.
//! Codes `0..16` (zero, subnormal, exponent field 1) have entries of their own.
//! The sign of `x` flips the product's sign bit (the rounding is symmetric); NaN
//! codes give [`NAN_BITS`]' top half.
//!
//! An earlier step (one 8-entry mantissa table plus the exponent, in 16-bit
//! lanes) took about 33 instructions per 16 elements against 22 here, and ran
//! slower in cache (BENCHMARKS.md).

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, Value, types};
use dq_runtime::minifloat::{NAN_BITS, f8_e4m3_to_f32};
use dq_runtime::{DType, STANDARD_FLOAT};

use super::eval::Ints;
use super::{Lut, Translator, lanes, mem};
use crate::lane_math::LaneMath;

/// The biased f32 exponents of a scale the tables serve: `2^-117 <= |s| < 2^118`.
const SAFE_EXP: (i64, i64) = (10, 244);

/// Shortest segment (elements) worth the tables: they cost about two vector steps.
const EXP_MIN: usize = 64;

/// The byte planes of a segment's two 16-entry tables (see
/// [`Translator::exp_tables`]).
#[derive(Clone, Copy)]
pub(super) struct ExpTables {
    /// Codes `0..16`: low and high bytes of their results.
    low: [Value; 2],
    /// Codes `16..32`: low bytes, and high bytes less one.
    up: [Value; 2],
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

    /// The tables of scale `sv` (F32X4 splat), computed by the formula's vector
    /// code on the values of codes `0..32` (constants: no NaN among them): the
    /// byte planes of codes `0..16`'s bf16 results, and of codes `16..32`'s with
    /// one taken from the high byte (so adding `h` gives code `c`'s, see the
    /// module doc).
    pub(super) fn exp_tables(&mut self, sv: Value) -> ExpTables {
        let mut planes = [[sv; 2]; 2];
        for (t, plane) in planes.iter_mut().enumerate() {
            let mut h = [sv; 4];
            for (i, hi) in h.iter_mut().enumerate() {
                let first = 16 * t as u8 + 4 * i as u8;
                let values =
                    (first..first + 4).flat_map(|c| f8_e4m3_to_f32(c).to_bits().to_le_bytes());
                let x = self.vconst_lanes(types::F32X4, values.collect());
                let y = self.eval(Ints::Float(x), sv, true);
                *hi = self.round_16(y);
            }
            let p0 = self.b.ins().unarrow(h[0], h[1]);
            let p1 = self.b.ins().unarrow(h[2], h[3]);
            let p0 = self.b.ins().bitcast(types::I8X16, lanes(), p0);
            let p1 = self.b.ins().bitcast(types::I8X16, lanes(), p1);
            *plane = [
                self.shuffle(p0, p1, (0..16).map(|i| 2 * i)),
                self.shuffle(p0, p1, (0..16).map(|i| 2 * i + 1)),
            ];
        }
        let one = self.vconst(types::I8X16, 1);
        planes[1][1] = self.b.ins().isub(planes[1][1], one);
        ExpTables {
            low: planes[0],
            up: planes[1],
        }
    }

    /// 32 elements: the codes at src byte address `sp`, their bf16 results to
    /// dst byte address `dp` (two steps of 16 a loop iteration: faster in cache
    /// than one, with no spills at the loop edge; BENCHMARKS.md).
    pub(super) fn emit_exp_steps(&mut self, t: ExpTables, sp: Value, dp: Value) {
        for k in 0..2 {
            self.emit_exp_step(t, sp, dp, k);
        }
    }

    /// 16 elements: the codes at src byte address `sp + 16 k`, their bf16 results
    /// to dst byte address `dp + 32 k`.
    fn emit_exp_step(&mut self, t: ExpTables, sp: Value, dp: Value, k: i32) {
        let v = self.b.ins().load(types::I8X16, mem(), sp, 16 * k);
        let bytes = |x: &mut Self, b: u64| x.vconst(types::I8X16, b);
        let (low4, seven, mag_mask, zero) = (
            bytes(self, 0x0f),
            bytes(self, 0x07),
            bytes(self, 0x7f),
            bytes(self, 0),
        );
        let top = u64::from(NAN_BITS >> 16);
        let nan = [bytes(self, top & 0xff), bytes(self, top >> 8)];
        let idx = self.b.ins().band(v, low4);
        // h = (c >> 4) & 7: a 16-bit shift, the other byte's bits masked off.
        let w = self.b.ins().bitcast(types::I16X8, lanes(), v);
        let w = self.vushr(w, 4);
        let w = self.b.ins().bitcast(types::I8X16, lanes(), w);
        let h = self.b.ins().band(w, seven);
        let first = self.b.ins().icmp(IntCC::Equal, h, zero);
        let mag = self.b.ins().band(v, mag_mask);
        let is_nan = self.b.ins().icmp(IntCC::Equal, mag, mag_mask);
        let sign = self.b.ins().bxor(v, mag);
        let mut out = [v; 2];
        for (k, o) in out.iter_mut().enumerate() {
            let a = self.b.ins().x86_pshufb(t.low[k], idx);
            let mut b = self.b.ins().x86_pshufb(t.up[k], idx);
            if k == 1 {
                b = self.b.ins().iadd(b, h);
            }
            let mut r = self.pick(first, a, b);
            if k == 1 {
                r = self.b.ins().bxor(r, sign);
            }
            *o = self.pick(is_nan, nan[k], r);
        }
        for h in 0..2u8 {
            let half = 8 * h..8 * h + 8;
            let r = self.shuffle(out[0], out[1], half.flat_map(|i| [i, i + 16]));
            self.b.ins().store(mem(), r, dp, 32 * k + 16 * i32::from(h));
        }
    }
}
