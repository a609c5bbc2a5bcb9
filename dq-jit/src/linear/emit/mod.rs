//! The IR of one linear [`Shape`]: rows `n0..n1`, inputs `k0..k1` of the weight,
//! read from the packed words, zero points and scales where they lie.
//!
//! ```text
//! fn(args: *const Args)
//!   columns (4-bit along N -> 16-bit, groups by size; `columns`): word columns of
//!          8 rows inside n0..n1 at once, 16 inputs a step; partial columns by rows;
//!          words side by side (AWQ) first staged by column (`stage`), the
//!          rows a few inputs ahead prefetched (`host_prefetch`)
//!   stream (quads and staged columns, rows starting on a 64-byte line): per run,
//!          8 inputs a step up to a multiple of 32, then 32 (a non-temporal line
//!          a row), then 8 (`streamed_run`); rows starting 16, 32 or 48 bytes
//!          into a line, groups of whole lines: the line across the run's start
//!          by both groups' tables, then lines, the last inputs left to the next
//!          run (`skewed_run`)
//!   quads  (4-bit along K, row or column stride one word -> 16-bit, groups by
//!          size; `quads`): 4 rows at once, 32 inputs a step; the last rows by rows
//!   rows:  n in n0..n1           row bases (output row, word row or column, field shift)
//!   runs:  stretches of one group (Groups::Size) -> zero point and scale, then
//!          4-bit -> 16-bit outputs: the group's 16 outputs by the formula (one
//!            vector pass), looked up with `x86_pshufb` 32 (along K) or 16 (along N)
//!            inputs a step, the rest one at a time from the table in a stack slot;
//!          else the formula, a word (along K) or 4 inputs (along N) a step;
//!          Groups::Index: the formula one input at a time, each with its group.
//! ```

use crate::hoist::Hoisted;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    AbiParam, Block, Function, InstBuilder, Signature, StackSlotData, StackSlotKind, Type,
    UserFuncName, Value, types,
};
use cranelift_codegen::isa::{CallConv, OwnedTargetIsa};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use dq_runtime::linear::Packing;

mod columns;
mod quads;
mod rows;
mod stage;
mod tables;
mod values;

pub(super) use stage::stages;

/// True when functions of `s` can write whole output lines with non-temporal
/// stores (`Shape::store`): rows four at a time or staged word columns.
pub(super) fn can_stream(s: &Shape) -> bool {
    quads::by_quads(s) || stages(s)
}

/// True when functions of `s` can stream whole lines of rows that start 16, 32
/// or 48 bytes into a line (`Store::Skewed`): quads and staged word columns
/// whose groups are whole lines (a multiple of 32 inputs), so that a line
/// crosses at most one group's end.
pub(super) fn can_skew(s: &Shape) -> bool {
    can_stream(s) && matches!(s.groups, super::GroupMode::Size(g) if g.is_multiple_of(32))
}

use super::{Args, PackShape, Shape, Store};

// `rows` (row by row), `columns` (AWQ word columns), `values` (zero points,
// scales, the formula, output bits): `impl Emit` blocks by concern.

use crate::lane_math::{Bin, LaneMath};
use crate::translate::{lanes, mem};

/// Byte shuffle interleaving the low 8 bytes of `a` and `b` (`punpcklbw`).
const LO_BYTES: [u8; 16] = [0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23];
/// Byte shuffle interleaving the high 8 bytes of `a` and `b` (`punpckhbw`).
const HI_BYTES: [u8; 16] = [8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31];

/// Builds the function of `shape` (not compiled).
pub(super) fn build(shape: &Shape, isa: &OwnedTargetIsa, host_f16: bool) -> Function {
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
        words: field(&mut b, std::mem::offset_of!(Args, words)),
        zeros: field(&mut b, std::mem::offset_of!(Args, zeros)),
        scales: field(&mut b, std::mem::offset_of!(Args, scales)),
        gidx: field(&mut b, std::mem::offset_of!(Args, gidx)),
        out: field(&mut b, std::mem::offset_of!(Args, out)),
        stage: field(&mut b, std::mem::offset_of!(Args, stage)),
        ahead_limit: stages(shape).then(|| field(&mut b, std::mem::offset_of!(Args, ahead_limit))),
    };
    let n0 = field(&mut b, std::mem::offset_of!(Args, n0));
    let n1 = field(&mut b, std::mem::offset_of!(Args, n1));
    let k0 = field(&mut b, std::mem::offset_of!(Args, k0));
    let k1 = field(&mut b, std::mem::offset_of!(Args, k1));
    let first = field(&mut b, std::mem::offset_of!(Args, first));
    // Skewed columns keep two groups' tables, alternately in each half.
    let tables = if matches!(shape.store, Store::Skewed(_)) {
        2
    } else {
        1
    };
    let slot = b.create_sized_stack_slot(StackSlotData::new(
        StackSlotKind::ExplicitSlot,
        64 * 8 * tables,
        4,
    ));
    let slot = b.ins().stack_addr(types::I64, slot, 0);
    let mut e = Emit {
        b,
        s: shape,
        entry,
        consts: Hoisted::default(),
        p,
        slot,
        k1,
        first,
        host_f16,
    };
    if columns::by_columns(shape) {
        e.columns(n0, n1, k0);
    } else if quads::by_quads(shape) {
        e.quads(n0, n1, k0);
    } else {
        e.rows(n0, n1, k0);
    }
    e.b.ins().return_(&[]);
    e.b.seal_all_blocks();
    e.b.finalize(isa.frontend_config());
    func
}

/// The buffers' base addresses.
#[derive(Clone, Copy)]
struct Ptrs {
    words: Value,
    zeros: Value,
    scales: Value,
    gidx: Value,
    out: Value,
    stage: Value,
    /// Where the function stages: `Args::ahead_limit`.
    ahead_limit: Option<Value>,
}

/// Per-row values.
#[derive(Clone, Copy)]
struct Row {
    n: Value,
    /// Byte address of output element `(n, 0)`.
    out: Value,
    /// Byte address of word `(n, 0)`: the word row (along K) or column (along N).
    words: Value,
    /// Along N: the field's bit shift in this row's words (I32).
    shift: Value,
}

struct Emit<'a, 'f> {
    b: FunctionBuilder<'f>,
    s: &'a Shape,
    entry: Block,
    consts: Hoisted,
    p: Ptrs,
    /// A stack slot of 8 x 64 bytes: per row of a word column or quad, the current
    /// group's 16 outputs as low and high byte tables (32 bytes), then 32 bytes
    /// of scratch ([`table`](Self::table)).
    slot: Value,
    k1: Value,
    first: Value,
    /// f16 tables are rounded by the host's F16C ([`crate::host_f16`]).
    host_f16: bool,
}

impl Emit<'_, '_> {
    // ---- small helpers -------------------------------------------------------

    fn i64c(&mut self, v: i64) -> Value {
        self.b.ins().iconst(types::I64, v)
    }

    fn i32c(&mut self, v: i64) -> Value {
        self.b.ins().iconst(types::I32, v as i32 as u32 as i64)
    }

    /// `x * c` (I64), folding 0 and 1.
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

    /// `x % c` (I64, `c > 0`).
    fn rem_c(&mut self, x: Value, c: usize) -> Value {
        if c.is_power_of_two() {
            self.b.ins().band_imm_s(x, c as i64 - 1)
        } else {
            self.b.ins().urem_imm_s(x, c as i64)
        }
    }

    /// A vector constant from its 16 bytes, emitted once at the top of the entry block.
    fn vconst_bytes(&mut self, ty: Type, bytes: [u8; 16]) -> Value {
        self.consts.vconst(self.b.func, self.entry, ty, bytes)
    }

    /// An I32X4 (or F32X4 by bits) constant with every lane `v`.
    fn splat_c(&mut self, ty: Type, v: u32) -> Value {
        let mut bytes = [0u8; 16];
        for c in bytes.chunks_exact_mut(4) {
            c.copy_from_slice(&v.to_le_bytes());
        }
        self.vconst_bytes(ty, bytes)
    }

    fn and_c(&mut self, x: Value, c: u32) -> Value {
        self.bin_c(Bin::And, x, c)
    }

    fn or_c(&mut self, x: Value, c: u32) -> Value {
        self.bin_c(Bin::Or, x, c)
    }

    fn ushr(&mut self, x: Value, n: i64) -> Value {
        let n = self.i32c(n);
        self.b.ins().ushr(x, n)
    }

    /// Opens `while test(v)`: a new head block tests it, and the body is where
    /// this leaves the builder. Returns `v`'s value there, the head (to jump back
    /// to) and the exit (`exit`, or a new block) to switch to after the body.
    fn open_loop(
        &mut self,
        v: Variable,
        exit: Option<Block>,
        test: impl FnOnce(&mut Self, Value) -> Value,
    ) -> (Value, Block, Block) {
        let (head, body) = (self.b.create_block(), self.b.create_block());
        let exit = exit.unwrap_or_else(|| self.b.create_block());
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(head);
        let x = self.b.use_var(v);
        let more = test(self, x);
        self.b.ins().brif(more, body, &[], exit, &[]);
        self.b.switch_to_block(body);
        (x, head, exit)
    }

    /// Opens `while v < end` (unsigned), as [`open_loop`](Self::open_loop).
    fn while_below(&mut self, v: Variable, end: Value) -> (Value, Block, Block) {
        self.open_loop(v, None, |e, x| {
            e.b.ins().icmp(IntCC::UnsignedLessThan, x, end)
        })
    }

    /// The group of input `k` (groups of `gs` inputs) and the end of its run
    /// (the group's end or `k1`).
    fn group_run(&mut self, k: Value, gs: usize) -> (Value, Value) {
        let g = self.div_c(k, gs);
        let g1 = self.b.ins().iadd_imm_s(g, 1);
        let end = self.mul_c(g1, gs);
        (g, self.b.ins().umin(end, self.k1))
    }

    /// Closes a [`while_below`](Self::while_below) loop of `v` (its value `x` in
    /// the body) stepping by one: back to `head`, then on at `exit`.
    fn next_one(&mut self, v: Variable, x: Value, head: Block, exit: Block) {
        let xn = self.b.ins().iadd_imm_s(x, 1);
        self.b.def_var(v, xn);
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(exit);
    }

    /// Opens `while v + step <= end` (unsigned), leaving by `exit`: a new head
    /// block tests it, and the body is where this leaves the builder. Returns `v`
    /// and `v + step` there, and the head (to jump back to).
    fn while_fits(
        &mut self,
        v: Variable,
        step: i64,
        end: Value,
        exit: Block,
    ) -> (Value, Value, Block) {
        let (x, head, _) = self.open_loop(v, Some(exit), |e, x| {
            let xe = e.b.ins().iadd_imm_s(x, step);
            e.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, xe, end)
        });
        (x, self.b.ins().iadd_imm_s(x, step), head)
    }

    /// A run `k..end` streamed (rows from `out` start on a 64-byte line):
    /// `narrow` steps of 8 inputs (plain stores) up to a line, `line` steps of
    /// 32 (one non-temporal line a row) while they fit, then `narrow` steps while
    /// they fit; `k` ends at the first input left, and the builder at `done`.
    fn streamed_run(
        &mut self,
        (k, end, out): (Variable, Value, Value),
        done: Block,
        narrow: &mut dyn FnMut(&mut Self, Value),
        line: &mut dyn FnMut(&mut Self, Value),
    ) {
        let exit = self.b.create_block();
        self.steps_to_line((k, end, out), exit, narrow);
        self.b.switch_to_block(exit);
        let lines = self.b.create_block();
        self.step_loop((k, end), 32, lines, line);
        self.step_loop((k, end), 8, done, narrow);
    }

    /// A run `start..end` of one group (`k` at `start`) of rows whose first is
    /// at `out` and which start `at` (16, 32 or 48) bytes into a line
    /// ([`Store::Skewed`]): runs are whole lines of inputs (groups, calls and
    /// K are), so each line is `d = at / 2` inputs of one run and `32 - d` of
    /// the next. `across(l)` streams the line `l..l + 32` across `start` (with
    /// both groups' tables) where the previous run left it; else `narrow` steps
    /// of 8 inputs (plain stores) reach the first line; `line` steps stream the
    /// lines inside; the last `d` inputs are left to the next run where it will
    /// stream them, else go by `narrow` steps (the call's last run: the line's
    /// rest is another call's or row's). Leaves `k` at `end` and the builder at
    /// `done`.
    fn skewed_run(
        &mut self,
        (k, end): (Variable, Value),
        (start, k0, out): (Value, Value, Value),
        (done, at): (Block, u8),
        narrow: &mut dyn FnMut(&mut Self, Value),
        line: &mut dyn FnMut(&mut Self, Value),
        across: &mut dyn FnMut(&mut Self, Value, i64),
    ) {
        let d = i64::from(at / 2);
        let (cross, head, lines) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        // Across: the line starts inside the call (the previous run left its
        // first d inputs, as `rest` below tests it) and this run has the rest.
        let l = self.b.ins().iadd_imm_s(start, -d);
        let after = self.b.ins().icmp(IntCC::SignedGreaterThanOrEqual, l, k0);
        let l32 = self.b.ins().iadd_imm_s(l, 32);
        let room = self.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, l32, end);
        let on_32 = self.is_multiple(start, 32);
        let ok = self.b.ins().band(after, room);
        let ok = self.b.ins().band(ok, on_32);
        self.b.ins().brif(ok, cross, &[], head, &[]);
        self.b.switch_to_block(cross);
        across(self, l, d);
        self.b.def_var(k, l32);
        self.b.ins().jump(lines, &[]);
        // Else 8 inputs a step to the first line.
        self.b.switch_to_block(head);
        self.steps_to_line((k, end, out), lines, narrow);
        // Whole lines while they fit, from a line's start.
        self.b.switch_to_block(lines);
        let (whole, rest, plain, skip) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        let kv = self.b.use_var(k);
        let o = self.line_offset(out, kv);
        let on_line = self.b.ins().icmp_imm_s(IntCC::Equal, o, 0);
        self.b.ins().brif(on_line, whole, &[], plain, &[]);
        self.b.switch_to_block(whole);
        self.step_loop((k, end), 32, rest, line);
        // Leave the last d inputs where the next run will stream them: it
        // starts on a multiple of 32 and has 32 - d inputs (groups are at least
        // 32).
        self.b.switch_to_block(rest);
        let kv = self.b.use_var(k);
        let kd = self.b.ins().iadd_imm_s(kv, d);
        let last = self.b.ins().icmp(IntCC::Equal, kd, end);
        let e32 = self.b.ins().iadd_imm_s(end, 32 - d);
        let fits = self
            .b
            .ins()
            .icmp(IntCC::UnsignedLessThanOrEqual, e32, self.k1);
        let whole_end = self.is_multiple(end, 32);
        let leave = self.b.ins().band(last, fits);
        let leave = self.b.ins().band(leave, whole_end);
        self.b.ins().brif(leave, skip, &[], plain, &[]);
        self.b.switch_to_block(skip);
        self.b.def_var(k, end);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(plain);
        self.step_loop((k, end), 8, done, narrow);
    }

    /// Where skewed ([`Store::Skewed`]), points the slot at the half for
    /// group `g`'s tables (`g % 2`) and returns the other's address, the
    /// previous group's; else the slot's.
    fn table_halves(&mut self, g: Value) -> Value {
        let slot = self.slot;
        if !matches!(self.s.store, Store::Skewed(_)) {
            return slot;
        }
        let odd = self.b.ins().band_imm_s(g, 1);
        let half = self.b.ins().ishl_imm_s(odd, 9);
        self.slot = self.b.ins().iadd(slot, half);
        let other = self.b.ins().isub(slot, half);
        self.b.ins().iadd_imm_s(other, 512)
    }

    /// `narrow(k)` steps of 8 inputs while they fit before `end` and input
    /// `k`'s output (rows at `out`) lies inside a line; then on at `exit`.
    fn steps_to_line(
        &mut self,
        (k, end, out): (Variable, Value, Value),
        exit: Block,
        narrow: &mut dyn FnMut(&mut Self, Value),
    ) {
        let (kv, top, _) = self.open_loop(k, Some(exit), |e, kv| {
            let ke = e.b.ins().iadd_imm_s(kv, 8);
            let fits = e.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, ke, end);
            let at = e.line_offset(out, kv);
            let inside = e.b.ins().icmp_imm_s(IntCC::NotEqual, at, 0);
            e.b.ins().band(fits, inside)
        });
        narrow(self, kv);
        let ke = self.b.ins().iadd_imm_s(kv, 8);
        self.b.def_var(k, ke);
        self.b.ins().jump(top, &[]);
    }

    /// True (I8) when `x` is a multiple of `align` (a power of two).
    fn is_multiple(&mut self, x: Value, align: i64) -> Value {
        let r = self.b.ins().band_imm_s(x, align - 1);
        self.b.ins().icmp_imm_s(IntCC::Equal, r, 0)
    }

    /// Byte offset into its line of input `k`'s output in the row at `out`.
    fn line_offset(&mut self, out: Value, k: Value) -> Value {
        let o = self.b.ins().ishl_imm_s(k, 1);
        let a = self.b.ins().iadd(out, o);
        self.b.ins().band_imm_s(a, 63)
    }

    /// The four vectors of a line of 32 inputs, codes `c` (two I8X16 of 16),
    /// its first `d` inputs looked up in the previous group's table (at `prev +
    /// at`) and the rest in this group's (at `slot + at`).
    fn line_of(&mut self, c: [Value; 2], (prev, at): (Value, i32), d: i64) -> [Value; 4] {
        let cur = self.stored_table(at);
        let old = (d > 0).then(|| {
            (
                self.b.ins().load(types::I8X16, mem(), prev, at),
                self.b.ins().load(types::I8X16, mem(), prev, at + 16),
            )
        });
        let mut line = [c[0]; 4];
        for (h, &c) in c.iter().enumerate() {
            let first = 16 * h as i64;
            let p = old.filter(|_| first < d).map(|t| self.lookup16v(t, c));
            let n = (first + 16 > d).then(|| self.lookup16v(cur, c));
            for i in 0..2 {
                let from = if first + 8 * (i as i64) < d { p } else { n };
                line[2 * h + i] = from.expect("looked up")[i];
            }
        }
        line
    }

    /// `while k + step <= end { body(k); k += step }` (unsigned), then on at
    /// `exit`, where this leaves the builder.
    fn step_loop(
        &mut self,
        (k, end): (Variable, Value),
        step: i64,
        exit: Block,
        body: &mut dyn FnMut(&mut Self, Value),
    ) {
        let (kv, ke, head) = self.while_fits(k, step, end, exit);
        body(self, kv);
        self.b.def_var(k, ke);
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(exit);
    }

    /// Continues where `v % align == 0` (a power of two), else jumps to `other`.
    fn if_aligned(&mut self, v: Value, align: i64, other: Block) {
        let yes = self.b.create_block();
        let ok = self.is_multiple(v, align);
        self.b.ins().brif(ok, yes, &[], other, &[]);
        self.b.switch_to_block(yes);
    }

    fn var(&mut self, ty: Type, init: Value) -> Variable {
        let v = self.b.declare_var(ty);
        self.b.def_var(v, init);
        v
    }

    /// The little-endian word at byte address `base + i * step`, `i` an I64.
    fn word_at(&mut self, base: Value, i: Value, step: usize) -> Value {
        let off = self.mul_c(i, step);
        let a = self.b.ins().iadd(base, off);
        self.b.ins().load(types::I32, mem(), a, 0)
    }

    /// The field of `word` at bit `shift` (I32 values), `bits` wide.
    fn field(&mut self, word: Value, shift: Value, bits: u32) -> Value {
        let x = self.b.ins().ushr(word, shift);
        self.and_c(x, (1u32 << bits) - 1)
    }

    /// Bit shift of the field holding row `r % w` in words packed along N (I64 `r`).
    fn outer_shift(&mut self, order: [u8; 8], bits: u32, r: Value) -> Value {
        let w = (32 / bits) as usize;
        let packed = order[..w]
            .iter()
            .enumerate()
            .fold(0i64, |a, (i, &o)| a | (i64::from(o) << (4 * i)));
        let j = self.rem_c(r, w);
        let j4 = self.b.ins().ishl_imm_s(j, 2);
        let table = self.i64c(packed);
        let f = self.b.ins().ushr(table, j4);
        let f = self.b.ins().band_imm_s(f, 15);
        let f = self.mul_c(f, bits as usize);
        self.b.ins().ireduce(types::I32, f)
    }

    /// Field `(r, c)` of `pk` at `base` (I64 indices): the plain formula of
    /// `Packed::get` without the offset.
    fn packed_get(&mut self, pk: &PackShape, base: Value, r: Value, c: Value) -> Value {
        let w = (32 / pk.bits) as usize;
        let (word, shift) = match pk.packing {
            Packing::Inner => {
                let a = self.mul_c(r, pk.row_stride);
                let cw = self.div_c(c, w);
                let b = self.mul_c(cw, pk.col_stride);
                let i = self.b.ins().iadd(a, b);
                let f = self.rem_c(c, w);
                let f = self.mul_c(f, pk.bits as usize);
                (i, self.b.ins().ireduce(types::I32, f))
            }
            Packing::Outer { order } => {
                let rw = self.div_c(r, w);
                let a = self.mul_c(rw, pk.row_stride);
                let b = self.mul_c(c, pk.col_stride);
                let i = self.b.ins().iadd(a, b);
                (i, self.outer_shift(order, pk.bits, r))
            }
        };
        let word = self.word_at(base, word, 4);
        self.field(word, shift, pk.bits)
    }
}

impl<'f> crate::lane_math::LaneMath<'f> for Emit<'_, 'f> {
    fn fb(&mut self) -> &mut FunctionBuilder<'f> {
        &mut self.b
    }

    fn splat(&mut self, ty: Type, bits: u32) -> Value {
        self.splat_c(ty, bits)
    }
}
