//! Small instruction helpers every emitter uses: I64 offset arithmetic that folds
//! constants (fewer instructions to compile), vector constants hoisted to the
//! entry block (or kept local to a stretch of code), constant byte shuffles, and
//! integer operations that work on I32 and I32X4 alike.

use std::collections::HashMap;

use cranelift_codegen::cursor::{Cursor, FuncCursor};
use cranelift_codegen::ir::{
    ConstantData, InstBuilder, InstructionData, Opcode, Type, Value, types,
};

use super::Translator;

impl<'a, 'f> Translator<'a, 'f> {
    /// The constant `v` is defined as, if an `iconst`.
    fn const_of(&self, v: Value) -> Option<i64> {
        let inst = self.b.func.dfg.value_def(v).inst()?;
        match self.b.func.dfg.insts[inst] {
            InstructionData::UnaryImm {
                opcode: Opcode::Iconst,
                imm,
            } => Some(imm.bits()),
            _ => None,
        }
    }

    /// `a + b`, folding a constant 0 (fewer instructions to compile).
    pub(super) fn add(&mut self, a: Value, b: Value) -> Value {
        if self.const_of(a) == Some(0) {
            b
        } else if self.const_of(b) == Some(0) {
            a
        } else {
            self.b.ins().iadd(a, b)
        }
    }

    /// `x + c`, folding `c == 0`.
    pub(super) fn add_imm(&mut self, x: Value, c: i64) -> Value {
        if c == 0 {
            x
        } else {
            self.b.ins().iadd_imm_s(x, c)
        }
    }

    /// `x * c`, folding `c == 1` and a constant 0 `x`.
    pub(super) fn mul_imm(&mut self, x: Value, c: i64) -> Value {
        if c == 1 || self.const_of(x) == Some(0) {
            x
        } else {
            self.b.ins().imul_imm_s(x, c)
        }
    }

    /// `x / c` for a constant `c > 0`: a shift when `c` is a power of two (no
    /// divide, whose fixed registers also cost the allocator).
    pub(super) fn udiv_imm(&mut self, x: Value, c: i64) -> Value {
        match c {
            1 => x,
            _ if c.count_ones() == 1 => self.b.ins().ushr_imm_s(x, c.trailing_zeros() as i64),
            _ => self.b.ins().udiv_imm_s(x, c),
        }
    }

    /// `x % c` for a constant `c > 0` (a mask when `c` is a power of two).
    pub(super) fn urem_imm(&mut self, x: Value, c: i64) -> Value {
        if c.count_ones() == 1 {
            self.b.ins().band_imm_s(x, c - 1)
        } else {
            self.b.ins().urem_imm_s(x, c)
        }
    }

    /// An I64 constant.
    pub(super) fn iconst(&mut self, v: i64) -> Value {
        self.b.ins().iconst(types::I64, v)
    }

    /// A vector constant with every lane `bits` (integer or float lanes), emitted
    /// once at the top of the entry block so loops only use a register.
    ///
    /// Inside [`local_consts`](Self::local_consts) code (outside hot loops), it is
    /// emitted in that code's first block instead: a short live range, where a
    /// hoisted one would hold a register across the whole function.
    pub(super) fn vconst(&mut self, ty: Type, bits: u64) -> Value {
        let key = (ty, bits);
        let consts = self.local.as_ref().map_or(&self.consts, |l| &l.1);
        if let Some(&v) = consts.get(&key) {
            return v;
        }
        let mut pos = FuncCursor::new(self.b.func);
        match self.local.as_ref().map(|l| l.0) {
            // Before the block's terminator once it has one (`f` went on to a
            // block it dominates).
            Some(b) => match pos.func.layout.last_inst(b) {
                Some(i) if pos.func.dfg.insts[i].opcode().is_terminator() => pos.goto_inst(i),
                _ => pos.goto_bottom(b),
            },
            None => pos.goto_first_insertion_point(self.entry),
        }
        // One constant-pool load (a scalar constant and a splat take three
        // instructions for integer lanes).
        let lane = ty.lane_bits() as usize / 8;
        let bytes: Vec<u8> = (0..ty.lane_count())
            .flat_map(|_| bits.to_le_bytes().into_iter().take(lane))
            .collect();
        let c = pos.func.dfg.constants.insert(ConstantData::from(bytes));
        let v = pos.ins().vconst(ty, c);
        self.local
            .as_mut()
            .map_or(&mut self.consts, |l| &mut l.1)
            .insert(key, v);
        v
    }

    /// Runs `f` with vector constants local to the current block (see
    /// [`vconst`](Self::vconst)), which must dominate every block `f` emits.
    pub(super) fn local_consts<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        let here = self.b.current_block().expect("emitting into a block");
        let outer = self.local.replace((here, HashMap::new()));
        let r = f(self);
        self.local = outer;
        r
    }

    /// A vector constant from its little-endian lane bytes (emitted where used).
    pub(super) fn vconst_lanes(&mut self, ty: Type, bytes: Vec<u8>) -> Value {
        let c = self.b.func.dfg.constants.insert(ConstantData::from(bytes));
        self.b.ins().vconst(ty, c)
    }

    /// `v` as an I32 constant, or a splat when `ty` is I32X4.
    pub(super) fn c32(&mut self, ty: Type, v: i64) -> Value {
        if ty.is_vector() {
            self.vconst(ty, v as i32 as u32 as u64)
        } else {
            self.b.ins().iconst(types::I32, v as i32 as u32 as i64)
        }
    }

    /// `x << n` (every lane).
    pub(super) fn vshl(&mut self, x: Value, n: i64) -> Value {
        let n = self.b.ins().iconst(types::I32, n);
        self.b.ins().ishl(x, n)
    }

    /// `x >> n`, arithmetic (every lane).
    pub(super) fn vsshr(&mut self, x: Value, n: i64) -> Value {
        let n = self.b.ins().iconst(types::I32, n);
        self.b.ins().sshr(x, n)
    }

    /// `x >> n`, logical (every lane).
    pub(super) fn vushr(&mut self, x: Value, n: i64) -> Value {
        let n = self.b.ins().iconst(types::I32, n);
        self.b.ins().ushr(x, n)
    }

    /// `x & c` (every lane).
    pub(super) fn and_c(&mut self, x: Value, c: i64) -> Value {
        let ty = self.b.func.dfg.value_type(x);
        let c = self.c32(ty, c);
        self.b.ins().band(x, c)
    }

    /// `x | c` (every lane).
    pub(super) fn or_c(&mut self, x: Value, c: i64) -> Value {
        let ty = self.b.func.dfg.value_type(x);
        let c = self.c32(ty, c);
        self.b.ins().bor(x, c)
    }

    /// `x + c` (every lane).
    pub(super) fn add_c(&mut self, x: Value, c: i64) -> Value {
        let ty = self.b.func.dfg.value_type(x);
        let c = self.c32(ty, c);
        self.add(x, c)
    }
}
