//! The IR of one [`CodedShape`]: rows `n0..n1` of the weight, a run of one
//! group at a time.
//!
//! ```text
//! fn(args: *const Args)
//!   walk:  Rows     n in n0..n1, runs along K (the row's codes)
//!          Columns  k in 0..K, runs of rows n0..n1 down the column (codes along N)
//!          Elements n, k: one element at a time, each with its group
//!   run:   the group's scale (and bias), then
//!          4-bit: the 16 outputs (F32X4 formula) in a stack slot and as byte
//!            tables; an odd first code alone, 16 codes a step by `x86_pshufb`,
//!            the rest one at a time from the slot
//!          8-bit, base = the code: the formula 16 codes a step in F32X4 lanes
//!          else: the formula one code at a time (base values from the table)
//! ```

use crate::hoist::Hoisted;

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    AbiParam, Block, Function, InstBuilder, Signature, StackSlotData, StackSlotKind, Type,
    UserFuncName, Value, types,
};
use cranelift_codegen::isa::{CallConv, OwnedTargetIsa};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use dq_runtime::DType;
use dq_runtime::linear::ScaleType;
use dq_runtime::linear::coded::BitOrder;

use super::{Args, Base, CodedShape, PostKind, ScaleKind, Walk};

mod blocks;
use crate::lane_math::{Bin, LaneMath};
use crate::translate::{lanes, mem};

/// Byte shuffle interleaving the low 8 bytes of `a` and `b` (`punpcklbw`).
const LO_BYTES: [u8; 16] = [0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23];
/// Byte shuffle interleaving the high 8 bytes of `a` and `b` (`punpckhbw`).
const HI_BYTES: [u8; 16] = [8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31];
/// Interleaving the low 4 two-byte lanes of `a` and `b` (`punpcklwd`).
pub(super) const LO_WORDS: [u8; 16] = [0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23];
/// Interleaving the high 4 two-byte lanes of `a` and `b` (`punpckhwd`).
pub(super) const HI_WORDS: [u8; 16] =
    [8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31];

/// Builds the function of `shape` (not compiled).
pub(super) fn build(shape: &CodedShape, isa: &OwnedTargetIsa) -> Function {
    let mut sig = Signature::new(CallConv::triple_default(isa.triple()));
    sig.params.push(AbiParam::new(types::I64));
    let mut func = Function::with_name_signature(UserFuncName::default(), sig);
    let mut fctx = FunctionBuilderContext::new();
    let mut b = FunctionBuilder::new(&mut func, &mut fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let args = b.block_params(entry)[0];
    let field =
        |b: &mut FunctionBuilder<'_>, off: usize| b.ins().load(types::I64, mem(), args, off as i32);
    let p = Ptrs {
        codes: field(&mut b, std::mem::offset_of!(Args, codes)),
        base: field(&mut b, std::mem::offset_of!(Args, base)),
        scales: field(&mut b, std::mem::offset_of!(Args, scales)),
        book: field(&mut b, std::mem::offset_of!(Args, book)),
        absmax: field(&mut b, std::mem::offset_of!(Args, absmax)),
        biases: field(&mut b, std::mem::offset_of!(Args, biases)),
        out: field(&mut b, std::mem::offset_of!(Args, out)),
        first: field(&mut b, std::mem::offset_of!(Args, first)),
        offset: field(&mut b, std::mem::offset_of!(Args, offset)),
    };
    let n0 = field(&mut b, std::mem::offset_of!(Args, n0));
    let n1 = field(&mut b, std::mem::offset_of!(Args, n1));
    // The group's 16 outputs (f32 bits or 16-bit patterns).
    let slot = b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 64, 4));
    let slot = b.ins().stack_addr(types::I64, slot, 0);
    let mut e = Emit {
        b,
        s: shape,
        entry,
        consts: Hoisted::default(),
        p,
        slot,
    };
    match shape.walk() {
        Walk::Rows => e.rows(n0, n1),
        Walk::Columns => e.columns(n0, n1),
        Walk::Elements => e.elements(n0, n1),
    }
    e.b.ins().return_(&[]);
    e.b.seal_all_blocks();
    e.b.finalize(isa.frontend_config());
    func
}

/// The buffers' base addresses and the call's fixed values.
#[derive(Clone, Copy)]
struct Ptrs {
    codes: Value,
    base: Value,
    scales: Value,
    book: Value,
    absmax: Value,
    biases: Value,
    out: Value,
    first: Value,
    offset: Value,
}

/// One run of a group: stream position `p` of its first code, `len` codes (at
/// least one), output of the first at `out`, outputs `step` bytes apart.
#[derive(Clone, Copy)]
struct Run {
    p: Value,
    len: Value,
    out: Value,
    g: Value,
}

/// A group's scale (F32) and bias (F32, where the post step adds one).
#[derive(Clone, Copy)]
struct Group {
    s: Value,
    bias: Option<Value>,
}

struct Emit<'a, 'f> {
    b: FunctionBuilder<'f>,
    s: &'a CodedShape,
    entry: Block,
    consts: Hoisted,
    p: Ptrs,
    /// 64 bytes: the current group's 16 outputs.
    slot: Value,
}

impl Emit<'_, '_> {
    // ---- small helpers -------------------------------------------------------

    fn i64c(&mut self, v: i64) -> Value {
        self.b.ins().iconst(types::I64, v)
    }

    /// `x * c` (I64).
    fn mul_c(&mut self, x: Value, c: usize) -> Value {
        match c {
            0 => self.i64c(0),
            1 => x,
            _ if c.is_power_of_two() => self.b.ins().ishl_imm_s(x, c.trailing_zeros() as i64),
            _ => self.b.ins().imul_imm_s(x, c as i64),
        }
    }

    /// `x / c` (I64, `c > 0`).
    fn div_c(&mut self, x: Value, c: usize) -> Value {
        match c {
            1 => x,
            _ if c.is_power_of_two() => self.b.ins().ushr_imm_s(x, c.trailing_zeros() as i64),
            _ => self.b.ins().udiv_imm_s(x, c as i64),
        }
    }

    /// A vector constant from its 16 bytes, emitted once at the top of the entry block.
    fn vconst_bytes(&mut self, ty: Type, bytes: [u8; 16]) -> Value {
        self.consts.vconst(self.b.func, self.entry, ty, bytes)
    }

    fn var(&mut self, ty: Type, init: Value) -> Variable {
        let v = self.b.declare_var(ty);
        self.b.def_var(v, init);
        v
    }

    /// `for v in v.. while v < end { body(v) ; v = next }`: opens the loop and
    /// returns `v` in the body, the head and the exit.
    fn while_below(&mut self, v: Variable, end: Value) -> (Value, Block, Block) {
        let (head, body, exit) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(head);
        let x = self.b.use_var(v);
        let more = self.b.ins().icmp(IntCC::UnsignedLessThan, x, end);
        self.b.ins().brif(more, body, &[], exit, &[]);
        self.b.switch_to_block(body);
        (x, head, exit)
    }

    /// Closes a loop: `v = next`, back to `head`, then on at `exit`.
    fn close(&mut self, v: Variable, next: Value, head: Block, exit: Block) {
        self.b.def_var(v, next);
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(exit);
    }

    /// Output bytes per element.
    fn osz(&self) -> usize {
        if self.s.out == DType::F32 { 4 } else { 2 }
    }

    /// Bytes from one output of a run to the next.
    fn step(&self) -> usize {
        match self.s.walk() {
            Walk::Rows => self.osz(),
            _ => self.s.k.wrapping_mul(self.osz()),
        }
    }

    /// Byte address of output `(n, k)` (I64 values).
    fn out_at(&mut self, n: Value, k: Value) -> Value {
        let rel = self.b.ins().isub(n, self.p.first);
        let r = self.mul_c(rel, self.s.k);
        let i = self.b.ins().iadd(r, k);
        let o = self.mul_c(i, self.osz());
        self.b.ins().iadd(self.p.out, o)
    }

    // ---- walks ---------------------------------------------------------------

    /// Rows `n0..n1`, runs along each.
    fn rows(&mut self, n0: Value, n1: Value) {
        let n = self.var(types::I64, n0);
        let (nv, nhead, nexit) = self.while_below(n, n1);
        let rs = self.mul_c(nv, self.s.row_stride);
        let start = self.b.ins().iadd(self.p.offset, rs);
        let zero = self.i64c(0);
        let orow = self.out_at(nv, zero);
        let kdim = self.i64c(self.s.k as i64);
        let k = self.var(types::I64, zero);
        let (kv, khead, kexit) = self.while_below(k, kdim);
        let p = self.b.ins().iadd(start, kv);
        let (g, gend) = self.group_end(p, start);
        let end = self.b.ins().umin(gend, kdim);
        let len = self.b.ins().isub(end, kv);
        let o = self.mul_c(kv, self.osz());
        let out = self.b.ins().iadd(orow, o);
        self.run(Run { p, len, out, g });
        self.close(k, end, khead, kexit);
        let nn = self.b.ins().iadd_imm_s(nv, 1);
        self.close(n, nn, nhead, nexit);
    }

    /// Columns `0..K`, runs of rows `n0..n1` down each: blocks of 8 columns by
    /// a group of rows transposed in registers where the shape allows
    /// ([`blocks::by_blocks`]), else a column at a time.
    fn columns(&mut self, n0: Value, n1: Value) {
        if blocks::by_blocks(self.s) {
            return self.column_blocks(n0, n1);
        }
        let (zero, kdim) = (self.i64c(0), self.i64c(self.s.k as i64));
        self.column_range(n0, n1, zero, kdim);
    }

    /// Columns `k0..k1`, runs of rows `n0..n1` down each, a column at a time.
    fn column_range(&mut self, n0: Value, n1: Value, k0: Value, k1: Value) {
        let k = self.var(types::I64, k0);
        let (kv, khead, kexit) = self.while_below(k, k1);
        let cs = self.mul_c(kv, self.s.col_stride);
        let col = self.b.ins().iadd(self.p.offset, cs);
        let n = self.var(types::I64, n0);
        let (nv, nhead, nexit) = self.while_below(n, n1);
        let p = self.b.ins().iadd(col, nv);
        let (g, gend) = self.group_end(p, col);
        let end = self.b.ins().umin(gend, n1);
        let len = self.b.ins().isub(end, nv);
        let out = self.out_at(nv, kv);
        self.run(Run { p, len, out, g });
        self.close(n, end, nhead, nexit);
        let kn = self.b.ins().iadd_imm_s(kv, 1);
        self.close(k, kn, khead, kexit);
    }

    /// The group of position `p`, and where it ends counted from `from`.
    fn group_end(&mut self, p: Value, from: Value) -> (Value, Value) {
        let gs = self.s.group_size;
        let g = self.div_c(p, gs);
        let g1 = self.b.ins().iadd_imm_s(g, 1);
        let e = self.mul_c(g1, gs);
        (g, self.b.ins().isub(e, from))
    }

    /// Every element alone, with its own group.
    fn elements(&mut self, n0: Value, n1: Value) {
        let n = self.var(types::I64, n0);
        let (nv, nhead, nexit) = self.while_below(n, n1);
        let rs = self.mul_c(nv, self.s.row_stride);
        let start = self.b.ins().iadd(self.p.offset, rs);
        let zero = self.i64c(0);
        let kdim = self.i64c(self.s.k as i64);
        let k = self.var(types::I64, zero);
        let (kv, khead, kexit) = self.while_below(k, kdim);
        let cs = self.mul_c(kv, self.s.col_stride);
        let p = self.b.ins().iadd(start, cs);
        let g = self.div_c(p, self.s.group_size);
        let grp = self.group(g);
        let y = self.formula1(p, grp);
        let out = self.out_at(nv, kv);
        self.store1(y, out);
        let kn = self.b.ins().iadd_imm_s(kv, 1);
        self.close(k, kn, khead, kexit);
        let nn = self.b.ins().iadd_imm_s(nv, 1);
        self.close(n, nn, nhead, nexit);
    }

    // ---- runs ----------------------------------------------------------------

    /// One run of one group.
    fn run(&mut self, r: Run) {
        let grp = self.group(r.g);
        let zero = self.i64c(0);
        let i = self.var(types::I64, zero);
        if self.s.bits == 4 {
            let planes = self.table(grp);
            // An odd first code alone: vector steps start on a byte.
            let (odd, vec) = (self.b.create_block(), self.b.create_block());
            let is_odd = self.b.ins().band_imm_s(r.p, 1);
            self.b.ins().brif(is_odd, odd, &[], vec, &[]);
            self.b.switch_to_block(odd);
            self.table_output(r, zero);
            let one = self.i64c(1);
            self.b.def_var(i, one);
            self.b.ins().jump(vec, &[]);
            self.b.switch_to_block(vec);
            self.steps16(r, i, &mut |e, pp| {
                let c = e.codes16(pp);
                e.lookup(&planes, c)
            });
            let (iv, head, exit) = self.while_below(i, r.len);
            self.table_output(r, iv);
            let next = self.b.ins().iadd_imm_s(iv, 1);
            self.close(i, next, head, exit);
            return;
        }
        if self.s.bits == 8 && self.s.base != Base::Table {
            self.steps16(r, i, &mut |e, pp| {
                let sv = e.b.ins().splat(types::F32X4, grp.s);
                let h = e.bytes16(pp).map(|y| {
                    let y = e.b.ins().fmul(y, sv);
                    let y = e.post(y, grp);
                    e.out_bits(y)
                });
                e.packed(h)
            });
        }
        let (iv, head, exit) = self.while_below(i, r.len);
        let pp = self.b.ins().iadd(r.p, iv);
        let y = self.formula1(pp, grp);
        let o = self.mul_c(iv, self.step());
        let a = self.b.ins().iadd(r.out, o);
        self.store1(y, a);
        let next = self.b.ins().iadd_imm_s(iv, 1);
        self.close(i, next, head, exit);
    }

    /// `while i + 16 <= len`: the 16 outputs of codes `p + i..` (`step16(p + i)`:
    /// vectors of output bits, f32 four a vector, 16-bit eight) stored.
    fn steps16(
        &mut self,
        r: Run,
        i: Variable,
        step16: &mut dyn FnMut(&mut Self, Value) -> Vec<Value>,
    ) {
        let (head, body, exit) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(head);
        let iv = self.b.use_var(i);
        let ie = self.b.ins().iadd_imm_s(iv, 16);
        let fits = self.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, ie, r.len);
        self.b.ins().brif(fits, body, &[], exit, &[]);
        self.b.switch_to_block(body);
        let pp = self.b.ins().iadd(r.p, iv);
        let vs = step16(self, pp);
        let o = self.mul_c(iv, self.step());
        let a = self.b.ins().iadd(r.out, o);
        self.store16(&vs, a);
        self.close(i, ie, head, exit);
    }

    /// Stores 16 outputs (vectors of their bits) from byte address `a`:
    /// whole vectors along a row, else a lane at a time down a column.
    fn store16(&mut self, vs: &[Value], a: Value) {
        if self.s.walk() == Walk::Rows {
            for (j, &v) in vs.iter().enumerate() {
                self.b.ins().store(mem(), v, a, 16 * j as i32);
            }
            return;
        }
        let (ty, per) = if self.s.out == DType::F32 {
            (types::I32X4, 4)
        } else {
            (types::I16X8, 8)
        };
        let step = self.step();
        for (j, &v) in vs.iter().enumerate() {
            let v = self.b.ins().bitcast(ty, lanes(), v);
            for l in 0..per {
                let x = self.b.ins().extractlane(v, l as u8);
                let off = (j * per + l).wrapping_mul(step);
                let (base, imm) = match i32::try_from(off) {
                    Ok(o) => (a, o),
                    Err(_) => {
                        let c = self.i64c(off as i64);
                        (self.b.ins().iadd(a, c), 0)
                    }
                };
                self.b.ins().store(mem(), x, base, imm);
            }
        }
    }

    // ---- codes ---------------------------------------------------------------

    /// The code at stream position `pp` (I64), as I32 (`Codes::get`).
    fn code1(&mut self, pp: Value) -> Value {
        let bits = self.s.bits;
        let c = self.p.codes;
        match (self.s.order, bits) {
            (BitOrder::Lsb, 8) => {
                let a = self.b.ins().iadd(c, pp);
                self.b.ins().uload8(types::I32, mem(), a, 0)
            }
            (order, 4) => {
                let half = self.b.ins().ushr_imm_s(pp, 1);
                let a = self.b.ins().iadd(c, half);
                let byte = self.b.ins().uload8(types::I32, mem(), a, 0);
                let odd = self.b.ins().band_imm_s(pp, 1);
                let odd = self.b.ins().ireduce(types::I32, odd);
                let sel = match order {
                    BitOrder::Lsb => odd,
                    BitOrder::HighNibbleFirst => self.b.ins().bxor_imm_s(odd, 1),
                };
                let sh = self.b.ins().ishl_imm_s(sel, 2);
                let x = self.b.ins().ushr(byte, sh);
                self.b.ins().band_imm_s(x, 15)
            }
            _ => {
                let bit = self.mul_c(pp, bits as usize);
                let byte = self.b.ins().ushr_imm_s(bit, 3);
                let a = self.b.ins().iadd(c, byte);
                let r = self.b.ins().band_imm_s(bit, 7);
                let r = self.b.ins().ireduce(types::I32, r);
                let lo = self.b.ins().uload8(types::I32, mem(), a, 0);
                // The next byte only where the code reaches into it (it lies
                // inside the stream then); else the same byte, masked off.
                let need =
                    self.b
                        .ins()
                        .icmp_imm_s(IntCC::UnsignedGreaterThan, r, i64::from(8 - bits));
                let a1 = self.b.ins().iadd_imm_s(a, 1);
                let ha = self.b.ins().select(need, a1, a);
                let hi = self.b.ins().uload8(types::I32, mem(), ha, 0);
                let hi = self.b.ins().ishl_imm_s(hi, 8);
                let w = self.b.ins().bor(lo, hi);
                let x = self.b.ins().ushr(w, r);
                self.b.ins().band_imm_s(x, (1i64 << bits) - 1)
            }
        }
    }

    /// The 16 4-bit codes from even position `pp` (8 bytes), in order (I8X16).
    fn codes16(&mut self, pp: Value) -> Value {
        let half = self.b.ins().ushr_imm_s(pp, 1);
        let a = self.b.ins().iadd(self.p.codes, half);
        let x = self.b.ins().load(types::I64, mem(), a, 0);
        let v = self.b.ins().scalar_to_vector(types::I64X2, x);
        let v = self.b.ins().bitcast(types::I8X16, lanes(), v);
        let m = self.vconst_bytes(types::I8X16, [15; 16]);
        let lo = self.b.ins().band(v, m);
        let w = self.b.ins().bitcast(types::I16X8, lanes(), v);
        let w = self.b.ins().ushr_imm_s(w, 4);
        let w = self.b.ins().bitcast(types::I8X16, lanes(), w);
        let hi = self.b.ins().band(w, m);
        match self.s.order {
            BitOrder::Lsb => self.shuffle(lo, hi, LO_BYTES),
            BitOrder::HighNibbleFirst => self.shuffle(hi, lo, LO_BYTES),
        }
    }

    /// The 16 8-bit codes from `pp` as their base values (the code, signed or
    /// not; four F32X4).
    fn bytes16(&mut self, pp: Value) -> [Value; 4] {
        let a = self.b.ins().iadd(self.p.codes, pp);
        let v = self.b.ins().load(types::I8X16, mem(), a, 0);
        let signed = self.s.base == Base::Signed;
        let widen = |e: &mut Self, v: Value, high: bool| match (signed, high) {
            (true, false) => e.b.ins().swiden_low(v),
            (true, true) => e.b.ins().swiden_high(v),
            (false, false) => e.b.ins().uwiden_low(v),
            (false, true) => e.b.ins().uwiden_high(v),
        };
        let h = [widen(self, v, false), widen(self, v, true)];
        std::array::from_fn(|j| {
            let w = widen(self, h[j / 2], j % 2 == 1);
            self.b.ins().fcvt_from_sint(types::F32X4, w)
        })
    }

    // ---- groups and the formula ----------------------------------------------

    /// Group `g`'s scale and bias.
    fn group(&mut self, g: Value) -> Group {
        let s = match self.s.scale {
            ScaleKind::Floats(dt) => self.float_at(self.p.scales, g, dt),
            ScaleKind::Nested { block, offset } => {
                let a = self.b.ins().iadd(self.p.scales, g);
                let code = self.b.ins().uload8(types::I64, mem(), a, 0);
                let c = self.float_at(self.p.book, code, ScaleType::F32);
                let gb = self.div_c(g, block);
                let m = self.float_at(self.p.absmax, gb, ScaleType::F32);
                let x = self.b.ins().fmul(c, m);
                let off = self.b.ins().f32const(f32::from_bits(offset));
                self.b.ins().fadd(x, off)
            }
            ScaleKind::Pow2 => {
                let a = self.b.ins().iadd(self.p.scales, g);
                let e = self.b.ins().uload8(types::I32, mem(), a, 0);
                let sh = self.b.ins().ishl_imm_s(e, 23);
                let zero = self.b.ins().icmp_imm_s(IntCC::Equal, e, 0);
                let sub = self.b.ins().iconst(types::I32, 1 << 22);
                let x = self.b.ins().select(zero, sub, sh);
                self.b.ins().bitcast(types::F32, lanes(), x)
            }
            ScaleKind::F8 { global, divide } => {
                let a = self.b.ins().iadd(self.p.scales, g);
                let code = self.b.ins().uload8(types::I64, mem(), a, 0);
                let c = self.float_at(self.p.book, code, ScaleType::F32);
                let gl = self.b.ins().f32const(f32::from_bits(global));
                match divide {
                    true => self.b.ins().fdiv(c, gl),
                    false => self.b.ins().fmul(c, gl),
                }
            }
        };
        let bias = match self.s.post {
            PostKind::Add(dt) => Some(self.float_at(self.p.biases, g, dt)),
            _ => None,
        };
        Group { s, bias }
    }

    /// Element `i` (I64) of little-endian `dt` floats at `base`, as f32
    /// (`coded::float`: bf16 NaNs quieted as `half` does, f16 by
    /// `convert::f16_to_f32`).
    fn float_at(&mut self, base: Value, i: Value, dt: ScaleType) -> Value {
        let off = self.mul_c(i, dt.size());
        let a = self.b.ins().iadd(base, off);
        match dt {
            ScaleType::F32 => self.b.ins().load(types::F32, mem(), a, 0),
            ScaleType::BF16 => {
                let h = self.b.ins().uload16(types::I32, mem(), a, 0);
                self.widen_bf16(h)
            }
            ScaleType::F16 => {
                let h = self.b.ins().uload16(types::I32, mem(), a, 0);
                self.widen_f16(h, types::I32, false)
            }
        }
    }

    /// bf16 bits (I32 or I32X4) to f32 as `half` does (NaNs get their quiet bit).
    fn widen_bf16(&mut self, h: Value) -> Value {
        let ity = self.b.func.dfg.value_type(h);
        let em = self.bin_c(Bin::And, h, 0x7fff);
        let lim = self.k32(ity, 0x7f80);
        let nan = self.b.ins().icmp(IntCC::SignedGreaterThan, em, lim);
        let q = self.bin_c(Bin::Or, h, 0x40);
        let h = self.pick(nan, q, h);
        let x = self.shift(h, true, 16);
        let fty = if ity.is_vector() {
            types::F32X4
        } else {
            types::F32
        };
        self.b.ins().bitcast(fty, lanes(), x)
    }

    /// `post(base[code(pp)] · s)` (F32), the base value read from the table.
    fn formula1(&mut self, pp: Value, grp: Group) -> Value {
        let q = self.code1(pp);
        let q = self.b.ins().uextend(types::I64, q);
        let b = self.float_at(self.p.base, q, ScaleType::F32);
        let x = self.b.ins().fmul(b, grp.s);
        self.post(x, grp)
    }

    /// What follows the multiply, on F32 or F32X4 `x`.
    fn post(&mut self, x: Value, grp: Group) -> Value {
        let ty = self.b.func.dfg.value_type(x);
        match self.s.post {
            PostKind::None => x,
            PostKind::Mul(c) => {
                let c = self.k32(ty, c);
                self.b.ins().fmul(x, c)
            }
            PostKind::Add(dt) => {
                let mut bias = grp.bias.expect("a bias per group");
                if ty.is_vector() {
                    bias = self.b.ins().splat(types::F32X4, bias);
                }
                let r = self.round_to(x, dt);
                let y = self.b.ins().fadd(r, bias);
                self.round_to(y, dt)
            }
        }
    }

    /// `x` rounded to `dt` and back (`coded::round`).
    fn round_to(&mut self, x: Value, dt: ScaleType) -> Value {
        let ity = self.b.func.dfg.value_type(x).as_int();
        match dt {
            ScaleType::F32 => x,
            ScaleType::BF16 => {
                let h = self.round_bf16(x, false);
                self.widen_bf16(h)
            }
            ScaleType::F16 => {
                let h = self.round_f16(x);
                self.widen_f16(h, ity, true)
            }
        }
    }

    // ---- outputs -------------------------------------------------------------

    /// The output bits of `y` (F32 or F32X4): f32 with NaNs quieted, or the
    /// f16/bf16 pattern in the low half of each I32 lane.
    fn out_bits(&mut self, y: Value) -> Value {
        match self.s.out {
            DType::BF16 => self.round_bf16(y, false),
            DType::F16 => self.round_f16(y),
            _ => {
                let ty = self.b.func.dfg.value_type(y).as_int();
                let x = self.b.ins().bitcast(ty, lanes(), y);
                let q = self.bin_c(Bin::Or, x, 0x0040_0000);
                let nan = self.b.ins().fcmp(FloatCC::Unordered, y, y);
                self.pick(nan, q, x)
            }
        }
    }

    /// Stores scalar result `y` at byte address `a`.
    fn store1(&mut self, y: Value, a: Value) {
        let x = self.out_bits(y);
        if self.s.out == DType::F32 {
            self.b.ins().store(mem(), x, a, 0);
        } else {
            self.b.ins().istore16(mem(), x, a, 0);
        }
    }

    /// Four F32X4 of output bits as stored vectors: as they are (f32), or
    /// packed to two vectors of eight 16-bit patterns.
    fn packed(&mut self, h: [Value; 4]) -> Vec<Value> {
        if self.s.out == DType::F32 {
            return h.to_vec();
        }
        self.pack16(h).to_vec()
    }

    // ---- 4-bit tables ----------------------------------------------------------

    /// The group's 16 outputs, stored to the slot, as byte tables for
    /// `x86_pshufb`: low and high bytes (16-bit outputs) or bytes 0..4 (f32).
    fn table(&mut self, grp: Group) -> Vec<Value> {
        let sv = self.b.ins().splat(types::F32X4, grp.s);
        let ys: [Value; 4] = std::array::from_fn(|j| {
            let b = self
                .b
                .ins()
                .load(types::F32X4, mem(), self.p.base, 16 * j as i32);
            let x = self.b.ins().fmul(b, sv);
            let y = self.post(x, grp);
            self.out_bits(y)
        });
        let v = self.packed(ys);
        for (j, &x) in v.iter().enumerate() {
            self.b.ins().store(mem(), x, self.slot, 16 * j as i32);
        }
        if self.s.out != DType::F32 {
            let (lo, hi) = self.planes16([v[0], v[1]]);
            return vec![lo, hi];
        }
        let v: Vec<Value> = v
            .iter()
            .map(|&x| self.b.ins().bitcast(types::I8X16, lanes(), x))
            .collect();
        (0..4u8)
            .map(|byte| {
                let pick: [u8; 16] = std::array::from_fn(|i| 4 * (i % 8) as u8 + byte);
                let a = self.shuffle(v[0], v[1], pick);
                let b = self.shuffle(v[2], v[3], pick);
                self.shuffle(a, b, (0..8).chain(16..24))
            })
            .collect()
    }

    /// The outputs of 16 codes `c` (I8X16) from the byte tables: two vectors of
    /// eight 16-bit patterns, or four of four f32.
    fn lookup(&mut self, planes: &[Value], c: Value) -> Vec<Value> {
        let b: Vec<Value> = planes
            .iter()
            .map(|&t| self.b.ins().x86_pshufb(t, c))
            .collect();
        let lo = self.shuffle(b[0], b[1], LO_BYTES);
        let hi = self.shuffle(b[0], b[1], HI_BYTES);
        if planes.len() == 2 {
            return vec![lo, hi];
        }
        let lo2 = self.shuffle(b[2], b[3], LO_BYTES);
        let hi2 = self.shuffle(b[2], b[3], HI_BYTES);
        vec![
            self.shuffle(lo, lo2, LO_WORDS),
            self.shuffle(lo, lo2, HI_WORDS),
            self.shuffle(hi, hi2, LO_WORDS),
            self.shuffle(hi, hi2, HI_WORDS),
        ]
    }

    /// Output `i` (I64) of run `r` from the slot's table.
    fn table_output(&mut self, r: Run, i: Value) {
        let pp = self.b.ins().iadd(r.p, i);
        let q = self.code1(pp);
        let q = self.b.ins().uextend(types::I64, q);
        let osz = self.osz();
        let off = self.mul_c(q, osz);
        let t = self.b.ins().iadd(self.slot, off);
        let o = self.mul_c(i, self.step());
        let a = self.b.ins().iadd(r.out, o);
        if osz == 4 {
            let x = self.b.ins().load(types::I32, mem(), t, 0);
            self.b.ins().store(mem(), x, a, 0);
        } else {
            let x = self.b.ins().uload16(types::I32, mem(), t, 0);
            self.b.ins().istore16(mem(), x, a, 0);
        }
    }
}

impl<'f> LaneMath<'f> for Emit<'_, 'f> {
    fn fb(&mut self) -> &mut FunctionBuilder<'f> {
        &mut self.b
    }

    fn splat(&mut self, ty: Type, bits: u32) -> Value {
        let mut bytes = [0u8; 16];
        for c in bytes.chunks_exact_mut(4) {
            c.copy_from_slice(&bits.to_le_bytes());
        }
        self.vconst_bytes(ty, bytes)
    }
}
