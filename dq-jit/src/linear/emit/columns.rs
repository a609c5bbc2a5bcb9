//! 4-bit fields along N (AWQ) into 16-bit outputs, a word column (8 rows) at a time.
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, Value, types};
use dq_runtime::DType;
use dq_runtime::linear::Packing;

use super::super::{GroupMode, PackShape, Shape, Store};
use super::{Emit, lanes, mem};
use crate::lane_math::{Bin, LaneMath};

/// True when rows are done a word column at a time: 4-bit fields along N (AWQ)
/// into f16/bf16 by table, groups by size.
pub(super) fn by_columns(s: &Shape) -> bool {
    let q = s.weights;
    matches!(q.packing, Packing::Outer { .. })
        && q.bits == 4
        && s.out != DType::F32
        && matches!(s.groups, GroupMode::Size(_))
}

impl Emit<'_, '_> {
    // ---- word columns (4-bit along N into 16-bit outputs) -------------------------

    /// Rows `n0..n1` by word columns: the columns wholly inside by [`column`]
    /// (Self::column), the partial ones at the ends row by row.
    pub(super) fn columns(&mut self, n0: Value, n1: Value, k0: Value) {
        let w = 8usize;
        let c0 = self.div_c(n0, w);
        let c = self.var(types::I64, c0);
        let last = self.b.ins().iadd_imm_s(n1, w as i64 - 1);
        let c1 = self.div_c(last, w);
        let staged = super::stages(self.s);
        if staged {
            self.stage(c0, c1, k0);
        }
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
        let (words, step) = if staged {
            (self.staged_column(cv, c0, k0), 4)
        } else {
            let q = self.s.weights;
            let off = self.mul_c(cv, q.row_stride.wrapping_mul(4));
            let words = self.b.ins().iadd(self.p.words, off);
            (words, q.col_stride.wrapping_mul(4))
        };
        self.column(nb, k0, words, step);
        self.b.ins().jump(next, &[]);
        self.b.switch_to_block(part);
        self.rows(rs, re, k0);
        self.b.ins().jump(next, &[]);
        self.b.switch_to_block(next);
        self.next_one(c, cv, head, exit);
    }

    /// The 8 rows from `nb` (a multiple of 8, all inside the rows asked for),
    /// their word of input `k` at byte address `words + k * step`: each word is
    /// loaded once for its 8 fields, each a row of outputs.
    pub(super) fn column(&mut self, nb: Value, k0: Value, words: Value, step: usize) {
        let Packing::Outer { order } = self.s.weights.packing else {
            unreachable!("columns are of words along N")
        };
        let GroupMode::Size(gs) = self.s.groups else {
            unreachable!("columns have groups by size")
        };
        let w = 8usize;
        let row_bytes = self.s.k * 2;
        let rel = self.b.ins().isub(nb, self.first);
        let o = self.mul_c(rel, row_bytes);
        let out = self.b.ins().iadd(self.p.out, o);
        let k = self.var(types::I64, k0);
        let (kv, head, exit) = self.while_below(k, self.k1);
        let (g, end) = self.group_run(kv, gs);
        // Skewed: group g's tables in half g % 2 of the slot, the previous
        // group's in the other.
        let slot = self.slot;
        let prev = self.table_halves(g);
        let (zs, ss) = self.column_params(nb, g);
        self.tables(&zs, &ss, w, 0);
        let tail = self.b.create_block();
        let src = (words, step);
        match self.s.store {
            Store::Lines => self.streamed_run(
                (k, end, out),
                tail,
                &mut |e, kv| e.column_step(src, out, kv, 8),
                &mut |e, kv| e.column_line(src, (out, kv), prev, 0),
            ),
            Store::Skewed(at) => self.skewed_run(
                (k, end),
                (kv, k0, out),
                (tail, at),
                &mut |e, kv| e.column_step(src, out, kv, 8),
                &mut |e, kv| e.column_line(src, (out, kv), prev, 0),
                &mut |e, l, d| e.column_line(src, (out, l), prev, d),
            ),
            Store::Plain => self.step_loop((k, end), 16, tail, &mut |e, kv| {
                e.column_step(src, out, kv, 16)
            }),
        }
        // The rest one input at a time: one word, 8 rows.
        let (kv, thead, done) = self.while_below(k, end);
        let word = self.word_at(words, kv, step);
        let o = self.b.ins().ishl_imm_s(kv, 1);
        let oa = self.b.ins().iadd(out, o);
        for (j, &f) in order.iter().enumerate() {
            let sh = self.i32c(4 * i64::from(f));
            let c = self.field(word, sh, 4);
            let (ra, ro) = self.offset(oa, j * row_bytes);
            self.lookup1(c, 64 * j as i32, ra, ro);
        }
        self.next_one(k, kv, thead, done);
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(exit);
        self.slot = slot;
    }

    /// The line of inputs `l..l + 32` of the column's rows at `out`, its first
    /// `d` inputs by the previous group's tables (at `prev`) and the rest by
    /// this group's, streamed (`d` 0: a line of one group).
    fn column_line(
        &mut self,
        (words, step): (Value, usize),
        (out, l): (Value, Value),
        prev: Value,
        d: i64,
    ) {
        let Packing::Outer { order } = self.s.weights.packing else {
            unreachable!("columns are of words along N")
        };
        let row_bytes = self.s.k * 2;
        let places = self.column_places((words, step), l, 32);
        let o = self.b.ins().ishl_imm_s(l, 1);
        let oa = self.b.ins().iadd(out, o);
        for (j, &f) in order.iter().enumerate() {
            let f = usize::from(f);
            let codes = [0, 1].map(|h| self.field_codes(&places[h], f));
            let line = self.line_of(codes, (prev, 64 * j as i32), d);
            let (ra, ro) = self.offset(oa, j * row_bytes);
            let la = self.b.ins().iadd_imm_s(ra, i64::from(ro));
            crate::host_store::line(&mut self.b, la, line);
        }
    }

    /// `inputs` (8 or 16) inputs from `k` of the column's 8 rows at `out`, the
    /// group's tables in the slot, with plain stores.
    fn column_step(&mut self, src: (Value, usize), out: Value, k: Value, inputs: usize) {
        let Packing::Outer { order } = self.s.weights.packing else {
            unreachable!("columns are of words along N")
        };
        let row_bytes = self.s.k * 2;
        let places = self.column_places(src, k, inputs);
        let o = self.b.ins().ishl_imm_s(k, 1);
        let oa = self.b.ins().iadd(out, o);
        for (j, &f) in order.iter().enumerate() {
            let t = self.stored_table(64 * j as i32);
            let (ra, ro) = self.offset(oa, j * row_bytes);
            let c = self.field_codes(&places[0], usize::from(f));
            if inputs == 8 {
                let [y, _] = self.lookup16v(t, c);
                self.b.ins().store(mem(), y, ra, ro);
            } else {
                self.lookup16(t, c, ra, ro);
            }
        }
    }

    /// The [`byte_places`](Self::byte_places) of `inputs` (8, 16 or 32) words
    /// from input `k` of a column (`words + k * step`), 16 inputs a result (an
    /// 8-input step takes its 8 words twice).
    fn column_places(
        &mut self,
        (words, step): (Value, usize),
        k: Value,
        inputs: usize,
    ) -> Vec<[Value; 4]> {
        let a = self.strided(words, k, step);
        let mut v: Vec<Value> = self
            .gather(a, inputs, step)
            .into_iter()
            .map(|x| self.b.ins().bitcast(types::I8X16, lanes(), x))
            .collect();
        if inputs == 8 {
            v.extend_from_within(..);
        }
        v.chunks_exact(4).map(|v| self.byte_places(v)).collect()
    }

    /// Zero points (two I32X4) and scales (two F32X4) of the column's 8 rows from
    /// `nb` (a multiple of 8), group `g`, a row a lane: 4-bit zero points along N
    /// (AWQ's, GPTQ's) from one word, its fields put in row order by byte
    /// shuffles; 8 scales side by side from one load; else row by row.
    fn column_params(&mut self, nb: Value, g: Value) -> ([Value; 2], [Value; 2]) {
        let rows: [Value; 8] = std::array::from_fn(|j| self.b.ins().iadd_imm_s(nb, j as i64));
        let zs = match self.s.zeros {
            Some(
                z @ PackShape {
                    bits: 4,
                    packing: Packing::Outer { order },
                    ..
                },
            ) => {
                let cw = self.div_c(nb, 8);
                let a = self.mul_c(cw, z.row_stride.wrapping_mul(4));
                let b = self.mul_c(g, z.col_stride.wrapping_mul(4));
                let off = self.b.ins().iadd(a, b);
                let addr = self.b.ins().iadd(self.p.zeros, off);
                let word = self.b.ins().load(types::I32, mem(), addr, 0);
                let x = self.b.ins().scalar_to_vector(types::I32X4, word);
                // Byte f: field f of the word.
                let [fields, _] = self.nibble_codes(x);
                let d = z.offset.wrapping_sub(self.s.weights.offset) as u32;
                std::array::from_fn(|h| {
                    let pick: [u8; 16] = std::array::from_fn(|i| {
                        if i % 4 == 0 {
                            order[4 * h + i / 4]
                        } else {
                            0x80
                        }
                    });
                    let m = self.vconst_bytes(types::I8X16, pick);
                    let v = self.b.ins().x86_pshufb(fields, m);
                    let v = self.b.ins().bitcast(types::I32X4, lanes(), v);
                    self.bin_c(Bin::Add, v, d)
                })
            }
            _ => std::array::from_fn(|h| {
                let z = std::array::from_fn(|i| self.zeff(rows[4 * h + i], g));
                self.lanes4(z)
            }),
        };
        let ss = if self.s.scale_strides.0 == 1 {
            let i = self.mul_c(g, self.s.scale_strides.1);
            let i = self.b.ins().iadd(i, nb);
            let size = self.s.scale.size();
            let off = self.mul_c(i, size);
            let addr = self.b.ins().iadd(self.p.scales, off);
            std::array::from_fn(|h| {
                let bits = if size == 4 {
                    self.b.ins().load(types::I32X4, mem(), addr, 16 * h as i32)
                } else {
                    let x = self.b.ins().load(types::I16X8, mem(), addr, 0);
                    if h == 0 {
                        self.b.ins().uwiden_low(x)
                    } else {
                        self.b.ins().uwiden_high(x)
                    }
                };
                self.widen_scale(bits)
            })
        } else {
            std::array::from_fn(|h| {
                let s = std::array::from_fn(|i| self.scale_bits(rows[4 * h + i], g));
                let s = self.lanes4(s);
                self.widen_scale(s)
            })
        };
        (zs, ss)
    }

    /// The bytes of 16 words (four I8X16 of 4 words, in order) by place: result
    /// `b` holds byte `b` of word `i` in its byte `i` (each vector's bytes grouped
    /// by place, then a 4x4 transpose of those groups).
    fn byte_places(&mut self, v: &[Value]) -> [Value; 4] {
        let by_place: [u8; 16] = std::array::from_fn(|i| (4 * (i % 4) + i / 4) as u8);
        let g: [Value; 4] = std::array::from_fn(|i| self.shuffle(v[i], v[i], by_place));
        self.transpose4(g)
    }

    /// Field `f` of 16 words from their [`byte_places`](Self::byte_places),
    /// byte `i` for word `i`.
    fn field_codes(&mut self, places: &[Value; 4], f: usize) -> Value {
        let x = places[f / 2];
        if f.is_multiple_of(2) {
            return self.and_c8(x);
        }
        let x32 = self.b.ins().bitcast(types::I32X4, lanes(), x);
        let hi = self.ushr(x32, 4);
        let hi = self.b.ins().bitcast(types::I8X16, lanes(), hi);
        self.and_c8(hi)
    }

    /// `x & 0x0f` in every byte.
    pub(super) fn and_c8(&mut self, x: Value) -> Value {
        let m = self.vconst_bytes(types::I8X16, [0x0f; 16]);
        self.b.ins().band(x, m)
    }
}
