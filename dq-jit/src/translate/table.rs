//! 4-bit table lookups: a segment with one scale and zero point computes its 16
//! possible results once (by the vector code) as byte planes, then every element
//! is a byte shuffle (`x86_pshufb`) of them, 32 a step; the entries also go to a
//! stack slot, from which the segment's single elements copy theirs.

use cranelift_codegen::cursor::{Cursor, FuncCursor};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    Block, BlockArg, InstBuilder, StackSlotData, StackSlotKind, Value, types,
};
use dq_runtime::convert::f32_to_bf16_bits;
use dq_runtime::minifloat::f4_e2m1_to_f32;
use dq_runtime::{DType, Lowering, STANDARD_FLOAT};

use super::byte_table::longest_segment;
use super::eval::Ints;
use super::lane_loads::{MAGIC, bias};
use super::vector::Steps;
use dq_runtime::policy::LUT_MIN;

use super::{Run, STEP, Translator, lanes, mem};
use crate::lane_math::LaneMath;

/// How the target does a dynamic byte shuffle (the 4-bit table lookup).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lut {
    /// No cheap byte shuffle: 4-bit src takes the ordinary vector path.
    None,
    /// x86-64 with SSSE3: `x86_pshufb` (indices are always 0..15).
    Pshufb,
}

/// True when `l` has a 4-bit src and segments of one scale and zero point that
/// can be at least [`LUT_MIN`] long (a shorter one costs about a vector step
/// more as a table): where the translator looks results up in 16-entry tables,
/// given a byte shuffle.
pub(crate) fn long_4bit_segments(l: &Lowering) -> bool {
    l.src.is_4bit() && longest_segment(l) >= LUT_MIN
}

impl<'a, 'f> Translator<'a, 'f> {
    /// True when constant-parameter segments of this spec go through a 16-entry
    /// table: 4-bit src, a byte shuffle on the target, and segments that can be at
    /// least [`LUT_MIN`] long (a shorter one costs about a vector step more).
    pub(super) fn lut_pays(&self) -> bool {
        long_4bit_segments(&self.spec.lowering) && self.lut != Lut::None
    }

    /// True when a table segment's single elements (odd first nibble, tail) are
    /// looked up in its table rather than computed: always, unless a zero point
    /// checked at run time can send a whole segment to scalar code (the table
    /// is then not exact).
    pub(super) fn table_scalar(&self) -> bool {
        self.lut_pays() && !self.an.z_checked
    }

    /// The dst bits of the formula at the 16 values of the 4-bit src with scale
    /// `sv` and zero point `zv` (splats), computed by the same vector code as
    /// [`emit_vector_step`](Self::emit_vector_step), as byte tables: entry `n`'s
    /// byte `b` is lane `n` of table `b` (2 tables for 16-bit dst, 4 for f32).
    /// `zv` is as [`vec_z`](Self::vec_z) makes it.
    pub(super) fn lut_table(&mut self, sv: Value, zv: Value) -> (Vec<Value>, Vec<Value>) {
        let ys = self.lut_values(sv, zv);
        self.lut_bytes(ys)
    }

    /// The 16 results of [`lut_table`](Self::lut_table) as four F32X4 (the work
    /// float, before rounding to dst).
    pub(super) fn lut_values(&mut self, sv: Value, zv: Value) -> [Value; 4] {
        let signed = self.spec.src == DType::S4;
        let k = self.biased.then(|| self.bias_splat(self.spec.src));
        let mut ys = [sv; 4];
        for (i, y) in ys.iter_mut().enumerate() {
            let n = |l: usize| {
                let n = (4 * i + l) as i32;
                if signed && n >= 8 { n - 16 } else { n }
            };
            let ints = if self.spec.src.is_float_src() {
                // f4_e2m1: entry n's value (no NaN codes).
                let floats = (0..4).flat_map(|l| {
                    let code = (4 * i + l) as u8;
                    f4_e2m1_to_f32(code).to_bits().to_le_bytes()
                });
                Ints::Float(self.vconst_lanes(types::F32X4, floats.collect()))
            } else if self.biased && self.spec.zps.is_none() {
                // No zero point: entry n's float(q) itself (`k: None`).
                let floats = (0..4).flat_map(|l| (n(l) as f32).to_bits().to_le_bytes());
                let fq = self.vconst_lanes(types::F32X4, floats.collect());
                Ints::Biased {
                    fq,
                    fz: zv,
                    k: None,
                }
            } else if self.biased {
                // Entry n's q biased like `zv`'s z: q + 2^23 + bias(src).
                let c = MAGIC + bias(self.spec.src);
                let floats =
                    (0..4).flat_map(|l| ((n(l) as i64 + c) as f32).to_bits().to_le_bytes());
                let fq = self.vconst_lanes(types::F32X4, floats.collect());
                Ints::Biased { fq, fz: zv, k }
            } else {
                let q = (0..4).flat_map(|l| n(l).to_le_bytes()).collect();
                let q = self.vconst_lanes(types::I32X4, q);
                Ints::Plain { q, z: zv }
            };
            *y = self.eval(ints, sv, true);
        }
        ys
    }

    /// [`lut_table`](Self::lut_table) of its [`lut_values`](Self::lut_values).
    pub(super) fn lut_bytes(&mut self, ys: [Value; 4]) -> (Vec<Value>, Vec<Value>) {
        // Entry n's bytes in element order, then regrouped by byte position.
        let bytes: Vec<Value> = if self.spec.out() == DType::F32 {
            ys.iter().map(|&y| self.f32_bits(y)).collect()
        } else if self.spec.f16_tables {
            self.round_f16_host(ys)
        } else {
            let h: Vec<Value> = if self.spec.dst == DType::F16 {
                self.round_f16_looped(ys)
            } else {
                ys.iter().map(|&y| self.round_16(y)).collect()
            };
            self.pack16([h[0], h[1], h[2], h[3]]).to_vec()
        };
        let v: Vec<Value> = bytes
            .into_iter()
            .map(|x| self.b.ins().bitcast(types::I8X16, lanes(), x))
            .collect();
        let w = self.spec.out_bytes();
        if w == 2 {
            let (lo, hi) = self.planes16([v[0], v[1]]);
            return (vec![lo, hi], v);
        }
        // f32: v[k] = entries 4k..4k+4. Bytes b, b+1 of entries 0..8, then of 8..16.
        let pick = |b: u8| {
            (0..8)
                .map(move |n| 4 * n + b)
                .chain((0..8).map(move |n| 4 * n + b + 1))
        };
        let lo01 = self.shuffle(v[0], v[1], pick(0));
        let hi01 = self.shuffle(v[0], v[1], pick(2));
        let lo23 = self.shuffle(v[2], v[3], pick(0));
        let hi23 = self.shuffle(v[2], v[3], pick(2));
        let planes = vec![
            self.shuffle(lo01, lo23, (0..8).chain(16..24)),
            self.shuffle(lo01, lo23, (8..16).chain(24..32)),
            self.shuffle(hi01, hi23, (0..8).chain(16..24)),
            self.shuffle(hi01, hi23, (8..16).chain(24..32)),
        ];
        (planes, v)
    }

    /// True when a table of f4_e2m1 results under `q * s` with e8m0 scales and
    /// bf16 dst can be scale 1's table with the scale's exponent added (see
    /// [`pow2_or_lut_table`](Self::pow2_or_lut_table)).
    pub(super) fn pow2_tables_pay(&self) -> bool {
        self.spec.src == DType::F4E2M1
            && self.spec.scales == DType::E8M0
            && self.spec.out() == DType::BF16
            && self.spec.formula.nodes == STANDARD_FLOAT.nodes
    }

    /// [`lut_table`](Self::lut_table) of scale `s` (F32) and its splats `sv`,
    /// `zv`, where [`pow2_tables_pay`](Self::pow2_tables_pay). An e8m0 scale
    /// `2^k` with `-125 <= k <= 125` takes the bf16 bits of the codes' values
    /// plus `k << 7` (nonzero codes): every product `x * 2^k` (`x` of 2
    /// significant bits, `0.5 <= |x| <= 6`) is then a normal bf16, exactly. Any
    /// other scale takes `lut_table`.
    pub(super) fn pow2_or_lut_table(
        &mut self,
        s: Value,
        (sv, zv): (Value, Value),
    ) -> (Vec<Value>, Vec<Value>) {
        let bits = self.b.ins().bitcast(types::I32, lanes(), s);
        let e = self.b.ins().ushr_imm_s(bits, 23);
        let d = self.b.ins().iadd_imm_s(e, -2);
        let ok = self
            .b
            .ins()
            .icmp_imm_s(IntCC::UnsignedLessThanOrEqual, d, 250);
        let (fast, slow, join) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        let params: Vec<Value> = (0..4)
            .map(|_| self.b.append_block_param(join, types::I8X16))
            .collect();
        self.b.ins().brif(ok, fast, &[], slow, &[]);
        for (block, pow2) in [(fast, true), (slow, false)] {
            self.b.switch_to_block(block);
            let (planes, entries) = if pow2 {
                self.local_consts(|t| t.pow2_table(bits))
            } else {
                self.local_consts(|t| t.lut_table(sv, zv))
            };
            let args: Vec<BlockArg> = planes.iter().chain(&entries).map(|&v| v.into()).collect();
            self.b.ins().jump(join, &args);
        }
        self.b.switch_to_block(join);
        (params[..2].to_vec(), params[2..].to_vec())
    }

    /// The table of the e8m0 scale with f32 bits `bits` (in the range of
    /// [`pow2_or_lut_table`](Self::pow2_or_lut_table)), as `lut_table` returns
    /// it for bf16.
    fn pow2_table(&mut self, bits: Value) -> (Vec<Value>, Vec<Value>) {
        // `k << 7`: the scale's bits from bit 16 up, less those of 1.0.
        let k = self.b.ins().ushr_imm_s(bits, 16);
        let k = self.b.ins().iadd_imm_s(k, -0x3f80);
        let k = self.b.ins().ireduce(types::I16, k);
        let k = self.b.ins().splat(types::I16X8, k);
        let v: Vec<Value> = (0..2u8)
            .map(|h| {
                let codes = 8 * h..8 * h + 8;
                let one = codes
                    .clone()
                    .flat_map(|c| f32_to_bf16_bits(f4_e2m1_to_f32(c)).to_le_bytes());
                let nonzero =
                    codes.flat_map(|c| u16::from(c & 7 != 0).wrapping_neg().to_le_bytes());
                let one = self.vconst_lanes(types::I16X8, one.collect());
                let nonzero = self.vconst_lanes(types::I16X8, nonzero.collect());
                let add = self.b.ins().band(k, nonzero);
                let x = self.b.ins().iadd(one, add);
                self.b.ins().bitcast(types::I8X16, lanes(), x)
            })
            .collect();
        let (lo, hi) = self.planes16([v[0], v[1]]);
        (vec![lo, hi], v)
    }

    /// True when a segment's table can go to the host's lookups as f32 values
    /// ([`HostTable::F16`](crate::host_lut::HostTable), `Bf16`), so a whole
    /// group (`full`: the segment can be one) skips rounding it here: host
    /// lookups, f16 tables (rounded here by an F16C call) or bf16 ones (not
    /// e8m0 scales' power-of-two tables), and no 16-element step after a whole
    /// group (it looks up in this rounding, which a whole group skips).
    pub(super) fn host_rounds(&self, full: bool) -> bool {
        let inner = self.inner();
        let tables = match self.spec.dst {
            DType::F16 => self.spec.f16_tables,
            DType::BF16 => !self.pow2_tables_pay(),
            _ => false,
        };
        full && tables
            && self.spec.host_lookups.is_some()
            && inner.len.is_multiple_of(32)
            && inner.group.is_multiple_of(32)
    }

    /// Where `full` (the condition that a segment is a whole group) is given,
    /// branches on it and goes on in the partial segments' block; returns the
    /// whole groups' block.
    pub(super) fn branch_full(&mut self, full: Option<Value>) -> Option<Block> {
        full.map(|full| {
            let (fast, slow) = (self.b.create_block(), self.b.create_block());
            self.b.ins().brif(full, fast, &[], slow, &[]);
            self.b.switch_to_block(slow);
            fast
        })
    }

    /// The address of the function's 128-byte stack slot (tables, and f16
    /// rounding in a loop or by the host), created on first use.
    pub(super) fn table_slot(&mut self) -> Value {
        if let Some(a) = self.table_slot {
            return a;
        }
        let data = StackSlotData::new(StackSlotKind::ExplicitSlot, 128, 4);
        let slot = self.b.create_sized_stack_slot(data);
        let mut pos = FuncCursor::new(self.b.func).at_first_insertion_point(self.entry);
        let a = pos.ins().stack_addr(types::I64, slot, 0);
        self.table_slot = Some(a);
        a
    }

    /// Stores a table's entries (`entries`: 16 results in nibble order, as I8X16
    /// vectors) to the function's table slot; returns the slot's address.
    pub(super) fn store_table(&mut self, entries: &[Value]) -> Value {
        let addr = self.table_slot();
        for (k, &e) in entries.iter().enumerate() {
            self.b.ins().store(mem(), e, addr, 16 * k as i32);
        }
        addr
    }

    /// Table lookups over `j0..j1`: 32 elements a step (all in one call of the
    /// host's lookups where [`Spec::host_lookups`](crate::Spec::host_lookups())
    /// says), then one 16-element step
    /// when 16 are left (unless only a call's first or last segment can end
    /// short of a 32-element step: its rest is left to the scalar tail, which
    /// saves compile time); jumps to `exit` with the first index not done.
    /// `full`: see [`Steps::Double`].
    pub(super) fn emit_lut_loop(
        &mut self,
        (j0, j1): (Value, Value),
        run: Run,
        tab: &[Value],
        exit: Block,
        full: Option<Block>,
    ) {
        let inner = self.inner();
        let host = self.host_table.zip(self.spec.host_lookups);
        let steps = match host {
            Some(_) => Steps::Whole { full },
            None => Steps::Double { full },
        };
        let step = |t: &mut Self, send, sp, dp| match host {
            Some((table, h)) => {
                let stream = h == crate::HostLookups::Stream;
                crate::host_lut::lut_run(&mut t.b, (sp, dp, send), table, stream);
            }
            None => t.emit_lut_step(tab, sp, dp, 2),
        };
        if inner.len.is_multiple_of(32) && (inner.is_constant() || inner.group.is_multiple_of(32)) {
            self.emit_vector_loop((j0, j1), run, exit, steps, step);
            return;
        }
        let mid = self.b.create_block();
        let jv = self.b.append_block_param(mid, types::I64);
        self.emit_vector_loop((j0, j1), run, mid, steps, step);
        self.b.switch_to_block(mid);
        // `jv` is even (the loop peeled an odd start).
        let left = self.b.ins().isub(j1, jv);
        let one = self
            .b
            .ins()
            .icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, left, STEP);
        let step = self.b.create_block();
        self.b.ins().brif(one, step, &[], exit, &[jv.into()]);
        self.b.switch_to_block(step);
        let (sp, dp) = self.vector_addrs(run, jv);
        self.emit_lut_step(tab, sp, dp, 1);
        let jn = self.add_imm(jv, STEP);
        self.b.ins().jump(exit, &[jn.into()]);
    }

    /// `16 * halves` elements by table lookup: `8 * halves` src bytes at `sp` (from
    /// a low nibble) to dst byte address `dp`.
    fn emit_lut_step(&mut self, tab: &[Value], sp: Value, dp: Value, halves: usize) {
        let v = if halves == 2 {
            self.b.ins().load(types::I8X16, mem(), sp, 0)
        } else {
            self.load_low64(sp)
        };
        let (lo, hi) = self.nibbles(v);
        let out_bytes = 16 * self.spec.out_bytes() as i32;
        for h in 0..halves as u8 {
            // Nibbles 16h..16h+16 in element order.
            let idx = self.shuffle(lo, hi, (8 * h..8 * h + 8).flat_map(|i| [i, i + 16]));
            self.emit_lut_16(tab, idx, dp, out_bytes * h as i32);
        }
    }

    /// The 16 elements whose nibbles are `idx`, stored at `dp + off`.
    fn emit_lut_16(&mut self, tab: &[Value], idx: Value, dp: Value, off: i32) {
        let got: Vec<Value> = tab.iter().map(|&t| self.lookup(t, idx)).collect();
        let lo_bytes = |i: u8| [i, i + 16];
        let out: Vec<Value> = if got.len() == 2 {
            vec![
                self.shuffle(got[0], got[1], (0..8).flat_map(lo_bytes)),
                self.shuffle(got[0], got[1], (8..16).flat_map(lo_bytes)),
            ]
        } else {
            let b01l = self.shuffle(got[0], got[1], (0..8).flat_map(lo_bytes));
            let b01h = self.shuffle(got[0], got[1], (8..16).flat_map(lo_bytes));
            let b23l = self.shuffle(got[2], got[3], (0..8).flat_map(lo_bytes));
            let b23h = self.shuffle(got[2], got[3], (8..16).flat_map(lo_bytes));
            let words = |i: u8| [2 * i, 2 * i + 1, 2 * i + 16, 2 * i + 17];
            vec![
                self.shuffle(b01l, b23l, (0..4).flat_map(words)),
                self.shuffle(b01l, b23l, (4..8).flat_map(words)),
                self.shuffle(b01h, b23h, (0..4).flat_map(words)),
                self.shuffle(b01h, b23h, (4..8).flat_map(words)),
            ]
        };
        for (k, x) in out.into_iter().enumerate() {
            self.b.ins().store(mem(), x, dp, off + 16 * k as i32);
        }
    }

    /// Byte `idx[i]` (0..16) of `table` in lane `i`.
    fn lookup(&mut self, table: Value, idx: Value) -> Value {
        debug_assert_eq!(self.lut, Lut::Pshufb);
        self.b.ins().x86_pshufb(table, idx)
    }
}
