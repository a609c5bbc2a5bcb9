//! A group's 16 outputs (4-bit fields into f16/bf16): computed once by the
//! formula, kept as a table of low bytes and one of high bytes for `x86_pshufb`.
use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::{InstBuilder, Value, types};
use dq_runtime::DType;

use super::quads::lanes32;
use super::{Emit, lanes, mem};
use crate::host_f16;
use crate::lane_math::LaneMath;

/// Picks byte `b` of each I32 lane of two vectors into bytes 0..8, byte `b + 1`
/// into 8..16.
fn pick_pair(b: u8) -> [u8; 16] {
    std::array::from_fn(|i| 4 * (i % 8) as u8 + if i < 8 { b } else { b + 1 })
}

/// The low 8 bytes of `a` then of `b` (`punpcklqdq`).
const LO_HALVES: [u8; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23];
/// The high 8 bytes of `a` then of `b` (`punpckhqdq`).
const HI_HALVES: [u8; 16] = [8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31];

impl Emit<'_, '_> {
    /// The group's 16 outputs (fields 0..16) of zero point `z` (I32) and scale `s`
    /// (F32) by the formula: [`tables`](Self::tables) of one row, stored at `at`.
    pub(super) fn table(&mut self, z: Value, s: Value, at: i32) -> (Value, Value) {
        let zv = self.b.ins().splat(types::I32X4, z);
        let sv = self.b.ins().splat(types::F32X4, s);
        self.tables(&[zv], &[sv], 1, at)[0]
    }

    /// The tables of `rows` rows, row `r`'s zero point (I32) and scale (F32) in
    /// lane `r % 4` of `zs[r / 4]` and `ss[r / 4]`: per row, the tables of the
    /// low and high bytes of its 16 outputs (I8X16), also stored to the slot at
    /// `at + 64 r` and `at + 64 r + 16` for [`lookup1`](Self::lookup1) (the next
    /// 32 bytes are scratch).
    ///
    /// bf16 with every scale finite (every product finite or zero) rounds without
    /// the NaN case: 4 instructions a vector instead of 8.
    pub(super) fn tables(
        &mut self,
        zs: &[Value],
        ss: &[Value],
        rows: usize,
        at: i32,
    ) -> Vec<(Value, Value)> {
        let out: Vec<(Value, Value)> = if self.s.out == DType::BF16 {
            let (fast, slow, done) = (
                self.b.create_block(),
                self.b.create_block(),
                self.b.create_block(),
            );
            for _ in 0..2 * rows {
                self.b.append_block_param(done, types::I8X16);
            }
            let finite = self.all_finite(ss);
            self.b.ins().brif(finite, fast, &[], slow, &[]);
            for (block, plain) in [(fast, true), (slow, false)] {
                self.b.switch_to_block(block);
                let mut args: Vec<cranelift_codegen::ir::BlockArg> = Vec::new();
                for r in 0..rows {
                    let ys = self.products(zs, ss, r);
                    let (lo, hi) = self.bf16_table(ys, plain);
                    args.push(lo.into());
                    args.push(hi.into());
                }
                self.b.ins().jump(done, &args);
            }
            self.b.switch_to_block(done);
            let p = self.b.block_params(done).to_vec();
            p.chunks_exact(2).map(|t| (t[0], t[1])).collect()
        } else {
            (0..rows)
                .map(|r| {
                    let ys = self.products(zs, ss, r);
                    self.f16_table(ys, at + 64 * r as i32)
                })
                .collect()
        };
        for (r, &(lo, hi)) in out.iter().enumerate() {
            let a = at + 64 * r as i32;
            self.b.ins().store(mem(), lo, self.slot, a);
            self.b.ins().store(mem(), hi, self.slot, a + 16);
        }
        out
    }

    /// The tables stored at `at` (low bytes, high bytes).
    pub(super) fn stored_table(&mut self, at: i32) -> (Value, Value) {
        let lo = self.b.ins().load(types::I8X16, mem(), self.slot, at);
        let hi = self.b.ins().load(types::I8X16, mem(), self.slot, at + 16);
        (lo, hi)
    }

    /// True (I8) when every lane of the F32X4 `ss` is finite.
    fn all_finite(&mut self, ss: &[Value]) -> Value {
        let inf = self.splat_c(types::F32X4, f32::INFINITY.to_bits());
        let mut all = None;
        for &s in ss {
            let a = self.b.ins().fabs(s);
            let m = self.b.ins().fcmp(FloatCC::LessThan, a, inf);
            all = Some(match all {
                None => m,
                Some(x) => self.b.ins().band(x, m),
            });
        }
        self.b.ins().vall_true(all.expect("a scale vector"))
    }

    /// Row `r`'s 16 products `f32(q - z) * s`, `q` in `0..16` (four F32X4).
    fn products(&mut self, zs: &[Value], ss: &[Value], r: usize) -> [Value; 4] {
        let l = (r % 4) as u8;
        let splat = lanes32([l; 4]);
        let z = self.b.ins().bitcast(types::I8X16, lanes(), zs[r / 4]);
        let z = self.shuffle(z, z, splat);
        let zv = self.b.ins().bitcast(types::I32X4, lanes(), z);
        let s = self.b.ins().bitcast(types::I8X16, lanes(), ss[r / 4]);
        let s = self.shuffle(s, s, splat);
        let sv = self.b.ins().bitcast(types::F32X4, lanes(), s);
        std::array::from_fn(|i| {
            let mut bytes = [0u8; 16];
            for (l, c) in bytes.chunks_exact_mut(4).enumerate() {
                c.copy_from_slice(&(4 * i as u32 + l as u32).to_le_bytes());
            }
            let iota = self.vconst_bytes(types::I32X4, bytes);
            let d = self.b.ins().isub(iota, zv);
            self.formula(d, sv)
        })
    }

    /// bf16 tables of `ys`: `plain` rounds without the NaN case (for finite
    /// products: bytes 2 and 3 of each lane of [`LaneMath::bf16_rne_hi`]).
    fn bf16_table(&mut self, ys: [Value; 4], plain: bool) -> (Value, Value) {
        if !plain {
            let h = ys.map(|y| self.round_16(y));
            let e = self.pack16(h);
            return self.planes16(e);
        }
        let r = ys.map(|y| {
            let (r, _) = self.bf16_rne_hi(y);
            self.b.ins().bitcast(types::I8X16, lanes(), r)
        });
        let a = self.shuffle(r[0], r[1], pick_pair(2));
        let b = self.shuffle(r[2], r[3], pick_pair(2));
        (self.shuffle(a, b, LO_HALVES), self.shuffle(a, b, HI_HALVES))
    }

    /// f16 tables of `ys` (the host's F16C where it may, through the slot's
    /// scratch at `at + 32`).
    fn f16_table(&mut self, ys: [Value; 4], at: i32) -> (Value, Value) {
        let e = if self.host_f16 {
            let out = self.b.ins().iadd_imm_s(self.slot, i64::from(at + 32));
            host_f16::round(&mut self.b, out, ys)
        } else {
            let h = ys.map(|y| self.round_16(y));
            self.pack16(h)
        };
        self.planes16(e)
    }

    /// The output of field `c` (I32, below 16) from the tables stored at `at`,
    /// written to `a + off`.
    pub(super) fn lookup1(&mut self, c: Value, at: i32, a: Value, off: i32) {
        let c = self.b.ins().uextend(types::I64, c);
        let ta = self.b.ins().iadd(self.slot, c);
        let lo = self.b.ins().uload8(types::I32, mem(), ta, at);
        let hi = self.b.ins().uload8(types::I32, mem(), ta, at + 16);
        let hi = self.b.ins().ishl_imm_s(hi, 8);
        let y = self.b.ins().bor(lo, hi);
        self.b.ins().istore16(mem(), y, a, off);
    }
}
