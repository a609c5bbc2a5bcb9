//! 4-bit fields along K into 16-bit outputs, four rows at a time, where either
//! the rows' words lie side by side (GPTQ: word `n + (k / 8) N`; one 16-byte
//! load holds a word of each of four rows, four loads and a 4x4 transpose give
//! each row its next four words, 32 inputs) or a row's words do
//! (compressed-tensors: word `k / 8 + n K / 8`; one 16-byte load a row).
use cranelift_codegen::ir::{InstBuilder, Value, types};
use dq_runtime::DType;
use dq_runtime::linear::Packing;

use super::super::{GroupMode, Shape, Store};
use super::{Emit, Row, lanes, mem};
use crate::lane_math::LaneMath;

/// Rows in a block.
const ROWS: usize = 4;

/// Byte shuffle of I32 lanes `l` of two vectors (`0..4` the first, `4..8` the second).
pub(super) fn lanes32(l: [u8; 4]) -> [u8; 16] {
    std::array::from_fn(|i| 4 * l[i / 4] + (i % 4) as u8)
}

/// True when rows go four at a time: 4-bit fields along K, a row or column
/// stride of one word, f16/bf16 out by table, groups by size.
pub(super) fn by_quads(s: &Shape) -> bool {
    let q = s.weights;
    q.packing == Packing::Inner
        && q.bits == 4
        && (q.row_stride == 1 || q.col_stride == 1)
        && s.out != DType::F32
        && matches!(s.groups, GroupMode::Size(_))
}

impl Emit<'_, '_> {
    /// Rows `n0..n1`: blocks of four by [`quad`](Self::quad), the last few row by row.
    pub(super) fn quads(&mut self, n0: Value, n1: Value, k0: Value) {
        let n = self.var(types::I64, n0);
        let rest = self.b.create_block();
        let (nv, ne, head) = self.while_fits(n, ROWS as i64, n1, rest);
        self.quad(nv, k0);
        self.b.def_var(n, ne);
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(rest);
        let nv = self.b.use_var(n);
        self.rows(nv, n1, k0);
    }

    /// Rows `nb..nb + 4`, inputs `k0..k1`, a run of one group at a time: the four
    /// rows' tables, 32 inputs a step, the rest one at a time row by row.
    fn quad(&mut self, nb: Value, k0: Value) {
        let GroupMode::Size(gs) = self.s.groups else {
            unreachable!("quads have groups by size")
        };
        let rows: [Row; ROWS] = std::array::from_fn(|j| {
            let n = self.b.ins().iadd_imm_s(nb, j as i64);
            self.row_bases(n)
        });
        let k = self.var(types::I64, k0);
        let (kv, head, exit) = self.while_below(k, self.k1);
        let (g, end) = self.group_run(kv, gs);
        let slot = self.slot;
        let prev = self.table_halves(g);
        let ns = rows.map(|r| r.n);
        let (zs, ss) = self.params4(ns, g);
        let t = self.tables(&[zs], &[ss], ROWS, 0);
        let tabs: [(Value, Value); ROWS] = std::array::from_fn(|j| t[j]);
        let tail = self.b.create_block();
        self.if_aligned(kv, 8, tail);
        match self.s.store {
            Store::Lines => self.streamed_run(
                (k, end, rows[0].out),
                tail,
                &mut |e, kv| e.quad_word(&rows, kv, &tabs),
                &mut |e, kv| e.quad_step(&rows, kv, &tabs, true),
            ),
            Store::Skewed(at) => self.skewed_run(
                (k, end),
                (kv, k0, rows[0].out),
                (tail, at),
                &mut |e, kv| e.quad_word(&rows, kv, &tabs),
                &mut |e, kv| e.quad_step(&rows, kv, &tabs, true),
                &mut |e, l, d| e.quad_across(&rows, l, prev, d),
            ),
            Store::Plain => self.step_loop((k, end), 32, tail, &mut |e, kv| {
                e.quad_step(&rows, kv, &tabs, false)
            }),
        }
        let kt = self.b.use_var(k);
        for (j, row) in rows.iter().enumerate() {
            self.b.def_var(k, kt);
            let (kv, thead, done) = self.while_below(k, end);
            let c = self.code1(*row, kv);
            let o = self.mul_c(kv, 2);
            let a = self.b.ins().iadd(row.out, o);
            self.lookup1(c, 64 * j as i32, a, 0);
            self.next_one(k, kv, thead, done);
        }
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(exit);
        self.slot = slot;
    }

    /// Zero points (I32X4) and scales (F32X4) of rows `ns`, group `g`, a row a lane.
    pub(super) fn params4(&mut self, ns: [Value; 4], g: Value) -> (Value, Value) {
        let z = ns.map(|n| self.zeff(n, g));
        let s = ns.map(|n| self.scale_bits(n, g));
        let zv = self.lanes4(z);
        let sv = self.lanes4(s);
        (zv, self.widen_scale(sv))
    }

    /// An I32X4 of four I32 values.
    pub(super) fn lanes4(&mut self, x: [Value; 4]) -> Value {
        let mut v = self.b.ins().scalar_to_vector(types::I32X4, x[0]);
        for (l, &x) in x.iter().enumerate().skip(1) {
            v = self.b.ins().insertlane(v, x, l as u8);
        }
        v
    }

    /// The 4x4 transpose of I32 lanes: lane `j` of result `i` is lane `i` of `v[j]`
    /// (I8X16 in and out).
    pub(super) fn transpose4(&mut self, v: [Value; 4]) -> [Value; 4] {
        let t0 = self.shuffle(v[0], v[1], lanes32([0, 4, 1, 5]));
        let t1 = self.shuffle(v[2], v[3], lanes32([0, 4, 1, 5]));
        let t2 = self.shuffle(v[0], v[1], lanes32([2, 6, 3, 7]));
        let t3 = self.shuffle(v[2], v[3], lanes32([2, 6, 3, 7]));
        [
            self.shuffle(t0, t1, lanes32([0, 1, 4, 5])),
            self.shuffle(t0, t1, lanes32([2, 3, 6, 7])),
            self.shuffle(t2, t3, lanes32([0, 1, 4, 5])),
            self.shuffle(t2, t3, lanes32([2, 3, 6, 7])),
        ]
    }

    /// 8 inputs from `k` (a multiple of 8) of the four rows: their word `k / 8`.
    fn quad_word(&mut self, rows: &[Row; ROWS], k: Value, tabs: &[(Value, Value); ROWS]) {
        let q = self.s.weights;
        let step = q.col_stride.wrapping_mul(4);
        let kw = self.b.ins().ushr_imm_s(k, 3);
        let side_by_side = q.row_stride == 1;
        let x = if side_by_side {
            let a = self.strided(rows[0].words, kw, step);
            Some(self.b.ins().load(types::I8X16, mem(), a, 0))
        } else {
            None
        };
        let o = self.mul_c(k, 2);
        for (j, (row, &t)) in rows.iter().zip(tabs).enumerate() {
            let xj = match x {
                Some(x) => {
                    let xj = self.shuffle(x, x, lanes32([j as u8; 4]));
                    self.b.ins().bitcast(types::I32X4, lanes(), xj)
                }
                None => {
                    let a = self.strided(row.words, kw, step);
                    let w = self.b.ins().load(types::I32, mem(), a, 0);
                    self.b.ins().splat(types::I32X4, w)
                }
            };
            let [c, _] = self.nibble_codes(xj);
            let [y, _] = self.lookup16v(t, c);
            let oa = self.b.ins().iadd(row.out, o);
            self.b.ins().store(mem(), y, oa, 0);
        }
    }

    /// Words `k / 8 .. k / 8 + 4` of each of the four rows (I8X16), `k` a
    /// multiple of 8.
    fn quad_words(&mut self, rows: &[Row; ROWS], k: Value) -> [Value; ROWS] {
        let q = self.s.weights;
        let step = q.col_stride.wrapping_mul(4);
        let kw = self.b.ins().ushr_imm_s(k, 3);
        if q.row_stride == 1 {
            let a = self.strided(rows[0].words, kw, step);
            self.load_transposed(a, step)
        } else {
            rows.map(|row| {
                let a = self.strided(row.words, kw, step);
                self.b.ins().load(types::I8X16, mem(), a, 0)
            })
        }
    }

    /// The line of inputs `l..l + 32` of the four rows, its first `d` inputs by
    /// the previous group's tables (at `prev`) and the rest by this group's,
    /// streamed.
    fn quad_across(&mut self, rows: &[Row; ROWS], l: Value, prev: Value, d: i64) {
        let r = self.quad_words(rows, l);
        let o = self.mul_c(l, 2);
        for (j, row) in rows.iter().enumerate() {
            let x = self.b.ins().bitcast(types::I32X4, lanes(), r[j]);
            let codes = self.nibble_codes(x);
            let line = self.line_of(codes, (prev, 64 * j as i32), d);
            let oa = self.b.ins().iadd(row.out, o);
            crate::host_store::line(&mut self.b, oa, line);
        }
    }

    /// 32 inputs from `k` (a multiple of 8) of the four rows; `stream`: each
    /// row's a non-temporal line.
    fn quad_step(
        &mut self,
        rows: &[Row; ROWS],
        k: Value,
        tabs: &[(Value, Value); ROWS],
        stream: bool,
    ) {
        let r = self.quad_words(rows, k);
        let o = self.mul_c(k, 2);
        for j in 0..ROWS {
            let x = self.b.ins().bitcast(types::I32X4, lanes(), r[j]);
            let oa = self.b.ins().iadd(rows[j].out, o);
            self.lut_words(x, oa, tabs[j], stream);
        }
    }
}
