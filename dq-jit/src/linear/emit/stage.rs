//! Words along N (AWQ) staged by word column: per call, the words of columns
//! `c0..c1` and inputs `k0..k1` are copied once, in memory order, into the
//! caller's buffer ([`Args::stage`](super::Args)), a column's words side by side.
//! The words of one input (a column's 8 rows) lie `N / 8` words from the next
//! input's, so reading a column straight from the checkpoint touches a new cache
//! line and page for every input, for each of the tile's columns in turn; staged,
//! each line is read once for all its columns.
use cranelift_codegen::ir::{InstBuilder, Value, types};

use super::super::{STAGE_STRIDE, Shape};
use super::{Emit, mem};
use crate::host_prefetch;

/// True when a function of `s` stages word columns: columns (see
/// [`by_columns`](super::columns::by_columns)) whose words lie side by side (a
/// row stride of one word, as AWQ's).
pub(in crate::linear) fn stages(s: &Shape) -> bool {
    super::columns::by_columns(s) && s.weights.row_stride == 1
}

impl Emit<'_, '_> {
    /// Byte address of staged word `(k, c)`: column `c - c0` at `STAGE_STRIDE`
    /// words a column, input `k - k0` in it.
    pub(super) fn staged_column(&mut self, c: Value, c0: Value, k0: Value) -> Value {
        let dc = self.b.ins().isub(c, c0);
        let off = self.mul_c(dc, STAGE_STRIDE * 4);
        let base = self.b.ins().iadd(self.p.stage, off);
        let k4 = self.b.ins().ishl_imm_s(k0, 2);
        self.b.ins().isub(base, k4)
    }

    /// Copies words `(k, c)`, `k` in `k0..k1`, `c` in `c0..c1`, to the stage: four
    /// inputs of four columns a step (four 16-byte loads, a 4x4 transpose), the
    /// rest one word at a time.
    pub(super) fn stage(&mut self, c0: Value, c1: Value, k0: Value) {
        let cs = self.s.weights.col_stride.wrapping_mul(4);
        let k = self.var(types::I64, k0);
        let tail = self.b.create_block();
        let (kv, kn, head) = self.while_fits(k, 4, self.k1, tail);
        self.prefetch_ahead(kv, c0);
        let c = self.var(types::I64, c0);
        let crest = self.b.create_block();
        let (cv, cn, chead) = self.while_fits(c, 4, c1, crest);
        let src = self.word_addr(kv, cv);
        let t = self.load_transposed(src, cs);
        let col = self.staged_column(cv, c0, k0);
        let dst = self.strided(col, kv, 4);
        for (j, x) in t.into_iter().enumerate() {
            let off = (j * STAGE_STRIDE * 4) as i32;
            self.b.ins().store(mem(), x, dst, off);
        }
        self.b.def_var(c, cn);
        self.b.ins().jump(chead, &[]);
        self.b.switch_to_block(crest);
        let (cv, rhead, rdone) = self.while_below(c, c1);
        for i in 0..4 {
            let ki = self.b.ins().iadd_imm_s(kv, i);
            self.stage_word(ki, cv, c0, k0);
        }
        self.next_one(c, cv, rhead, rdone);
        self.b.def_var(k, kn);
        self.b.ins().jump(head, &[]);
        // The last inputs one word at a time.
        self.b.switch_to_block(tail);
        let (kv, thead, tdone) = self.while_below(k, self.k1);
        let c = self.var(types::I64, c0);
        let (cv, chead, cdone) = self.while_below(c, c1);
        self.stage_word(kv, cv, c0, k0);
        self.next_one(c, cv, chead, cdone);
        self.next_one(k, kv, thead, tdone);
    }

    /// Prefetches the tile's words of inputs `k + AHEAD ..` (4 rows of 8 lines
    /// from column `c0`), their address clamped to `Args::ahead_limit` so that
    /// every line lies in the words' buffer; none where that limit is null.
    fn prefetch_ahead(&mut self, k: Value, c0: Value) {
        let (go, done) = (self.b.create_block(), self.b.create_block());
        let limit = self.p.ahead_limit.expect("a staging function loads it");
        self.b.ins().brif(limit, go, &[], done, &[]);
        self.b.switch_to_block(go);
        let ka = self.b.ins().iadd_imm_s(k, host_prefetch::AHEAD);
        let a = self.word_addr(ka, c0);
        let a = self.b.ins().umin(a, limit);
        let cs = self.s.weights.col_stride.wrapping_mul(4);
        let stride = self.b.ins().iconst(types::I64, cs as i64);
        host_prefetch::rows(&mut self.b, a, stride);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(done);
    }

    /// Byte address of word `(k, c)` in the weights (a row stride of one word).
    fn word_addr(&mut self, k: Value, c: Value) -> Value {
        let cs = self.s.weights.col_stride.wrapping_mul(4);
        let a = self.strided(self.p.words, k, cs);
        self.strided(a, c, 4)
    }

    /// Copies word `(k, c)` to the stage.
    fn stage_word(&mut self, k: Value, c: Value, c0: Value, k0: Value) {
        let src = self.word_addr(k, c);
        let x = self.b.ins().load(types::I32, mem(), src, 0);
        let col = self.staged_column(c, c0, k0);
        let dst = self.strided(col, k, 4);
        self.b.ins().store(mem(), x, dst, 0);
    }
}
