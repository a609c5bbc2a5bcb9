//! 4-bit fields along N (AWQ) into 16-bit outputs, a word column (8 rows) at a time.
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, Value, types};
use dq_runtime::DType;
use dq_runtime::linear::Packing;

use super::super::GroupMode;
use super::{Emit, lanes, mem};

impl Emit<'_, '_> {
    // ---- word columns (4-bit along N into 16-bit outputs) -------------------------

    /// True when rows are done a word column at a time: 4-bit fields along N (AWQ)
    /// into f16/bf16 by table, groups by size.
    pub(super) fn by_columns(&self) -> bool {
        let q = self.s.weights;
        matches!(q.packing, Packing::Outer { .. })
            && q.bits == 4
            && self.s.out != DType::F32
            && matches!(self.s.groups, GroupMode::Size(_))
    }

    /// Rows `n0..n1` by word columns: the columns wholly inside by [`column`]
    /// (Self::column), the partial ones at the ends row by row.
    pub(super) fn columns(&mut self, n0: Value, n1: Value, k0: Value) {
        let w = 8usize;
        let c0 = self.div_c(n0, w);
        let c = self.var(types::I64, c0);
        let last = self.b.ins().iadd_imm_s(n1, w as i64 - 1);
        let c1 = self.div_c(last, w);
        let (cv, head, exit) = self.while_below(c, c1);
        let (whole, part, next) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        let nb = self.mul_c(cv, w);
        let rs = self.b.ins().umax(nb, n0);
        let ne = self.b.ins().iadd_imm_s(nb, w as i64);
        let re = self.b.ins().umin(ne, n1);
        let len = self.b.ins().isub(re, rs);
        let full = self.b.ins().icmp_imm_s(IntCC::Equal, len, w as i64);
        self.b.ins().brif(full, whole, &[], part, &[]);
        self.b.switch_to_block(whole);
        self.column(nb, k0);
        self.b.ins().jump(next, &[]);
        self.b.switch_to_block(part);
        self.rows(rs, re, k0);
        self.b.ins().jump(next, &[]);
        self.b.switch_to_block(next);
        let cn = self.b.ins().iadd_imm_s(cv, 1);
        self.b.def_var(c, cn);
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(exit);
    }

    /// The 8 rows from `nb` (a multiple of 8, all inside the rows asked for):
    /// each word is loaded once for its 8 fields, each a row of outputs.
    pub(super) fn column(&mut self, nb: Value, k0: Value) {
        let Packing::Outer { order } = self.s.weights.packing else {
            unreachable!("columns are of words along N")
        };
        let GroupMode::Size(gs) = self.s.groups else {
            unreachable!("columns have groups by size")
        };
        let q = self.s.weights;
        let w = 8usize;
        let row_bytes = self.s.k * 2;
        let rel = self.b.ins().isub(nb, self.first);
        let o = self.mul_c(rel, row_bytes);
        let out = self.b.ins().iadd(self.p.out, o);
        let cw = self.div_c(nb, w);
        let off = self.mul_c(cw, q.row_stride.wrapping_mul(4));
        let words = self.b.ins().iadd(self.p.words, off);
        // Row j of the column: output offset j * K (bytes, as an immediate where it fits).
        let row_off = |j: usize| i32::try_from(j * row_bytes).ok();
        let k = self.var(types::I64, k0);
        let (kv, head, exit) = self.while_below(k, self.k1);
        let g = self.div_c(kv, gs);
        let g1 = self.b.ins().iadd_imm_s(g, 1);
        let end = self.mul_c(g1, gs);
        let end = self.b.ins().umin(end, self.k1);
        for j in 0..w {
            let n = self.b.ins().iadd_imm_s(nb, j as i64);
            let z = self.zeff(n, g);
            let s = self.scale(n, g);
            self.table(z, s, 64 * j as i32);
        }
        // 16 inputs a step.
        let (vhead, vbody, tail) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.ins().jump(vhead, &[]);
        self.b.switch_to_block(vhead);
        let kv = self.b.use_var(k);
        let ke = self.b.ins().iadd_imm_s(kv, 16);
        let fits = self.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, ke, end);
        self.b.ins().brif(fits, vbody, &[], tail, &[]);
        self.b.switch_to_block(vbody);
        let a = self.strided(words, kv, q.col_stride.wrapping_mul(4));
        let v = self.gather(a, 16, q.col_stride.wrapping_mul(4));
        let v: Vec<Value> = v
            .into_iter()
            .map(|x| self.b.ins().bitcast(types::I8X16, lanes(), x))
            .collect();
        let o = self.b.ins().ishl_imm_s(kv, 1);
        let oa = self.b.ins().iadd(out, o);
        // Byte b of the 16 words (fields 2b and 2b + 1), then the two nibbles.
        let mut nibbles = [None; 8];
        for b in 0..4u8 {
            let pick: [u8; 16] = std::array::from_fn(|i| if i < 8 { b + 4 * i as u8 } else { 0 });
            let x01 = self.shuffle(v[0], v[1], pick);
            let x23 = self.shuffle(v[2], v[3], pick);
            let qdq: [u8; 16] = std::array::from_fn(|i| if i < 8 { i as u8 } else { i as u8 + 8 });
            let x = self.shuffle(x01, x23, qdq);
            let lo = self.and_c8(x);
            let x32 = self.b.ins().bitcast(types::I32X4, lanes(), x);
            let hi = self.ushr(x32, 4);
            let hi = self.b.ins().bitcast(types::I8X16, lanes(), hi);
            let hi = self.and_c8(hi);
            nibbles[2 * b as usize] = Some(lo);
            nibbles[2 * b as usize + 1] = Some(hi);
        }
        for j in 0..w {
            let c = nibbles[usize::from(order[j])].expect("every field");
            let tl = self
                .b
                .ins()
                .load(types::I8X16, mem(), self.slot, 64 * j as i32);
            let th = self
                .b
                .ins()
                .load(types::I8X16, mem(), self.slot, 64 * j as i32 + 16);
            match row_off(j) {
                Some(ro) => self.lookup16((tl, th), c, oa, ro),
                None => {
                    let ro = self.i64c((j * row_bytes) as i64);
                    let ra = self.b.ins().iadd(oa, ro);
                    self.lookup16((tl, th), c, ra, 0);
                }
            }
        }
        self.b.def_var(k, ke);
        self.b.ins().jump(vhead, &[]);
        // The rest one input at a time: one word, 8 rows.
        self.b.switch_to_block(tail);
        let (kv, thead, done) = self.while_below(k, end);
        let word = self.word_at(words, kv, q.col_stride.wrapping_mul(4));
        let o = self.b.ins().ishl_imm_s(kv, 1);
        let oa = self.b.ins().iadd(out, o);
        for (j, &f) in order.iter().enumerate() {
            let sh = self.i32c(4 * i64::from(f));
            let c = self.field(word, sh, 4);
            let ro = self.i64c((j * row_bytes) as i64);
            let ra = self.b.ins().iadd(oa, ro);
            self.lookup1(c, 64 * j as i32, ra, 0);
        }
        let kn = self.b.ins().iadd_imm_s(kv, 1);
        self.b.def_var(k, kn);
        self.b.ins().jump(thead, &[]);
        self.b.switch_to_block(done);
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(exit);
    }

    /// `x & 0x0f` in every byte.
    pub(super) fn and_c8(&mut self, x: Value) -> Value {
        let m = self.vconst_bytes(types::I8X16, [0x0f; 16]);
        self.b.ins().band(x, m)
    }
}
