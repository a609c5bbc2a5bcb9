//! Row by row: runs of one group, table lookups and formula steps.
use cranelift_codegen::ir::{InstBuilder, Value, types};
use cranelift_frontend::Variable;
use dq_runtime::DType;
use dq_runtime::linear::Packing;

use super::super::GroupMode;
use super::{Emit, HI_BYTES, LO_BYTES, Row, lanes, mem};
use crate::lane_math::LaneMath;

impl Emit<'_, '_> {
    // ---- loops ------------------------------------------------------------------

    /// `for n in n0..n1 { row(n) }`.
    pub(super) fn rows(&mut self, n0: Value, n1: Value, k0: Value) {
        let n = self.var(types::I64, n0);
        let (nv, head, exit) = self.while_below(n, n1);
        let row = self.row_bases(nv);
        self.row(row, k0);
        self.next_one(n, nv, head, exit);
    }

    pub(super) fn row_bases(&mut self, n: Value) -> Row {
        let rel = self.b.ins().isub(n, self.first);
        let o = self.mul_c(rel, self.s.k * self.osz());
        let out = self.b.ins().iadd(self.p.out, o);
        let q = self.s.weights;
        let w = (32 / q.bits) as usize;
        let (words, shift) = match q.packing {
            Packing::Inner => {
                let off = self.mul_c(n, q.row_stride.wrapping_mul(4));
                (self.b.ins().iadd(self.p.words, off), self.i32c(0))
            }
            Packing::Outer { order } => {
                let c = self.div_c(n, w);
                let off = self.mul_c(c, q.row_stride.wrapping_mul(4));
                let base = self.b.ins().iadd(self.p.words, off);
                (base, self.outer_shift(order, q.bits, n))
            }
        };
        Row {
            n,
            out,
            words,
            shift,
        }
    }

    /// The field of input `k` (I64) of `row`, plus nothing (I32).
    pub(super) fn code1(&mut self, row: Row, k: Value) -> Value {
        let q = self.s.weights;
        let w = (32 / q.bits) as usize;
        match q.packing {
            Packing::Inner => {
                let kw = self.div_c(k, w);
                let word = self.word_at(row.words, kw, q.col_stride.wrapping_mul(4));
                let f = self.rem_c(k, w);
                let f = self.mul_c(f, q.bits as usize);
                let sh = self.b.ins().ireduce(types::I32, f);
                self.field(word, sh, q.bits)
            }
            Packing::Outer { .. } => {
                let word = self.word_at(row.words, k, q.col_stride.wrapping_mul(4));
                self.field(word, row.shift, q.bits)
            }
        }
    }

    /// Inputs `k0..k1` of `row`.
    pub(super) fn row(&mut self, row: Row, k0: Value) {
        let k = self.var(types::I64, k0);
        let (kv, head, exit) = self.while_below(k, self.k1);
        match self.s.groups {
            GroupMode::Index => {
                let a = self.b.ins().ishl_imm_s(kv, 2);
                let a = self.b.ins().iadd(self.p.gidx, a);
                let g = self.b.ins().uload32(mem(), a, 0);
                let z = self.zeff(row.n, g);
                let s = self.scale(row.n, g);
                let q = self.code1(row, kv);
                let d = self.b.ins().isub(q, z);
                let y = self.formula(d, s);
                let o = self.mul_c(kv, self.osz());
                let a = self.b.ins().iadd(row.out, o);
                self.store1(y, a);
                let kn = self.b.ins().iadd_imm_s(kv, 1);
                self.b.def_var(k, kn);
            }
            GroupMode::Size(gs) => {
                let (g, end) = self.group_run(kv, gs);
                let z = self.zeff(row.n, g);
                let s = self.scale(row.n, g);
                self.run(row, k, end, z, s);
            }
        }
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(exit);
    }

    /// One run of a group: inputs `k..end` (the variable ends at `end`).
    pub(super) fn run(&mut self, row: Row, k: Variable, end: Value, z: Value, s: Value) {
        let q = self.s.weights;
        let table = q.bits == 4 && self.s.out != DType::F32;
        let tab = if table {
            Some(self.table(z, s, 0))
        } else {
            None
        };
        let w = (32 / q.bits) as i64;
        // Vector steps: inputs per step, and the alignment a step needs.
        let (step, align) = match (q.packing, tab.is_some()) {
            (Packing::Inner, true) => (32, 8),
            (Packing::Inner, false) => (w, w),
            (Packing::Outer { .. }, true) => (16, 1),
            (Packing::Outer { .. }, false) => (4, 1),
        };
        let tail = self.b.create_block();
        let kv = self.b.use_var(k);
        self.if_aligned(kv, align, tail);
        self.step_loop((k, end), step, tail, &mut |e, kv| match (q.packing, tab) {
            (Packing::Inner, Some(t)) => e.lut_inner(row, kv, t),
            (Packing::Outer { .. }, Some(t)) => e.lut_outer(row, kv, t),
            (_, None) => e.formula_step(row, kv, z, s),
        });
        // One at a time.
        let (kv, thead, done) = self.while_below(k, end);
        let c = self.code1(row, kv);
        let o = self.mul_c(kv, self.osz());
        let a = self.b.ins().iadd(row.out, o);
        if tab.is_some() {
            self.lookup1(c, 0, a, 0);
        } else {
            let d = self.b.ins().isub(c, z);
            let y = self.formula(d, s);
            self.store1(y, a);
        }
        self.next_one(k, kv, thead, done);
    }

    /// 16 outputs of codes `c` (I8X16, values below 16) by table, stored at `a + off`.
    pub(super) fn lookup16(&mut self, t: (Value, Value), c: Value, a: Value, off: i32) {
        let [o0, o1] = self.lookup16v(t, c);
        self.b.ins().store(mem(), o0, a, off);
        self.b.ins().store(mem(), o1, a, off + 16);
    }

    /// 16 outputs of codes `c` by table, as two I8X16 (8 outputs each).
    pub(super) fn lookup16v(&mut self, t: (Value, Value), c: Value) -> [Value; 2] {
        let l = self.b.ins().x86_pshufb(t.0, c);
        let h = self.b.ins().x86_pshufb(t.1, c);
        [self.shuffle(l, h, LO_BYTES), self.shuffle(l, h, HI_BYTES)]
    }

    /// Byte address `base + i * step` (I64 `i`).
    pub(super) fn strided(&mut self, base: Value, i: Value, step: usize) -> Value {
        let off = self.mul_c(i, step);
        self.b.ins().iadd(base, off)
    }

    /// `a + off` as an address and an immediate offset where `off` fits one.
    pub(super) fn offset(&mut self, a: Value, off: usize) -> (Value, i32) {
        match i32::try_from(off) {
            Ok(off) => (a, off),
            Err(_) => {
                let c = self.i64c(off as i64);
                (self.b.ins().iadd(a, c), 0)
            }
        }
    }

    /// The four 16-byte vectors at `a`, `a + step`, `a + 2 step`, `a + 3 step`,
    /// transposed by I32 lanes ([`transpose4`](Self::transpose4)): lane `j` of
    /// result `i` is the word at `a + j step + 4 i`.
    pub(super) fn load_transposed(&mut self, a: Value, step: usize) -> [Value; 4] {
        let v = std::array::from_fn(|i| {
            let (addr, off) = self.offset(a, step.wrapping_mul(i));
            self.b.ins().load(types::I8X16, mem(), addr, off)
        });
        self.transpose4(v)
    }

    /// The 4-bit fields of the words in `x` (I32X4), a byte each, in order:
    /// the fields of words 0 and 1, then of words 2 and 3 (two I8X16).
    pub(super) fn nibble_codes(&mut self, x: Value) -> [Value; 2] {
        let lo = self.and_c(x, 0x0f0f_0f0f);
        let hi = self.ushr(x, 4);
        let hi = self.and_c(hi, 0x0f0f_0f0f);
        let lo = self.b.ins().bitcast(types::I8X16, lanes(), lo);
        let hi = self.b.ins().bitcast(types::I8X16, lanes(), hi);
        [
            self.shuffle(lo, hi, LO_BYTES),
            self.shuffle(lo, hi, HI_BYTES),
        ]
    }

    /// Load `count` words `stride` bytes apart from `a` into I32X4 vectors.
    pub(super) fn gather(&mut self, a: Value, count: usize, stride: usize) -> Vec<Value> {
        if stride == 4 && count.is_multiple_of(4) {
            // Adjacent words (compressed-tensors' rows): whole vectors, the same bytes.
            return (0..count / 4)
                .map(|i| self.b.ins().load(types::I32X4, mem(), a, 16 * i as i32))
                .collect();
        }
        let mut out = Vec::new();
        let mut v = None;
        for j in 0..count {
            let (addr, off) = self.offset(a, stride.wrapping_mul(j));
            let x = self.b.ins().load(types::I32, mem(), addr, off);
            v = Some(match v {
                None => self.b.ins().scalar_to_vector(types::I32X4, x),
                Some(v) => self.b.ins().insertlane(v, x, (j % 4) as u8),
            });
            if j % 4 == 3 {
                out.push(v.take().expect("a vector"));
            }
        }
        out.extend(v);
        out
    }

    /// 32 inputs from `k` (a multiple of 8) of a row whose words run along K.
    pub(super) fn lut_inner(&mut self, row: Row, k: Value, t: (Value, Value)) {
        let q = self.s.weights;
        let kw = self.b.ins().ushr_imm_s(k, 3);
        let a = self.strided(row.words, kw, q.col_stride.wrapping_mul(4));
        let x = self.gather(a, 4, q.col_stride.wrapping_mul(4))[0];
        let o = self.mul_c(k, 2);
        let oa = self.b.ins().iadd(row.out, o);
        self.lut_words(x, oa, t, false);
    }

    /// The 32 outputs of four words of a row (I32X4 `x`, words along K) by
    /// table, stored from byte address `oa`.
    /// `stream`: one non-temporal line (`oa` 64-byte aligned).
    pub(super) fn lut_words(&mut self, x: Value, oa: Value, t: (Value, Value), stream: bool) {
        let [c0, c1] = self.nibble_codes(x);
        if stream {
            let [a, b] = self.lookup16v(t, c0);
            let [c, d] = self.lookup16v(t, c1);
            crate::host_store::line(&mut self.b, oa, [a, b, c, d]);
        } else {
            self.lookup16(t, c0, oa, 0);
            self.lookup16(t, c1, oa, 32);
        }
    }

    /// 16 inputs from `k` of a row whose words run along N.
    pub(super) fn lut_outer(&mut self, row: Row, k: Value, t: (Value, Value)) {
        let q = self.s.weights;
        let a = self.strided(row.words, k, q.col_stride.wrapping_mul(4));
        let v = self.gather(a, 16, q.col_stride.wrapping_mul(4));
        let v: Vec<Value> = v
            .into_iter()
            .map(|x| {
                let x = self.b.ins().ushr(x, row.shift);
                self.and_c(x, 15)
            })
            .collect();
        let a = self.b.ins().unarrow(v[0], v[1]);
        let b = self.b.ins().unarrow(v[2], v[3]);
        let c = self.b.ins().unarrow(a, b);
        let o = self.mul_c(k, 2);
        let oa = self.b.ins().iadd(row.out, o);
        self.lookup16(t, c, oa, 0);
    }

    /// One formula step from `k`: a word's inputs (along K) or 4 inputs (along N).
    pub(super) fn formula_step(&mut self, row: Row, k: Value, z: Value, s: Value) {
        let q = self.s.weights;
        let zv = self.b.ins().splat(types::I32X4, z);
        let sv = self.b.ins().splat(types::F32X4, s);
        let codes: Vec<Value> = match q.packing {
            Packing::Inner => {
                let w = (32 / q.bits) as usize;
                let kw = self.div_c(k, w);
                let word = self.word_at(row.words, kw, q.col_stride.wrapping_mul(4));
                let x = self.b.ins().scalar_to_vector(types::I32X4, word);
                let bytes = if q.bits == 8 {
                    self.b.ins().bitcast(types::I8X16, lanes(), x)
                } else {
                    self.nibble_codes(x)[0]
                };
                let h = self.b.ins().uwiden_low(bytes);
                let a = self.b.ins().uwiden_low(h);
                if q.bits == 8 {
                    vec![a]
                } else {
                    vec![a, self.b.ins().uwiden_high(h)]
                }
            }
            Packing::Outer { .. } => {
                let a = self.strided(row.words, k, q.col_stride.wrapping_mul(4));
                let x = self.gather(a, 4, q.col_stride.wrapping_mul(4))[0];
                let x = self.b.ins().ushr(x, row.shift);
                vec![self.and_c(x, (1u32 << q.bits) - 1)]
            }
        };
        let ys: Vec<Value> = codes
            .into_iter()
            .map(|c| {
                let d = self.b.ins().isub(c, zv);
                self.formula(d, sv)
            })
            .collect();
        let o = self.mul_c(k, self.osz());
        let oa = self.b.ins().iadd(row.out, o);
        self.store4(&ys, oa);
    }
}
