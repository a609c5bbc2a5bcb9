//! The IR of one linear [`Shape`]: rows `n0..n1`, inputs `k0..k1` of the weight,
//! read from the packed words, zero points and scales where they lie.
//!
//! ```text
//! fn(args: *const Args)
//!   rows:  n in n0..n1           row bases (output row, word row or column, field shift)
//!   runs:  stretches of one group (Groups::Size) -> zero point and scale, then
//!          4-bit -> 16-bit outputs: the group's 16 outputs by the formula (one
//!            vector pass), looked up with `x86_pshufb` 32 (along K) or 16 (along N)
//!            inputs a step, the rest one at a time from the table in a stack slot;
//!          else the formula, a word (along K) or 4 inputs (along N) a step;
//!          Groups::Index: the formula one input at a time, each with its group.
//! ```

use std::collections::HashMap;

use cranelift_codegen::cursor::{Cursor, FuncCursor};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    AbiParam, Block, ConstantData, Endianness, Function, InstBuilder, MemFlagsData, Signature,
    StackSlotData, StackSlotKind, Type, UserFuncName, Value, types,
};
use cranelift_codegen::isa::{CallConv, OwnedTargetIsa};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use dq_runtime::DType;
use dq_runtime::linear::{Packing, ScaleType};

use super::{Args, GroupMode, PackShape, Shape};

/// Loads and stores: little-endian, never trapping (every address lies inside a
/// buffer the caller validated).
fn mem() -> MemFlagsData {
    MemFlagsData::new()
        .with_notrap()
        .with_endianness(Endianness::Little)
}

/// Bitcasts between lane types: little-endian lane order.
fn lanes() -> MemFlagsData {
    MemFlagsData::new().with_endianness(Endianness::Little)
}

/// Byte shuffle interleaving the low 8 bytes of `a` and `b` (`punpcklbw`).
const LO_BYTES: [u8; 16] = [0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23];
/// Byte shuffle interleaving the high 8 bytes of `a` and `b` (`punpckhbw`).
const HI_BYTES: [u8; 16] = [8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31];

/// Builds the function of `shape` (not compiled).
pub(super) fn build(shape: &Shape, isa: &OwnedTargetIsa) -> Function {
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
    };
    let n0 = field(&mut b, std::mem::offset_of!(Args, n0));
    let n1 = field(&mut b, std::mem::offset_of!(Args, n1));
    let k0 = field(&mut b, std::mem::offset_of!(Args, k0));
    let k1 = field(&mut b, std::mem::offset_of!(Args, k1));
    let first = field(&mut b, std::mem::offset_of!(Args, first));
    let slot =
        b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 64 * 8, 4));
    let slot = b.ins().stack_addr(types::I64, slot, 0);
    let mut e = Emit {
        b,
        s: shape,
        entry,
        consts: HashMap::new(),
        p,
        slot,
        k1,
        first,
    };
    if e.by_columns() {
        e.columns(n0, n1, k0);
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
    consts: HashMap<(Type, [u8; 16]), Value>,
    p: Ptrs,
    /// A stack slot of 8 x 64 bytes: per row of a word column, the current
    /// group's 16 outputs as low and high byte tables (32 bytes) and as u16 (32).
    slot: Value,
    k1: Value,
    first: Value,
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
        if let Some(&v) = self.consts.get(&(ty, bytes)) {
            return v;
        }
        let mut pos = FuncCursor::new(self.b.func);
        pos.goto_first_insertion_point(self.entry);
        let c = pos
            .func
            .dfg
            .constants
            .insert(ConstantData::from(bytes.to_vec()));
        let v = pos.ins().vconst(ty, c);
        self.consts.insert((ty, bytes), v);
        v
    }

    /// An I32X4 (or F32X4 by bits) constant with every lane `v`.
    fn splat_c(&mut self, ty: Type, v: u32) -> Value {
        let mut bytes = [0u8; 16];
        for c in bytes.chunks_exact_mut(4) {
            c.copy_from_slice(&v.to_le_bytes());
        }
        self.vconst_bytes(ty, bytes)
    }

    /// `v` as an I32 constant, or every lane of an I32X4 constant.
    fn c32(&mut self, ty: Type, v: u32) -> Value {
        if ty.is_vector() {
            self.splat_c(ty, v)
        } else {
            self.i32c(i64::from(v))
        }
    }

    fn and_c(&mut self, x: Value, c: u32) -> Value {
        let ty = self.b.func.dfg.value_type(x);
        let c = self.c32(ty, c);
        self.b.ins().band(x, c)
    }

    fn or_c(&mut self, x: Value, c: u32) -> Value {
        let ty = self.b.func.dfg.value_type(x);
        let c = self.c32(ty, c);
        self.b.ins().bor(x, c)
    }

    fn add_c(&mut self, x: Value, c: u32) -> Value {
        let ty = self.b.func.dfg.value_type(x);
        let c = self.c32(ty, c);
        self.b.ins().iadd(x, c)
    }

    fn ushr(&mut self, x: Value, n: i64) -> Value {
        let n = self.i32c(n);
        self.b.ins().ushr(x, n)
    }

    fn shl(&mut self, x: Value, n: i64) -> Value {
        let n = self.i32c(n);
        self.b.ins().ishl(x, n)
    }

    /// `m ? a : b` for a compare result (scalar or lane mask).
    fn sel(&mut self, m: Value, a: Value, b: Value) -> Value {
        let ty = self.b.func.dfg.value_type(a);
        if ty.is_vector() {
            let m = if self.b.func.dfg.value_type(m) == ty {
                m
            } else {
                self.b.ins().bitcast(ty, lanes(), m)
            };
            self.b.ins().bitselect(m, a, b)
        } else {
            self.b.ins().select(m, a, b)
        }
    }

    fn shuffle(&mut self, a: Value, b: Value, order: [u8; 16]) -> Value {
        let imm = self
            .b
            .func
            .dfg
            .immediates
            .push(ConstantData::from(order.to_vec()));
        self.b.ins().shuffle(a, b, imm)
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

    // ---- parameters and the formula -------------------------------------------

    /// The zero point of `(n, g)` less the weights' offset (I32): `q - z` is then
    /// `field - zeff`.
    fn zeff(&mut self, n: Value, g: Value) -> Value {
        let woff = self.s.weights.offset;
        match self.s.zeros {
            Some(z) => {
                let f = self.packed_get(&z, self.p.zeros, n, g);
                let d = z.offset.wrapping_sub(woff);
                self.b.ins().iadd_imm_s(f, i64::from(d))
            }
            None => self.i32c(-i64::from(woff)),
        }
    }

    /// The scale of `(n, g)` widened exactly to f32 (as `Scales::get`).
    fn scale(&mut self, n: Value, g: Value) -> Value {
        let a = self.mul_c(n, self.s.scale_strides.0);
        let b = self.mul_c(g, self.s.scale_strides.1);
        let i = self.b.ins().iadd(a, b);
        let size = self.s.scale.size();
        let off = self.mul_c(i, size);
        let addr = self.b.ins().iadd(self.p.scales, off);
        match self.s.scale {
            ScaleType::F32 => self.b.ins().load(types::F32, mem(), addr, 0),
            ScaleType::BF16 => {
                let h = self.b.ins().uload16(types::I32, mem(), addr, 0);
                // half's bf16 -> f32: NaNs get their quiet bit.
                let em = self.and_c(h, 0x7fff);
                let lim = self.i32c(0x7f80);
                let nan = self.b.ins().icmp(IntCC::UnsignedGreaterThan, em, lim);
                let q = self.or_c(h, 0x40);
                let h = self.sel(nan, q, h);
                let x = self.shl(h, 16);
                self.b.ins().bitcast(types::F32, lanes(), x)
            }
            ScaleType::F16 => {
                let h = self.b.ins().uload16(types::I32, mem(), addr, 0);
                self.f16_to_f32(h)
            }
        }
    }

    /// f16 bits (I32 or I32X4, values below 2^16) to the exact f32, NaNs quieted
    /// like `half` and `dq_runtime`'s conversion.
    fn f16_to_f32(&mut self, h: Value) -> Value {
        let ity = self.b.func.dfg.value_type(h);
        let fty = if ity.is_vector() {
            types::F32X4
        } else {
            types::F32
        };
        let sign = self.and_c(h, 0x8000);
        let sign = self.shl(sign, 16);
        let em = self.and_c(h, 0x7fff);
        let sh = self.shl(em, 13);
        let f = self.b.ins().bitcast(fty, lanes(), sh);
        let k = if ity.is_vector() {
            self.splat_c(fty, 0x7780_0000)
        } else {
            self.b.ins().f32const(f32::from_bits(0x7780_0000))
        };
        let f = self.b.ins().fmul(f, k);
        let norm = self.b.ins().bitcast(ity, lanes(), f);
        let infnan = self.or_c(sh, 0x7f80_0000);
        let lim = self.c32(ity, 0x7c00);
        let is_nan = self.b.ins().icmp(IntCC::SignedGreaterThan, em, lim);
        let quiet = self.or_c(infnan, 0x0040_0000);
        let infnan = self.sel(is_nan, quiet, infnan);
        let big = self.b.ins().icmp(IntCC::SignedGreaterThanOrEqual, em, lim);
        let r = self.sel(big, infnan, norm);
        let r = self.b.ins().bor(r, sign);
        self.b.ins().bitcast(fty, lanes(), r)
    }

    /// `f32(q - z) * s`: `d = field - zeff` (I32 or I32X4), `s` F32 or F32X4.
    fn formula(&mut self, d: Value, s: Value) -> Value {
        let fty = self.b.func.dfg.value_type(s);
        let x = self.b.ins().fcvt_from_sint(fty, d);
        self.b.ins().fmul(x, s)
    }

    /// f32 bits with NaNs quieted (`quiet_f32`).
    fn f32_bits(&mut self, y: Value) -> Value {
        let ty = self.b.func.dfg.value_type(y).as_int();
        let x = self.b.ins().bitcast(ty, lanes(), y);
        let q = self.or_c(x, 0x0040_0000);
        let nan = self.b.ins().fcmp(FloatCC::Unordered, y, y);
        self.sel(nan, q, x)
    }

    /// f16/bf16 bits (low half of each I32 lane) of f32 `y`.
    fn round_16(&mut self, y: Value) -> Value {
        if self.s.out == DType::BF16 {
            self.round_bf16(y)
        } else {
            self.round_f16(y)
        }
    }

    /// The integer RNE of `dq_runtime::convert::f32_to_bf16_bits`.
    fn round_bf16(&mut self, y: Value) -> Value {
        let ity = self.b.func.dfg.value_type(y).as_int();
        let x = self.b.ins().bitcast(ity, lanes(), y);
        let hi = self.ushr(x, 16);
        let lsb = self.and_c(hi, 1);
        let r = self.add_c(x, 0x7fff);
        let r = self.b.ins().iadd(r, lsb);
        let r = self.ushr(r, 16);
        let nanv = self.or_c(hi, 0x40);
        let nan = self.b.ins().fcmp(FloatCC::Unordered, y, y);
        self.sel(nan, nanv, r)
    }

    /// f16 round-to-nearest-even by float rescaling (subnormals and overflow
    /// included); NaN keeps its top payload bits with the quiet bit set (as F16C
    /// and `half` do).
    fn round_f16(&mut self, y: Value) -> Value {
        let fty = self.b.func.dfg.value_type(y);
        let ity = fty.as_int();
        let fconst = |t: &mut Self, bits: u32| {
            if fty.is_vector() {
                t.splat_c(fty, bits)
            } else {
                t.b.ins().f32const(f32::from_bits(bits))
            }
        };
        let w = self.b.ins().bitcast(ity, lanes(), y);
        let shl1 = self.b.ins().iadd(w, w);
        let sign = self.and_c(w, 0x8000_0000);
        let sign = self.ushr(sign, 16);
        let bias = self.and_c(shl1, 0xff00_0000);
        let min_bias = self.c32(ity, 0x7100_0000);
        let bias = self.b.ins().umax(bias, min_bias);
        let a = self.b.ins().fabs(y);
        let up = fconst(self, 0x7780_0000); // 2^112
        let down = fconst(self, 0x0880_0000); // 2^-110
        let base = self.b.ins().fmul(a, up);
        let base = self.b.ins().fmul(base, down);
        let bias = self.ushr(bias, 1);
        let bias = self.add_c(bias, 0x0780_0000);
        let bias = self.b.ins().bitcast(fty, lanes(), bias);
        let base = self.b.ins().fadd(bias, base);
        let bits = self.b.ins().bitcast(ity, lanes(), base);
        let exp = self.ushr(bits, 13);
        let exp = self.and_c(exp, 0x7c00);
        let man = self.and_c(bits, 0x0fff);
        let nonsign = self.b.ins().iadd(exp, man);
        let payload = self.and_c(w, 0x007f_ffff);
        let payload = self.ushr(payload, 13);
        let nanv = self.or_c(payload, 0x7e00);
        let lim = self.c32(ity, 0xff00_0000);
        let nan = self.b.ins().icmp(IntCC::UnsignedGreaterThan, shl1, lim);
        let r = self.sel(nan, nanv, nonsign);
        self.b.ins().bor(r, sign)
    }

    /// Output bytes per element.
    fn osz(&self) -> usize {
        if self.s.out == DType::F32 { 4 } else { 2 }
    }

    /// Stores scalar result `y` at byte address `a`.
    fn store1(&mut self, y: Value, a: Value) {
        if self.s.out == DType::F32 {
            let x = self.f32_bits(y);
            self.b.ins().store(mem(), x, a, 0);
        } else {
            let x = self.round_16(y);
            self.b.ins().istore16(mem(), x, a, 0);
        }
    }

    /// Stores F32X4 results at byte address `a`: four f32, or the 16-bit roundings
    /// (I32X4 of them returned for the caller to pack when `pack`).
    fn store4(&mut self, ys: &[Value], a: Value) {
        if self.s.out == DType::F32 {
            for (i, &y) in ys.iter().enumerate() {
                let x = self.f32_bits(y);
                self.b.ins().store(mem(), x, a, 16 * i as i32);
            }
            return;
        }
        let h: Vec<Value> = ys.iter().map(|&y| self.round_16(y)).collect();
        for (i, pair) in h.chunks(2).enumerate() {
            if let [x, y] = *pair {
                let p = self.b.ins().unarrow(x, y);
                self.b.ins().store(mem(), p, a, 16 * i as i32);
            } else {
                let p = self.b.ins().unarrow(pair[0], pair[0]);
                let p = self.b.ins().bitcast(types::I64X2, lanes(), p);
                let lo = self.b.ins().extractlane(p, 0);
                self.b.ins().store(mem(), lo, a, 16 * i as i32);
            }
        }
    }

    // ---- loops ------------------------------------------------------------------

    /// `for n in n0..n1 { row(n) }`.
    fn rows(&mut self, n0: Value, n1: Value, k0: Value) {
        let n = self.var(types::I64, n0);
        let (head, body, exit) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(head);
        let nv = self.b.use_var(n);
        let more = self.b.ins().icmp(IntCC::UnsignedLessThan, nv, n1);
        self.b.ins().brif(more, body, &[], exit, &[]);
        self.b.switch_to_block(body);
        let row = self.row_bases(nv);
        self.row(row, k0);
        let nn = self.b.ins().iadd_imm_s(nv, 1);
        self.b.def_var(n, nn);
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(exit);
    }

    fn row_bases(&mut self, n: Value) -> Row {
        let rel = self.b.ins().isub(n, self.first);
        let o = self.mul_c(rel, self.s.k * self.osz());
        let out = self.b.ins().iadd(self.p.out, o);
        let q = self.s.weights;
        let w = (32 / q.bits) as usize;
        let (words, shift) = match q.packing {
            Packing::Inner => {
                let off = self.mul_c(n, 4 * q.row_stride);
                (self.b.ins().iadd(self.p.words, off), self.i32c(0))
            }
            Packing::Outer { order } => {
                let c = self.div_c(n, w);
                let off = self.mul_c(c, 4 * q.row_stride);
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
    fn code1(&mut self, row: Row, k: Value) -> Value {
        let q = self.s.weights;
        let w = (32 / q.bits) as usize;
        match q.packing {
            Packing::Inner => {
                let kw = self.div_c(k, w);
                let word = self.word_at(row.words, kw, 4 * q.col_stride);
                let f = self.rem_c(k, w);
                let f = self.mul_c(f, q.bits as usize);
                let sh = self.b.ins().ireduce(types::I32, f);
                self.field(word, sh, q.bits)
            }
            Packing::Outer { .. } => {
                let word = self.word_at(row.words, k, 4 * q.col_stride);
                self.field(word, row.shift, q.bits)
            }
        }
    }

    /// Inputs `k0..k1` of `row`.
    fn row(&mut self, row: Row, k0: Value) {
        let k = self.var(types::I64, k0);
        let (head, body, exit) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(head);
        let kv = self.b.use_var(k);
        let more = self.b.ins().icmp(IntCC::UnsignedLessThan, kv, self.k1);
        self.b.ins().brif(more, body, &[], exit, &[]);
        self.b.switch_to_block(body);
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
                let g = self.div_c(kv, gs);
                let g1 = self.b.ins().iadd_imm_s(g, 1);
                let end = self.mul_c(g1, gs);
                let end = self.b.ins().umin(end, self.k1);
                let z = self.zeff(row.n, g);
                let s = self.scale(row.n, g);
                self.run(row, k, end, z, s);
            }
        }
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(exit);
    }

    /// One run of a group: inputs `k..end` (the variable ends at `end`).
    fn run(&mut self, row: Row, k: Variable, end: Value, z: Value, s: Value) {
        let q = self.s.weights;
        let table = q.bits == 4 && self.s.out != DType::F32;
        let tab = if table { Some(self.table(z, s)) } else { None };
        let w = (32 / q.bits) as i64;
        // Vector steps: inputs per step, and the alignment a step needs.
        let (step, align) = match (q.packing, tab.is_some()) {
            (Packing::Inner, true) => (32, 8),
            (Packing::Inner, false) => (w, w),
            (Packing::Outer { .. }, true) => (16, 1),
            (Packing::Outer { .. }, false) => (4, 1),
        };
        let (head, body, tail) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        let kv = self.b.use_var(k);
        let aligned = self.b.ins().band_imm_s(kv, align - 1);
        let zero = self.i64c(0);
        let ok = self.b.ins().icmp(IntCC::Equal, aligned, zero);
        self.b.ins().brif(ok, head, &[], tail, &[]);
        self.b.switch_to_block(head);
        let kv = self.b.use_var(k);
        let ke = self.b.ins().iadd_imm_s(kv, step);
        let fits = self.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, ke, end);
        self.b.ins().brif(fits, body, &[], tail, &[]);
        self.b.switch_to_block(body);
        match (q.packing, tab) {
            (Packing::Inner, Some(t)) => self.lut_inner(row, kv, t),
            (Packing::Outer { .. }, Some(t)) => self.lut_outer(row, kv, t),
            (_, None) => self.formula_step(row, kv, z, s),
        }
        self.b.def_var(k, ke);
        self.b.ins().jump(head, &[]);
        // One at a time.
        self.b.switch_to_block(tail);
        let (thead, tbody, done) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.ins().jump(thead, &[]);
        self.b.switch_to_block(thead);
        let kv = self.b.use_var(k);
        let more = self.b.ins().icmp(IntCC::UnsignedLessThan, kv, end);
        self.b.ins().brif(more, tbody, &[], done, &[]);
        self.b.switch_to_block(tbody);
        let c = self.code1(row, kv);
        let o = self.mul_c(kv, self.osz());
        let a = self.b.ins().iadd(row.out, o);
        if tab.is_some() {
            let c = self.b.ins().uextend(types::I64, c);
            let c = self.b.ins().ishl_imm_s(c, 1);
            let ta = self.b.ins().iadd(self.slot, c);
            let v = self.b.ins().load(types::I16, mem(), ta, 32);
            self.b.ins().store(mem(), v, a, 0);
        } else {
            let d = self.b.ins().isub(c, z);
            let y = self.formula(d, s);
            self.store1(y, a);
        }
        let kn = self.b.ins().iadd_imm_s(kv, 1);
        self.b.def_var(k, kn);
        self.b.ins().jump(thead, &[]);
        self.b.switch_to_block(done);
    }

    /// The group's 16 outputs (fields 0..16) by the formula, stored to the slot as
    /// u16; returns the tables of their low and high bytes (I8X16).
    fn table(&mut self, z: Value, s: Value) -> (Value, Value) {
        self.table_at(z, s, 0)
    }

    /// [`table`](Self::table) into the slot's part `at` (bytes): the byte tables
    /// at `at`, the u16 outputs at `at + 32`.
    fn table_at(&mut self, z: Value, s: Value, at: i32) -> (Value, Value) {
        let zv = self.b.ins().splat(types::I32X4, z);
        let sv = self.b.ins().splat(types::F32X4, s);
        let mut ys = Vec::new();
        for i in 0..4u32 {
            let mut bytes = [0u8; 16];
            for (l, c) in bytes.chunks_exact_mut(4).enumerate() {
                c.copy_from_slice(&(4 * i + l as u32).to_le_bytes());
            }
            let iota = self.vconst_bytes(types::I32X4, bytes);
            let d = self.b.ins().isub(iota, zv);
            ys.push(self.formula(d, sv));
        }
        let h: Vec<Value> = ys.iter().map(|&y| self.round_16(y)).collect();
        let e0 = self.b.ins().unarrow(h[0], h[1]);
        let e1 = self.b.ins().unarrow(h[2], h[3]);
        self.b.ins().store(mem(), e0, self.slot, at + 32);
        self.b.ins().store(mem(), e1, self.slot, at + 48);
        let e0 = self.b.ins().bitcast(types::I8X16, lanes(), e0);
        let e1 = self.b.ins().bitcast(types::I8X16, lanes(), e1);
        let lo = self.shuffle(e0, e1, std::array::from_fn(|i| 2 * i as u8));
        let hi = self.shuffle(e0, e1, std::array::from_fn(|i| 2 * i as u8 + 1));
        self.b.ins().store(mem(), lo, self.slot, at);
        self.b.ins().store(mem(), hi, self.slot, at + 16);
        (lo, hi)
    }

    /// 16 outputs of codes `c` (I8X16, values below 16) by table, stored at `a + off`.
    fn lookup16(&mut self, t: (Value, Value), c: Value, a: Value, off: i32) {
        let l = self.b.ins().x86_pshufb(t.0, c);
        let h = self.b.ins().x86_pshufb(t.1, c);
        let o0 = self.shuffle(l, h, LO_BYTES);
        let o1 = self.shuffle(l, h, HI_BYTES);
        self.b.ins().store(mem(), o0, a, off);
        self.b.ins().store(mem(), o1, a, off + 16);
    }

    /// Byte address `base + i * step` plus `j * step` for a small `j`, as an
    /// address and an immediate offset where it fits.
    fn strided(&mut self, base: Value, i: Value, step: usize) -> Value {
        let off = self.mul_c(i, step);
        self.b.ins().iadd(base, off)
    }

    /// Load `count` words `stride` bytes apart from `a` into I32X4 vectors.
    fn gather(&mut self, a: Value, count: usize, stride: usize) -> Vec<Value> {
        if stride == 4 && count % 4 == 0 {
            // Adjacent words (compressed-tensors' rows): whole vectors, the same bytes.
            return (0..count / 4)
                .map(|i| self.b.ins().load(types::I32X4, mem(), a, 16 * i as i32))
                .collect();
        }
        let fits = i32::try_from(stride * count).is_ok();
        let mut out = Vec::new();
        let mut v = None;
        for j in 0..count {
            let (addr, off) = if fits {
                (a, (stride * j) as i32)
            } else {
                let o = self.i64c((stride * j) as i64);
                (self.b.ins().iadd(a, o), 0)
            };
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
    fn lut_inner(&mut self, row: Row, k: Value, t: (Value, Value)) {
        let q = self.s.weights;
        let kw = self.b.ins().ushr_imm_s(k, 3);
        let a = self.strided(row.words, kw, 4 * q.col_stride);
        let x = self.gather(a, 4, 4 * q.col_stride)[0];
        let lo = self.and_c(x, 0x0f0f_0f0f);
        let hi = self.ushr(x, 4);
        let hi = self.and_c(hi, 0x0f0f_0f0f);
        let lo = self.b.ins().bitcast(types::I8X16, lanes(), lo);
        let hi = self.b.ins().bitcast(types::I8X16, lanes(), hi);
        let c0 = self.shuffle(lo, hi, LO_BYTES);
        let c1 = self.shuffle(lo, hi, HI_BYTES);
        let o = self.mul_c(k, 2);
        let oa = self.b.ins().iadd(row.out, o);
        self.lookup16(t, c0, oa, 0);
        self.lookup16(t, c1, oa, 32);
    }

    /// 16 inputs from `k` of a row whose words run along N.
    fn lut_outer(&mut self, row: Row, k: Value, t: (Value, Value)) {
        let q = self.s.weights;
        let a = self.strided(row.words, k, 4 * q.col_stride);
        let v = self.gather(a, 16, 4 * q.col_stride);
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
    fn formula_step(&mut self, row: Row, k: Value, z: Value, s: Value) {
        let q = self.s.weights;
        let zv = self.b.ins().splat(types::I32X4, z);
        let sv = self.b.ins().splat(types::F32X4, s);
        let codes: Vec<Value> = match q.packing {
            Packing::Inner => {
                let w = (32 / q.bits) as usize;
                let kw = self.div_c(k, w);
                let word = self.word_at(row.words, kw, 4 * q.col_stride);
                let x = self.b.ins().scalar_to_vector(types::I32X4, word);
                let bytes = if q.bits == 8 {
                    self.b.ins().bitcast(types::I8X16, lanes(), x)
                } else {
                    let lo = self.and_c(x, 0x0f0f_0f0f);
                    let hi = self.ushr(x, 4);
                    let hi = self.and_c(hi, 0x0f0f_0f0f);
                    let lo = self.b.ins().bitcast(types::I8X16, lanes(), lo);
                    let hi = self.b.ins().bitcast(types::I8X16, lanes(), hi);
                    self.shuffle(lo, hi, LO_BYTES)
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
                let a = self.strided(row.words, k, 4 * q.col_stride);
                let x = self.gather(a, 4, 4 * q.col_stride)[0];
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
    // ---- word columns (4-bit along N into 16-bit outputs) -------------------------

    /// True when rows are done a word column at a time: 4-bit fields along N (AWQ)
    /// into f16/bf16 by table, groups by size.
    fn by_columns(&self) -> bool {
        let q = self.s.weights;
        matches!(q.packing, Packing::Outer { .. })
            && q.bits == 4
            && self.s.out != DType::F32
            && matches!(self.s.groups, GroupMode::Size(_))
    }

    /// Rows `n0..n1` by word columns: the columns wholly inside by [`column`]
    /// (Self::column), the partial ones at the ends row by row.
    fn columns(&mut self, n0: Value, n1: Value, k0: Value) {
        let w = 8usize;
        let c0 = self.div_c(n0, w);
        let c = self.var(types::I64, c0);
        let last = self.b.ins().iadd_imm_s(n1, w as i64 - 1);
        let c1 = self.div_c(last, w);
        let (head, body, whole, part, next, exit) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(head);
        let cv = self.b.use_var(c);
        let more = self.b.ins().icmp(IntCC::UnsignedLessThan, cv, c1);
        self.b.ins().brif(more, body, &[], exit, &[]);
        self.b.switch_to_block(body);
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
    fn column(&mut self, nb: Value, k0: Value) {
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
        let off = self.mul_c(cw, 4 * q.row_stride);
        let words = self.b.ins().iadd(self.p.words, off);
        // Row j of the column: output offset j * K (bytes, as an immediate where it fits).
        let row_off = |j: usize| i32::try_from(j * row_bytes).ok();
        let k = self.var(types::I64, k0);
        let (head, body, exit) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(head);
        let kv = self.b.use_var(k);
        let more = self.b.ins().icmp(IntCC::UnsignedLessThan, kv, self.k1);
        self.b.ins().brif(more, body, &[], exit, &[]);
        self.b.switch_to_block(body);
        let g = self.div_c(kv, gs);
        let g1 = self.b.ins().iadd_imm_s(g, 1);
        let end = self.mul_c(g1, gs);
        let end = self.b.ins().umin(end, self.k1);
        for j in 0..w {
            let n = self.b.ins().iadd_imm_s(nb, j as i64);
            let z = self.zeff(n, g);
            let s = self.scale(n, g);
            self.table_at(z, s, 64 * j as i32);
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
        let a = self.strided(words, kv, 4 * q.col_stride);
        let v = self.gather(a, 16, 4 * q.col_stride);
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
        let (thead, tbody, done) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.ins().jump(thead, &[]);
        self.b.switch_to_block(thead);
        let kv = self.b.use_var(k);
        let more = self.b.ins().icmp(IntCC::UnsignedLessThan, kv, end);
        self.b.ins().brif(more, tbody, &[], done, &[]);
        self.b.switch_to_block(tbody);
        let word = self.word_at(words, kv, 4 * q.col_stride);
        let o = self.b.ins().ishl_imm_s(kv, 1);
        let oa = self.b.ins().iadd(out, o);
        for (j, &f) in order.iter().enumerate() {
            let sh = self.i32c(4 * i64::from(f));
            let c = self.field(word, sh, 4);
            let c = self.b.ins().uextend(types::I64, c);
            let c = self.b.ins().ishl_imm_s(c, 1);
            let ta = self.b.ins().iadd(self.slot, c);
            let y = self.b.ins().load(types::I16, mem(), ta, 64 * j as i32 + 32);
            let ro = self.i64c((j * row_bytes) as i64);
            let ra = self.b.ins().iadd(oa, ro);
            self.b.ins().store(mem(), y, ra, 0);
        }
        let kn = self.b.ins().iadd_imm_s(kv, 1);
        self.b.def_var(k, kn);
        self.b.ins().jump(thead, &[]);
        self.b.switch_to_block(done);
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(exit);
    }

    /// `x & 0x0f` in every byte.
    fn and_c8(&mut self, x: Value) -> Value {
        let m = self.vconst_bytes(types::I8X16, [0x0f; 16]);
        self.b.ins().band(x, m)
    }
}
