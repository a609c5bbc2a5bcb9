//! Codes along N (gpt-oss' `[E, K, N]` output), 4 bits, 8 columns by one group
//! of rows at a time: each column's group looked up 16 codes a step into a stack
//! buffer (a column of the block after another), then the block transposed in
//! registers (8 x 8 16-bit outputs, or 4 x 4 f32 twice) and written 16 bytes a
//! row, instead of one output a store down each column.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, StackSlotData, StackSlotKind, Value, types};

use super::super::{CodedShape, Walk};
use super::{Emit, HI_WORDS, LO_WORDS, mem};
use crate::lane_math::LaneMath;

/// Largest group the blocks take (their buffer holds 8 columns of one group).
const MAX_GROUP: usize = 256;

/// 32-bit lanes 0, 1 of `a` and `b` interleaved (`punpckldq`).
const LO_DWORDS: [u8; 16] = [0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23];
/// 32-bit lanes 2, 3 of `a` and `b` interleaved (`punpckhdq`).
const HI_DWORDS: [u8; 16] = [8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31];
/// The low halves of `a` and `b` (`punpcklqdq`).
const LO_QWORDS: [u8; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23];
/// The high halves of `a` and `b` (`punpckhqdq`).
const HI_QWORDS: [u8; 16] = [8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31];

/// True when the shape's columns go by blocks: codes along N, 4 bits, groups of
/// a multiple of 16 rows (at most [`MAX_GROUP`]) that every
/// column starts at the same row (the column stride a multiple of the group),
/// at least 8 columns.
pub(super) fn by_blocks(s: &CodedShape) -> bool {
    let gs = s.group_size;
    s.walk() == Walk::Columns
        && s.bits == 4
        && gs.is_multiple_of(16)
        && gs <= MAX_GROUP
        && s.col_stride.is_multiple_of(gs)
        && s.k >= 8
}

impl Emit<'_, '_> {
    /// Rows `n0..n1`: where the offset is a multiple of the group (so groups
    /// start at rows that are), the whole groups inside by blocks, 8 columns at a
    /// time (the last `K % 8` columns and the partial groups at either end a
    /// column at a time); else everything a column at a time.
    pub(super) fn column_blocks(&mut self, n0: Value, n1: Value) {
        let (gs, k) = (self.s.group_size, self.s.k);
        let (zero, kdim) = (self.i64c(0), self.i64c(k as i64));
        let (fast, slow, done) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        let phase = self.b.ins().urem_imm_s(self.p.offset, gs as i64);
        let aligned = self.b.ins().icmp_imm_s(IntCC::Equal, phase, 0);
        self.b.ins().brif(aligned, fast, &[], slow, &[]);
        self.b.switch_to_block(slow);
        self.column_range(n0, n1, zero, kdim);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(fast);
        // Whole groups: rows a..b.
        let up = self.b.ins().iadd_imm_s(n0, gs as i64 - 1);
        let up = self.div_c(up, gs);
        let up = self.mul_c(up, gs);
        let a = self.b.ins().umin(up, n1);
        let span = self.b.ins().isub(n1, a);
        let whole = self.div_c(span, gs);
        let whole = self.mul_c(whole, gs);
        let b = self.b.ins().iadd(a, whole);
        self.column_range(n0, a, zero, kdim);
        let buf = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            (8 * gs * self.osz()) as u32,
            4,
        ));
        let buf = self.b.ins().stack_addr(types::I64, buf, 0);
        let nb = self.var(types::I64, a);
        let (nv, nhead, nexit) = self.while_below(nb, b);
        let k8 = k - k % 8;
        let last = self.i64c(k8 as i64);
        let kb = self.var(types::I64, zero);
        let (kv, khead, kexit) = self.while_below(kb, last);
        self.block8(nv, kv, buf);
        let kn = self.b.ins().iadd_imm_s(kv, 8);
        self.close(kb, kn, khead, kexit);
        if k8 < k {
            let ne = self.b.ins().iadd_imm_s(nv, gs as i64);
            self.column_range(nv, ne, last, kdim);
        }
        let nn = self.b.ins().iadd_imm_s(nv, gs as i64);
        self.close(nb, nn, nhead, nexit);
        self.column_range(b, n1, zero, kdim);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(done);
    }

    /// Rows `nb..nb + gs` (one group, `nb` a multiple of it) of columns
    /// `kb..kb + 8`, through `buf` (8 columns of `gs` outputs).
    fn block8(&mut self, nb: Value, kb: Value, buf: Value) {
        let (gs, osz) = (self.s.group_size, self.osz());
        let col_bytes = gs * osz;
        for c in 0..8 {
            let kc = self.b.ins().iadd_imm_s(kb, c as i64);
            let cs = self.mul_c(kc, self.s.col_stride);
            let col = self.b.ins().iadd(self.p.offset, cs);
            let p0 = self.b.ins().iadd(col, nb);
            let g = self.div_c(p0, gs);
            let grp = self.group(g);
            let planes = self.table(grp);
            for s in 0..gs / 16 {
                let pp = self.b.ins().iadd_imm_s(p0, 16 * s as i64);
                let codes = self.codes16(pp);
                for (j, v) in self.lookup(&planes, codes).into_iter().enumerate() {
                    let at = (col_bytes * c + 16 * osz * s + 16 * j) as i32;
                    self.b.ins().store(mem(), v, buf, at);
                }
            }
        }
        let row0 = self.out_at(nb, kb);
        let row_bytes = self.s.k * osz;
        // Rows of 16 bytes: 8 16-bit outputs, or 4 f32 (two a row of the block).
        let (rows, quads) = if osz == 2 { (8, 1) } else { (4, 2) };
        for r in 0..gs / rows {
            for q in 0..quads {
                let cols = 8 / quads;
                let v: Vec<Value> = (0..cols)
                    .map(|c| {
                        let at = (col_bytes * (cols * q + c) + 16 * r) as i32;
                        self.b.ins().load(types::I8X16, mem(), buf, at)
                    })
                    .collect();
                let t = if osz == 2 {
                    self.transpose8(std::array::from_fn(|c| v[c])).to_vec()
                } else {
                    self.transpose4([v[0], v[1], v[2], v[3]]).to_vec()
                };
                for (i, row) in t.into_iter().enumerate() {
                    let off = (rows * r + i).wrapping_mul(row_bytes) + 16 * q;
                    let (a, imm) = match i32::try_from(off) {
                        Ok(o) => (row0, o),
                        Err(_) => {
                            let c = self.i64c(off as i64);
                            (self.b.ins().iadd(row0, c), 0)
                        }
                    };
                    self.b.ins().store(mem(), row, a, imm);
                }
            }
        }
    }

    /// Rows of four f32 lanes of 4 columns (`v[c]`, lane `r`: row `r`) as the 4
    /// rows (result `r`, lane `c`).
    fn transpose4(&mut self, v: [Value; 4]) -> [Value; 4] {
        let (t0, t1) = (
            self.shuffle(v[0], v[1], LO_DWORDS),
            self.shuffle(v[0], v[1], HI_DWORDS),
        );
        let (t2, t3) = (
            self.shuffle(v[2], v[3], LO_DWORDS),
            self.shuffle(v[2], v[3], HI_DWORDS),
        );
        [
            self.shuffle(t0, t2, LO_QWORDS),
            self.shuffle(t0, t2, HI_QWORDS),
            self.shuffle(t1, t3, LO_QWORDS),
            self.shuffle(t1, t3, HI_QWORDS),
        ]
    }

    /// Rows of eight 16-bit lanes of 8 columns (`v[c]`, lane `r`: row `r`) as
    /// the 8 rows (result `r`, lane `c`).
    fn transpose8(&mut self, v: [Value; 8]) -> [Value; 8] {
        // Pairs of columns by rows 0..4 (lo) and 4..8 (hi).
        let lo: [Value; 4] =
            std::array::from_fn(|i| self.shuffle(v[2 * i], v[2 * i + 1], LO_WORDS));
        let hi: [Value; 4] =
            std::array::from_fn(|i| self.shuffle(v[2 * i], v[2 * i + 1], HI_WORDS));
        let mut rows = [v[0]; 8];
        for (half, x) in [lo, hi].into_iter().enumerate() {
            // Quads of columns: rows 0, 1 (c) and 2, 3 (d) of the half.
            let c: [Value; 2] =
                std::array::from_fn(|j| self.shuffle(x[2 * j], x[2 * j + 1], LO_DWORDS));
            let d: [Value; 2] =
                std::array::from_fn(|j| self.shuffle(x[2 * j], x[2 * j + 1], HI_DWORDS));
            let r = 4 * half;
            rows[r] = self.shuffle(c[0], c[1], LO_QWORDS);
            rows[r + 1] = self.shuffle(c[0], c[1], HI_QWORDS);
            rows[r + 2] = self.shuffle(d[0], d[1], LO_QWORDS);
            rows[r + 3] = self.shuffle(d[0], d[1], HI_QWORDS);
        }
        rows
    }
}
