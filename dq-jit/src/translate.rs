//! Lowering a [`Spec`] to Cranelift IR.
//!
//! The function computes logical elements `start..end`:
//!
//! ```text
//! fn(src, scales, zps, dst, start, end)
//!   entry:     unravel `start` into one index per loop
//!   run(i..):  one run = a stretch of the innermost loop, at most to its end
//!              -> segments of one scale (group) -> 16-wide vector steps + scalar tail
//!   advance_k: carry into loop k, back to `run`
//! ```
//!
//! Shapes, strides, groups and dtypes are constants. The vector path works on 16
//! elements (4 x F32X4) at a time and never loads past the last element it computes.

use std::collections::HashMap;

use cranelift_codegen::cursor::{Cursor, FuncCursor};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    Block, BlockArg, ConstantData, Endianness, InstBuilder, InstructionData, MemFlagsData, Opcode,
    StackSlotData, StackSlotKind, Type, Value, types,
};
use cranelift_codegen::isa::TargetFrontendConfig;
use cranelift_frontend::FunctionBuilder;
use dq_runtime::{DType, Loop, Node};

use crate::spec::{Analysis, IntWidth, Spec, Z_LIMIT};

/// Elements per vector step.
const STEP: i64 = 16;

/// 2^23: a float in `2^23..2^24` has integer steps, its value in the mantissa.
const MAGIC: i64 = 1 << 23;

/// The bits of 2^23 as f32.
const MAGIC_BITS: u64 = 0x4B00_0000;

/// What [`Ints::Biased`] values of dtype `t` add to make them non-negative.
fn bias(t: DType) -> i64 {
    match t {
        DType::S8 => 128,
        DType::S4 => 8,
        _ => 0,
    }
}

/// Shortest constant-parameter 4-bit segment (compile-time bound) that takes the
/// table-lookup path, as the generated backend's `LUT_MIN`.
const LUT_MIN: usize = 32;

/// How the target does a dynamic byte shuffle (the 4-bit table lookup).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lut {
    /// No cheap byte shuffle: 4-bit src takes the ordinary vector path.
    None,
    /// x86-64 with SSSE3: `x86_pshufb` (indices are always 0..15).
    Pshufb,
}

/// The steps of [`Translator::emit_vector_loop`].
#[derive(Clone, Copy)]
enum Steps {
    /// 16 elements a step.
    Plain,
    /// 16 elements a step, the step given its first element's index.
    Indexed,
    /// 32 elements a step (4-bit table lookups); `full`, when given, is an
    /// empty block from which a whole group enters the loop directly (see
    /// [`Translator::emit_full_entry`]).
    Double { full: Option<Block> },
}

/// The scales of a vector step.
#[derive(Clone, Copy)]
enum Scales {
    /// One scale for all 16 elements (a splat).
    Splat(Value),
    /// Per element, contiguous from this byte address (dst dtype).
    At(Value),
}

/// How an element gets its scale and zero point.
#[derive(Clone, Copy)]
enum Params {
    /// Constant over a segment: the work-type scale and the integer zero point.
    Fixed { s: Value, z: Value },
    /// Per element: scale index `base + j * scale_stride` (innermost group of 1).
    PerElem { base: Value },
    /// A 4-bit segment's results, looked up: the address of its 16 entries in
    /// nibble order (see [`Translator::store_table`]).
    Table { addr: Value },
}

/// The integer operands of [`Translator::eval`].
#[derive(Clone, Copy)]
enum Ints {
    /// `q` and `z` as integers (the scalar int type, or I32X4).
    Plain { q: Value, z: Value },
    /// F32X4 floats `fq = float(q) + k` and `fz = float(z) + k` for a constant splat
    /// `k` (`None`: 0), every value an integer below 2^24, so `float(q) = fq - k`
    /// and `float(q - z) = fq - fz` exactly.
    Biased {
        fq: Value,
        fz: Value,
        k: Option<Value>,
    },
}

/// What an integer node of the formula is, as far as the translator knows.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Int {
    /// Known zero (the zero point when there is none).
    Zero,
    Q,
    Z,
    /// `q - z`.
    QmZ,
    /// Any other value, computed.
    V(Value),
}

impl Int {
    /// Integer node `node` (`IntSub` with operands `a`, `b`) symbolically, or `None`
    /// when it needs a computed subtraction.
    fn of(node: Node, zps: bool, a: Int, b: Int) -> Option<Int> {
        match node {
            Node::Q => Some(Int::Q),
            Node::Z if zps => Some(Int::Z),
            Node::Z => Some(Int::Zero),
            _ => match (a, b) {
                (x, Int::Zero) => Some(x),
                (Int::Q, Int::Z) => Some(Int::QmZ),
                _ => None,
            },
        }
    }

    /// True when every integer the formula converts to float is `q`, `q - z` or
    /// zero, so [`Ints::Biased`] operands serve.
    fn biased_ok(nodes: &[Node], zps: bool) -> bool {
        let mut v: Vec<Option<Int>> = Vec::with_capacity(nodes.len());
        for node in nodes {
            let at = |i: u16| v.get(i as usize).copied().flatten();
            let x = match *node {
                Node::Q | Node::Z => Int::of(*node, zps, Int::Zero, Int::Zero),
                Node::IntSub(a, b) => match (at(a), at(b)) {
                    (Some(a), Some(b)) => match Int::of(*node, zps, a, b) {
                        Some(x) => Some(x),
                        None => return false,
                    },
                    _ => return false,
                },
                Node::Float(a) if !matches!(at(a), Some(Int::Q | Int::QmZ | Int::Zero)) => {
                    return false;
                }
                _ => None,
            };
            v.push(x);
        }
        true
    }
}

/// A formula node's value in [`Translator::eval`].
#[derive(Clone, Copy)]
enum Val {
    I(Int),
    F(Value),
}

/// Bases of one run of the innermost loop.
#[derive(Clone, Copy)]
struct Run {
    src: Value,
    dst: Value,
    scale: Value,
}

/// Vector constants by type and lane bits.
type Consts = HashMap<(Type, u64), Value>;

/// Emits the IR of one kernel into a [`FunctionBuilder`].
pub struct Translator<'a, 'f> {
    b: FunctionBuilder<'f>,
    spec: &'a Spec,
    an: Analysis,
    src: Value,
    scales: Value,
    zps: Value,
    dst: Value,
    /// The entry block, where vector constants are materialised once.
    entry: Block,
    /// Vector constants already in `entry`, by type and lane bits.
    consts: Consts,
    /// I8X16 constants already in `entry`, by bytes.
    byte_consts: HashMap<Vec<u8>, Value>,
    /// The byte shuffle for 4-bit table lookups.
    lut: Lut,
    /// Vector code takes src and zero points as [`Ints::Biased`] floats (a byte
    /// shuffle places each value in the mantissa of 2^23, no integer conversion).
    biased: bool,
    /// While a table segment is emitted: where its 16 results are, for the
    /// elements it does one at a time.
    table: Option<Value>,
    /// The stack slot tables go to, created on first use.
    table_slot: Option<Value>,
    /// Under [`Translator::local_consts`]: the block its constants go to, and them.
    local: Option<(Block, Consts)>,
}

fn mem() -> MemFlagsData {
    MemFlagsData::new()
        .with_notrap()
        .with_endianness(Endianness::Little)
}

fn lanes() -> MemFlagsData {
    MemFlagsData::new().with_endianness(Endianness::Little)
}

impl<'a, 'f> Translator<'a, 'f> {
    /// Emits the whole function; the builder's signature must already have the six
    /// parameters (four pointers, `start`, `end`).
    pub fn translate(
        mut b: FunctionBuilder<'f>,
        spec: &'a Spec,
        an: Analysis,
        cfg: TargetFrontendConfig,
        lut: Lut,
    ) {
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let p = b.block_params(entry).to_vec();
        let mut t = Translator {
            b,
            spec,
            an,
            src: p[0],
            scales: p[1],
            zps: p[2],
            dst: p[3],
            entry,
            consts: HashMap::new(),
            byte_consts: HashMap::new(),
            lut,
            biased: lut == Lut::Pshufb && Int::biased_ok(spec.formula.nodes, spec.zps.is_some()),
            table: None,
            table_slot: None,
            local: None,
        };
        t.emit_entry(p[4], p[5]);
        t.b.seal_all_blocks();
        t.b.finalize(cfg);
    }

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
    fn add(&mut self, a: Value, b: Value) -> Value {
        if self.const_of(a) == Some(0) {
            b
        } else if self.const_of(b) == Some(0) {
            a
        } else {
            self.b.ins().iadd(a, b)
        }
    }

    /// `x + c`, folding `c == 0`.
    fn add_imm(&mut self, x: Value, c: i64) -> Value {
        if c == 0 {
            x
        } else {
            self.b.ins().iadd_imm_s(x, c)
        }
    }

    /// `x * c`, folding `c == 1` and a constant 0 `x`.
    fn mul_imm(&mut self, x: Value, c: i64) -> Value {
        if c == 1 || self.const_of(x) == Some(0) {
            x
        } else {
            self.b.ins().imul_imm_s(x, c)
        }
    }

    /// `x / c` for a constant `c > 0`: a shift when `c` is a power of two (no
    /// divide, whose fixed registers also cost the allocator).
    fn udiv_imm(&mut self, x: Value, c: i64) -> Value {
        match c {
            1 => x,
            _ if c.count_ones() == 1 => self.b.ins().ushr_imm_s(x, c.trailing_zeros() as i64),
            _ => self.b.ins().udiv_imm_s(x, c),
        }
    }

    /// `x % c` for a constant `c > 0` (a mask when `c` is a power of two).
    fn urem_imm(&mut self, x: Value, c: i64) -> Value {
        if c.count_ones() == 1 {
            self.b.ins().band_imm_s(x, c - 1)
        } else {
            self.b.ins().urem_imm_s(x, c)
        }
    }

    fn iconst(&mut self, v: i64) -> Value {
        self.b.ins().iconst(types::I64, v)
    }

    /// A vector constant with every lane `bits` (integer or float lanes), emitted
    /// once at the top of the entry block so loops only use a register.
    ///
    /// Inside [`local_consts`](Self::local_consts) code (outside hot loops), it is
    /// emitted in that code's first block instead: a short live range, where a
    /// hoisted one would hold a register across the whole function.
    fn vconst(&mut self, ty: Type, bits: u64) -> Value {
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
    fn local_consts<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        let here = self.b.current_block().expect("emitting into a block");
        let outer = self.local.replace((here, HashMap::new()));
        let r = f(self);
        self.local = outer;
        r
    }

    fn inner(&self) -> Loop {
        *self.spec.loops.last().expect("a non-empty plan has a loop")
    }

    /// Entry: return on an empty range, else unravel `start` and enter the run loop.
    fn emit_entry(&mut self, start: Value, end: Value) {
        let ret = self.b.create_block();
        let body = self.b.create_block();
        let empty = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThanOrEqual, start, end);
        self.b.ins().brif(empty, ret, &[], body, &[]);
        self.b.switch_to_block(body);
        let start = if self.peel_at_entry() {
            self.emit_entry_peel(start, end, ret)
        } else {
            start
        };
        if self.spec.loops.len() == 1 {
            // One loop holds every element, and the caller checks `end <= numel`:
            // the range is a single run.
            let base = self.emit_bases(&[]);
            self.emit_inner(start, end, base);
            self.b.ins().jump(ret, &[]);
            self.b.switch_to_block(ret);
            self.b.ins().return_(&[]);
            return;
        }
        let remaining = self.b.ins().isub(end, start);
        let idx = self.unravel(start);
        let run = self.b.create_block();
        for _ in 0..=self.spec.loops.len() {
            self.b.append_block_param(run, types::I64);
        }
        let mut args: Vec<_> = idx.iter().map(|&v| v.into()).collect();
        args.push(remaining.into());
        self.b.ins().jump(run, &args);
        self.emit_runs(run, ret);
        self.b.switch_to_block(ret);
        self.b.ins().return_(&[]);
    }

    /// One index per loop (outermost first) of logical element `l < numel`.
    fn unravel(&mut self, l: Value) -> Vec<Value> {
        let n = self.spec.loops.len();
        let mut idx = vec![l; n];
        let mut rest = l;
        for k in (1..n).rev() {
            let len = self.spec.loops[k].len as i64;
            idx[k] = self.urem_imm(rest, len);
            rest = self.udiv_imm(rest, len);
        }
        idx[0] = rest;
        idx
    }

    /// True when only the first element of a call can sit on an odd nibble, so the
    /// 4-bit vector code peels it once at entry instead of checking every segment:
    /// contiguous inner loop of even length, even outer src strides, and segments
    /// (groups along the inner loop) of even length. Not with
    /// [`table_scalar`](Self::table_scalar) segments, whose odd first element is
    /// a table lookup.
    fn peel_at_entry(&self) -> bool {
        let n = self.spec.loops.len();
        let inner = self.inner();
        self.spec.src.is_4bit()
            && !self.table_scalar()
            && inner.src_stride == 1
            && inner.len.is_multiple_of(2)
            && (inner.is_constant() || inner.group.is_multiple_of(2) || inner.group == 1)
            && self.spec.loops[..n - 1]
                .iter()
                .all(|l| l.src_stride.is_multiple_of(2) || l.len == 1)
    }

    /// Under [`peel_at_entry`](Self::peel_at_entry): computes element `start` alone
    /// when it is odd (its nibble is then odd), and returns the first element left
    /// (branching to `ret` when none is).
    fn emit_entry_peel(&mut self, start: Value, end: Value, ret: Block) -> Value {
        let odd = self.b.ins().band_imm_s(start, 1);
        let (one, join, more) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        let s = self.b.append_block_param(join, types::I64);
        self.b.ins().brif(odd, one, &[], join, &[start.into()]);
        self.b.switch_to_block(one);
        let idx = self.unravel(start);
        let n = idx.len();
        let base = self.emit_bases(&idx[..n - 1]);
        self.emit_scalar_elem(idx[n - 1], base, Params::PerElem { base: base.scale });
        let next = self.add_imm(start, 1);
        self.b.ins().jump(join, &[next.into()]);
        self.b.switch_to_block(join);
        let left = self.b.ins().icmp(IntCC::UnsignedLessThan, s, end);
        self.b.ins().brif(left, more, &[], ret, &[]);
        self.b.switch_to_block(more);
        s
    }

    /// The run loop: `run`'s params are the loop indices (outermost first) and the
    /// number of elements left.
    fn emit_runs(&mut self, run: Block, ret: Block) {
        let n = self.spec.loops.len();
        let p = self.b.block_params(run).to_vec();
        let (idx, remaining) = (&p[..n], p[n]);
        self.b.switch_to_block(run);
        let inner = self.inner();
        let room = {
            let len = self.iconst(inner.len as i64);
            self.b.ins().isub(len, idx[n - 1])
        };
        let cnt = self.b.ins().umin(room, remaining);
        let base = self.emit_bases(&idx[..n - 1]);
        let j1 = self.add(idx[n - 1], cnt);
        self.emit_inner(idx[n - 1], j1, base);
        let left = self.b.ins().isub(remaining, cnt);
        let adv = self.b.create_block();
        self.b.ins().brif(left, adv, &[], ret, &[]);
        self.b.switch_to_block(adv);
        self.emit_advance(n - 1, idx, left, run);
    }

    /// Carries into loop `k - 1` after loop `k` wrapped (the innermost always wraps
    /// after a run). `left > 0` guarantees the outermost never overflows.
    fn emit_advance(&mut self, k: usize, idx: &[Value], left: Value, run: Block) {
        let zero = self.iconst(0);
        if k == 0 {
            // The outermost loop wrapped: unreachable while `left > 0` (single-loop
            // specs never get here), but the block needs a terminator.
            let mut args: Vec<_> = idx.iter().map(|&v| v.into()).collect();
            args[0] = zero.into();
            args.push(left.into());
            self.b.ins().jump(run, &args);
            return;
        }
        let next = self.add_imm(idx[k - 1], 1);
        let wrap = self
            .b
            .ins()
            .icmp_imm_s(IntCC::Equal, next, self.spec.loops[k - 1].len as i64);
        let go = self.b.create_block();
        let carry = self.b.create_block();
        self.b.ins().brif(wrap, carry, &[], go, &[]);
        self.b.switch_to_block(go);
        let mut args: Vec<_> = idx.iter().map(|&v| v.into()).collect();
        args[k - 1] = next.into();
        for a in &mut args[k..] {
            *a = zero.into();
        }
        args.push(left.into());
        self.b.ins().jump(run, &args);
        self.b.switch_to_block(carry);
        self.emit_advance(k - 1, idx, left, run);
    }

    /// Src, dst and scale bases of the outer loop indices.
    fn emit_bases(&mut self, outer: &[Value]) -> Run {
        let mut r = Run {
            src: self.iconst(0),
            dst: self.iconst(0),
            scale: self.iconst(0),
        };
        for (k, &i) in outer.iter().enumerate() {
            let l = self.spec.loops[k];
            let s = self.mul_imm(i, l.src_stride as i64);
            r.src = self.add(r.src, s);
            let d = self.mul_imm(i, l.dst_stride as i64);
            r.dst = self.add(r.dst, d);
            if !l.is_constant() {
                let g = self.udiv_imm(i, l.group as i64);
                let g = self.mul_imm(g, l.scale_stride as i64);
                r.scale = self.add(r.scale, g);
            }
        }
        r
    }

    /// Inner elements `j0..j1` of one run.
    fn emit_inner(&mut self, j0: Value, j1: Value, run: Run) {
        let inner = self.inner();
        if inner.group == 1 && !inner.is_constant() {
            self.emit_per_elem(j0, j1, run);
        } else {
            self.emit_segments(j0, j1, run);
        }
    }

    /// Groups along the innermost loop: one scale and zero point per segment.
    fn emit_segments(&mut self, j0: Value, j1: Value, run: Run) {
        let inner = self.inner();
        // Segment loop params: first element, then (groups along the loop) the
        // next group boundary and the scale index. The group of `j0` is divided
        // out once per run; segments then step by a group.
        let constant = inner.is_constant();
        let head = self.b.create_block();
        let j = self.b.append_block_param(head, types::I64);
        let exit = self.b.create_block();
        let (seg_end, next, sidx) = if constant {
            self.b.ins().jump(head, &[j0.into()]);
            self.b.switch_to_block(head);
            (j1, j1, run.scale)
        } else {
            let g = self.udiv_imm(j0, inner.group as i64);
            let next0 = self.add_imm(g, 1);
            let next0 = self.mul_imm(next0, inner.group as i64);
            let off = self.mul_imm(g, inner.scale_stride as i64);
            let sidx0 = self.add(run.scale, off);
            let next = self.b.append_block_param(head, types::I64);
            let sidx = self.b.append_block_param(head, types::I64);
            self.b
                .ins()
                .jump(head, &[j0.into(), next0.into(), sidx0.into()]);
            self.b.switch_to_block(head);
            (self.b.ins().umin(next, j1), next, sidx)
        };
        let s = self.load_scale(sidx);
        let zidx = if self.spec.zps_broadcast {
            self.iconst(0)
        } else {
            sidx
        };
        let z = self.load_zp(zidx);
        let full = (!constant && self.full_segments()).then(|| {
            let len = self.b.ins().isub(seg_end, j);
            self.b
                .ins()
                .icmp_imm_s(IntCC::Equal, len, inner.group as i64)
        });
        self.emit_elems(j, seg_end, run, Params::Fixed { s, z }, full);
        let more = self.b.ins().icmp(IntCC::UnsignedLessThan, seg_end, j1);
        let mut args: Vec<BlockArg> = vec![seg_end.into()];
        if !constant {
            let next = self.add_imm(next, inner.group as i64);
            let sidx = self.add_imm(sidx, inner.scale_stride as i64);
            args.extend([BlockArg::from(next), BlockArg::from(sidx)]);
        }
        self.b.ins().brif(more, head, &args, exit, &[]);
        self.b.switch_to_block(exit);
    }

    /// Innermost group of 1: a scale per element.
    fn emit_per_elem(&mut self, j0: Value, j1: Value, run: Run) {
        let inner = self.inner();
        let z_ok = match self.spec.zps {
            None => true,
            Some(_) if self.spec.zps_broadcast => true,
            Some(t) => matches!(t, DType::S8 | DType::U8),
        };
        let contiguous = inner.src_stride == 1 && inner.dst_stride == 1 && inner.scale_stride == 1;
        let params = Params::PerElem { base: run.scale };
        if !(self.an.vector && z_ok && contiguous) {
            self.emit_scalar_loop(j0, j1, run, params);
            return;
        }
        let zb = if self.spec.zps_broadcast {
            let zero = self.iconst(0);
            Some(self.load_zp(zero))
        } else {
            None
        };
        let tail = self.enter_vector(zb, j0);
        self.emit_vector_loop((j0, j1), run, tail, Steps::Indexed, |t, j, sp, dp| {
            let s = Scales::At(t.scale_addr(run.scale, j));
            let z = match zb {
                Some(z) => [t.vec_z(z); 4],
                None => match t.spec.zps {
                    None => [t.no_z(); 4],
                    Some(zt) => {
                        let off = t.b.ins().iadd(run.scale, j);
                        t.load_zp_vec(zt, off)
                    }
                },
            };
            t.emit_vector_step(sp, dp, s, z);
        });
        self.emit_scalar_loop_at(tail, j1, run, params);
    }

    /// True when table segments that are a whole group enter the table loop
    /// directly (see [`emit_full_entry`](Self::emit_full_entry)): vector code,
    /// contiguous inner loop, groups of whole 16-element steps, and even outer src
    /// strides (a group then starts on a byte), with no run-time zero-point check.
    fn full_segments(&self) -> bool {
        let n = self.spec.loops.len();
        let inner = self.inner();
        self.an.vector
            && self.table_scalar()
            && inner.src_stride == 1
            && inner.dst_stride == 1
            && inner.group.is_multiple_of(16)
            && self.spec.loops[..n - 1]
                .iter()
                .all(|l| l.src_stride.is_multiple_of(2) || l.len == 1)
    }

    /// Elements `j0..j1` with a fixed scale and zero point: vector steps when the
    /// inner loop is contiguous, then a scalar tail. `full`, when given, is the
    /// condition that the segment is a whole group: it then skips the peel and
    /// the loop's bounds (see [`emit_full_entry`](Self::emit_full_entry)).
    fn emit_elems(&mut self, j0: Value, j1: Value, run: Run, p: Params, full: Option<Value>) {
        let inner = self.inner();
        let Params::Fixed { s, z } = p else {
            unreachable!("segments have fixed params")
        };
        if !(self.an.vector && inner.src_stride == 1 && inner.dst_stride == 1) {
            self.emit_scalar_loop(j0, j1, run, p);
            return;
        }
        let tail = self.enter_vector(Some(z), j0);
        let sv = self.b.ins().splat(types::F32X4, s);
        let zv = self.vec_z(z);
        let mut p = p;
        if self.lut_pays() {
            let (tab, entries) = self.local_consts(|t| t.lut_table(sv, zv));
            let full = full.map(|full| {
                let (fast, slow) = (self.b.create_block(), self.b.create_block());
                self.b.ins().brif(full, fast, &[], slow, &[]);
                self.b.switch_to_block(slow);
                fast
            });
            if self.table_scalar() {
                // Only the partial segments' single elements read the table
                // back: a whole group has none.
                let addr = self.store_table(&entries);
                p = Params::Table { addr };
                self.table = Some(addr);
            }
            self.emit_lut_loop((j0, j1), run, &tab, tail, full);
            self.table = None;
        } else {
            self.emit_vector_loop((j0, j1), run, tail, Steps::Plain, |t, _, sp, dp| {
                t.emit_vector_step(sp, dp, Scales::Splat(sv), [zv; 4])
            });
        }
        self.emit_scalar_loop_at(tail, j1, run, p);
    }

    /// Branches to a fresh block where the zero point may take the vector path, or
    /// to `tail(j0)` when it may not; returns `tail` (its param is the first index
    /// the vector code left). Without a run-time check there is no branch.
    fn enter_vector(&mut self, z: Option<Value>, j0: Value) -> Block {
        let tail = self.b.create_block();
        self.b.append_block_param(tail, types::I64);
        if let Some(z) = z.filter(|_| self.an.z_checked) {
            let z = self.as_i64(z);
            let biased = self.add_imm(z, Z_LIMIT);
            let ok = self
                .b
                .ins()
                .icmp_imm_s(IntCC::UnsignedLessThanOrEqual, biased, 2 * Z_LIMIT);
            let vec = self.b.create_block();
            self.b.ins().brif(ok, vec, &[], tail, &[j0.into()]);
            self.b.switch_to_block(vec);
        }
        tail
    }

    fn as_i64(&mut self, v: Value) -> Value {
        if self.b.func.dfg.value_type(v) == types::I128 {
            self.b.ins().ireduce(types::I64, v)
        } else {
            v
        }
    }

    /// A segment's zero point `z` (|z| <= Z_LIMIT) as vector code takes it: an
    /// I32X4 splat, or when [`biased`](Self::biased) the F32X4 splat of
    /// `z + 2^23 + bias(src)` (exact: below 2^24).
    fn vec_z(&mut self, z: Value) -> Value {
        if self.spec.zps.is_none() {
            return self.no_z();
        }
        let z = self.as_i64(z);
        if self.biased {
            let c = self.add_imm(z, MAGIC + bias(self.spec.src));
            let c = self.b.ins().fcvt_from_sint(types::F32, c);
            return self.b.ins().splat(types::F32X4, c);
        }
        let z = self.b.ins().ireduce(types::I32, z);
        self.b.ins().splat(types::I32X4, z)
    }

    /// Vector zero points without zero points: never read, any constant will do.
    fn no_z(&mut self) -> Value {
        if self.biased {
            self.bias_splat(self.spec.src)
        } else {
            self.vconst(types::I32X4, 0)
        }
    }

    /// 16 per-element zero points of dtype `zt` (8-bit) from element `o`, as
    /// [`vec_z`](Self::vec_z) makes them.
    fn load_zp_vec(&mut self, zt: DType, o: Value) -> [Value; 4] {
        if !self.biased {
            return self.load_int_vec(zt, self.zps, o);
        }
        let addr = self.add(self.zps, o);
        let mut z = self.load_biased_at(zt, addr);
        let shift = bias(self.spec.src) - bias(zt);
        if shift != 0 {
            let c = self.vconst(types::F32X4, (shift as f32).to_bits() as u64);
            for x in &mut z {
                *x = self.b.ins().fadd(*x, c);
            }
        }
        z
    }

    /// The vector loop from `j0` while a step's elements remain before `j1`;
    /// then jumps to `exit` with the first index not done. A 4-bit src starting
    /// on an odd nibble peels one element first (unless the function did at
    /// entry), so vector loads start on a byte.
    ///
    /// The loop is bottom-tested and counts with the src address alone; `step`
    /// gets the element index only for [`Steps::Indexed`] (else `j0`, meaningless).
    fn emit_vector_loop(
        &mut self,
        (j0, j1): (Value, Value),
        run: Run,
        exit: Block,
        steps: Steps,
        step: impl Fn(&mut Self, Value, Value, Value),
    ) {
        let (elems, with_j, full) = match steps {
            Steps::Plain => (STEP, false, None),
            Steps::Indexed => (STEP, true, None),
            Steps::Double { full } => (2 * STEP, false, full),
        };
        let start = j0;
        let j0 = if self.spec.src.is_4bit() && !self.peel_at_entry() {
            self.emit_peel(j0, j1, run)
        } else {
            j0
        };
        // Elements the vector steps cover, and the first index after them.
        let len = self.b.ins().isub(j1, j0);
        let covered = self.b.ins().band_imm_s(len, -elems);
        let jv = self.add(j0, covered);
        // Src and dst addresses of element `j0`, carried along.
        let src_step = (self.spec.src.bits() as i64 * elems) / 8;
        let (sp, dp) = self.vector_addrs(run, j0);
        let src_len = if self.spec.src.is_4bit() {
            self.b.ins().ushr_imm_s(covered, 1)
        } else {
            covered
        };
        let send = self.add(sp, src_len);
        let w = self.spec.out_bytes() as i64;
        let body = self.b.create_block();
        let sp_p = self.b.append_block_param(body, types::I64);
        let dp_p = self.b.append_block_param(body, types::I64);
        let mut args: Vec<BlockArg> = vec![sp.into(), dp.into()];
        let j = if with_j {
            args.push(j0.into());
            self.b.append_block_param(body, types::I64)
        } else {
            j0
        };
        // With a second entry, the loop's end and exit index are params too.
        let (send_p, jv_p) = match full {
            Some(_) => {
                args.extend([BlockArg::from(send), BlockArg::from(jv)]);
                (
                    self.b.append_block_param(body, types::I64),
                    self.b.append_block_param(body, types::I64),
                )
            }
            None => (send, jv),
        };
        self.b.ins().brif(covered, body, &args, exit, &[jv.into()]);
        let (send, jv) = (send_p, jv_p);
        if let Some(full) = full {
            self.b.switch_to_block(full);
            self.emit_full_entry(start, run, body);
        }
        self.b.switch_to_block(body);
        step(self, j, sp_p, dp_p);
        let spn = self.add_imm(sp_p, src_step);
        let dpn = self.add_imm(dp_p, elems * w);
        let mut args: Vec<BlockArg> = vec![spn.into(), dpn.into()];
        if with_j {
            args.push(self.add_imm(j, elems).into());
        }
        if full.is_some() {
            args.extend([BlockArg::from(send), BlockArg::from(jv)]);
        }
        let more = self.b.ins().icmp(IntCC::UnsignedLessThan, spn, send);
        self.b.ins().brif(more, body, &args, exit, &[jv.into()]);
    }

    /// Enters the table loop `body` (params: src and dst address, src end, exit
    /// index) for a whole group from `j0`: it starts on a byte (see
    /// [`full_segments`](Self::full_segments)), so no peel, and its bounds are
    /// constants.
    fn emit_full_entry(&mut self, j0: Value, run: Run, body: Block) {
        let covered = self.inner().group as i64 / 32 * 32;
        let (sp, dp) = self.vector_addrs(run, j0);
        let send = self.add_imm(sp, covered / 2);
        let jv = self.add_imm(j0, covered);
        let args = [sp, dp, send, jv].map(BlockArg::from);
        self.b.ins().jump(body, &args);
    }

    /// Src and dst byte addresses of element `j` of a contiguous run (4-bit src:
    /// `j` on a byte, an even nibble).
    fn vector_addrs(&mut self, run: Run, j: Value) -> (Value, Value) {
        let so = self.add(run.src, j);
        let so = if self.spec.src.is_4bit() {
            self.b.ins().ushr_imm_s(so, 1)
        } else {
            so
        };
        let sp = self.add(self.src, so);
        let dof = self.add(run.dst, j);
        (sp, self.dst_addr(dof))
    }

    /// One vector step: 16 elements from src byte address `sp` to dst byte address
    /// `dp` with scales `s` and zero points `z` (four lanes groups each).
    /// `z` is as [`vec_z`](Self::vec_z) makes it.
    ///
    /// Lane group by lane group, each scale loaded just before its use (the
    /// backend then folds the load into the multiply) and each f32 result stored
    /// at once: fewer registers live, so no spills in per-element loops.
    fn emit_vector_step(&mut self, sp: Value, dp: Value, s: Scales, z: [Value; 4]) {
        let ints: [Ints; 4] = if self.biased {
            let fq = self.load_biased_at(self.spec.src, sp);
            let k = Some(self.bias_splat(self.spec.src));
            std::array::from_fn(|i| Ints::Biased {
                fq: fq[i],
                fz: z[i],
                k,
            })
        } else {
            let q = self.load_int_vec_at(self.spec.src, sp);
            std::array::from_fn(|i| Ints::Plain { q: q[i], z: z[i] })
        };
        let mut ys = [sp; 4];
        for i in 0..4 {
            let si = match s {
                Scales::Splat(v) => v,
                Scales::At(addr) => self.load_scale_lanes(addr, i),
            };
            ys[i] = self.eval(ints[i], si, true);
            if self.spec.out() == DType::F32 {
                let x = self.f32_bits(ys[i]);
                self.b.ins().store(mem(), x, dp, 16 * i as i32);
            }
        }
        if self.spec.out() != DType::F32 {
            self.store_vec_at(dp, ys);
        }
    }

    // ---- 4-bit table lookup -----------------------------------------------

    /// True when constant-parameter segments of this spec go through a 16-entry
    /// table: 4-bit src, a byte shuffle on the target, and segments that can be at
    /// least [`LUT_MIN`] long (a shorter one costs about a vector step more).
    fn lut_pays(&self) -> bool {
        let inner = self.inner();
        let longest = if inner.is_constant() {
            inner.len
        } else {
            inner.group.min(inner.len)
        };
        self.spec.src.is_4bit() && self.lut != Lut::None && longest >= LUT_MIN
    }

    /// The dst bits of the formula at the 16 values of the 4-bit src with scale
    /// `sv` and zero point `zv` (splats), computed by the same vector code as
    /// [`emit_vector_step`](Self::emit_vector_step), as byte tables: entry `n`'s
    /// byte `b` is lane `n` of table `b` (2 tables for 16-bit dst, 4 for f32).
    /// `zv` is as [`vec_z`](Self::vec_z) makes it.
    fn lut_table(&mut self, sv: Value, zv: Value) -> (Vec<Value>, Vec<Value>) {
        let signed = self.spec.src == DType::S4;
        let k = self.biased.then(|| self.bias_splat(self.spec.src));
        let mut ys = [sv; 4];
        for (i, y) in ys.iter_mut().enumerate() {
            let n = |l: usize| {
                let n = (4 * i + l) as i32;
                if signed && n >= 8 { n - 16 } else { n }
            };
            let ints = if self.biased && self.spec.zps.is_none() {
                // No zero point: entry n's float(q) itself (`k: None`).
                let floats = (0..4).flat_map(|l| (n(l) as f32).to_bits().to_le_bytes());
                let fq = self.vconst_lanes(types::F32X4, floats.collect());
                Ints::Biased {
                    fq,
                    fz: zv,
                    k: None,
                }
            } else if self.biased {
                // Entry n's q biased like `zv`'s z: q + 2^23 + bias(src).
                let c = MAGIC + bias(self.spec.src);
                let floats =
                    (0..4).flat_map(|l| ((n(l) as i64 + c) as f32).to_bits().to_le_bytes());
                let fq = self.vconst_lanes(types::F32X4, floats.collect());
                Ints::Biased { fq, fz: zv, k }
            } else {
                let q = (0..4).flat_map(|l| n(l).to_le_bytes()).collect();
                let q = self.vconst_lanes(types::I32X4, q);
                Ints::Plain { q, z: zv }
            };
            *y = self.eval(ints, sv, true);
        }
        // Entry n's bytes in element order, then regrouped by byte position.
        let bytes: Vec<Value> = if self.spec.out() == DType::F32 {
            ys.iter().map(|&y| self.f32_bits(y)).collect()
        } else {
            let h: Vec<Value> = if self.spec.dst == DType::F16 {
                self.round_f16_looped(ys)
            } else {
                ys.iter().map(|&y| self.round_16(y)).collect()
            };
            vec![
                self.b.ins().unarrow(h[0], h[1]),
                self.b.ins().unarrow(h[2], h[3]),
            ]
        };
        let v: Vec<Value> = bytes
            .into_iter()
            .map(|x| self.b.ins().bitcast(types::I8X16, lanes(), x))
            .collect();
        let w = self.spec.out_bytes();
        if w == 2 {
            // v[0] = entries 0..8, v[1] = 8..16, two bytes each: low bytes to the
            // low half, high bytes to the high half, then the halves paired up.
            let split = (0..8).map(|n| 2 * n).chain((0..8).map(|n| 2 * n + 1));
            let a = self.shuffle(v[0], v[0], split.clone());
            let b = self.shuffle(v[1], v[1], split);
            let planes = vec![
                self.shuffle(a, b, (0..8).chain(16..24)),
                self.shuffle(a, b, (8..16).chain(24..32)),
            ];
            return (planes, v);
        }
        // f32: v[k] = entries 4k..4k+4. Bytes b, b+1 of entries 0..8, then of 8..16.
        let pick = |b: u8| {
            (0..8)
                .map(move |n| 4 * n + b)
                .chain((0..8).map(move |n| 4 * n + b + 1))
        };
        let lo01 = self.shuffle(v[0], v[1], pick(0));
        let hi01 = self.shuffle(v[0], v[1], pick(2));
        let lo23 = self.shuffle(v[2], v[3], pick(0));
        let hi23 = self.shuffle(v[2], v[3], pick(2));
        let planes = vec![
            self.shuffle(lo01, lo23, (0..8).chain(16..24)),
            self.shuffle(lo01, lo23, (8..16).chain(24..32)),
            self.shuffle(hi01, hi23, (0..8).chain(16..24)),
            self.shuffle(hi01, hi23, (8..16).chain(24..32)),
        ];
        (planes, v)
    }

    /// True when a table segment's single elements (odd first nibble, tail) are
    /// looked up in its table rather than computed: always, unless a zero point
    /// checked at run time can send a whole segment to scalar code (the table
    /// is then not exact).
    fn table_scalar(&self) -> bool {
        self.lut_pays() && !self.an.z_checked
    }

    /// The address of the function's 64-byte stack slot (tables, and f16
    /// rounding in a loop), created on first use.
    fn table_slot(&mut self) -> Value {
        if let Some(a) = self.table_slot {
            return a;
        }
        let data = StackSlotData::new(StackSlotKind::ExplicitSlot, 64, 4);
        let slot = self.b.create_sized_stack_slot(data);
        let mut pos = FuncCursor::new(self.b.func).at_first_insertion_point(self.entry);
        let a = pos.ins().stack_addr(types::I64, slot, 0);
        self.table_slot = Some(a);
        a
    }

    /// [`round_f16`](Self::round_f16) of four F32X4, by a loop over the stack
    /// slot: one copy of the rounding code instead of four (compile time).
    fn round_f16_looped(&mut self, ys: [Value; 4]) -> Vec<Value> {
        let addr = self.table_slot();
        for (k, &y) in ys.iter().enumerate() {
            self.b.ins().store(mem(), y, addr, 16 * k as i32);
        }
        let end = self.add_imm(addr, 64);
        let (body, done) = (self.b.create_block(), self.b.create_block());
        let p = self.b.append_block_param(body, types::I64);
        self.b.ins().jump(body, &[addr.into()]);
        self.b.switch_to_block(body);
        let y = self.b.ins().load(types::F32X4, mem(), p, 0);
        let h = self.local_consts(|t| t.round_f16(y));
        self.b.ins().store(mem(), h, p, 0);
        let pn = self.add_imm(p, 16);
        let more = self.b.ins().icmp(IntCC::UnsignedLessThan, pn, end);
        self.b.ins().brif(more, body, &[pn.into()], done, &[]);
        self.b.switch_to_block(done);
        (0..4)
            .map(|k| self.b.ins().load(types::I32X4, mem(), addr, 16 * k))
            .collect()
    }

    /// Stores a table's entries (`entries`: 16 results in nibble order, as I8X16
    /// vectors) to the function's table slot; returns the slot's address.
    fn store_table(&mut self, entries: &[Value]) -> Value {
        let addr = self.table_slot();
        for (k, &e) in entries.iter().enumerate() {
            self.b.ins().store(mem(), e, addr, 16 * k as i32);
        }
        addr
    }

    /// Table lookups over `j0..j1`: 32 elements a step, then one 16-element step
    /// when 16 are left (unless only a call's first or last segment can end
    /// short of a 32-element step: its rest is left to the scalar tail, which
    /// saves compile time); jumps to `exit` with the first index not done.
    /// `full`: see [`Steps::Double`].
    fn emit_lut_loop(
        &mut self,
        (j0, j1): (Value, Value),
        run: Run,
        tab: &[Value],
        exit: Block,
        full: Option<Block>,
    ) {
        let inner = self.inner();
        let steps = Steps::Double { full };
        let step = |t: &mut Self, _, sp, dp| t.emit_lut_step(tab, sp, dp, 2);
        if inner.len.is_multiple_of(32) && (inner.is_constant() || inner.group.is_multiple_of(32)) {
            self.emit_vector_loop((j0, j1), run, exit, steps, step);
            return;
        }
        let mid = self.b.create_block();
        let jv = self.b.append_block_param(mid, types::I64);
        self.emit_vector_loop((j0, j1), run, mid, steps, step);
        self.b.switch_to_block(mid);
        // `jv` is even (the loop peeled an odd start).
        let left = self.b.ins().isub(j1, jv);
        let one = self
            .b
            .ins()
            .icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, left, STEP);
        let step = self.b.create_block();
        self.b.ins().brif(one, step, &[], exit, &[jv.into()]);
        self.b.switch_to_block(step);
        let (sp, dp) = self.vector_addrs(run, jv);
        self.emit_lut_step(tab, sp, dp, 1);
        let jn = self.add_imm(jv, STEP);
        self.b.ins().jump(exit, &[jn.into()]);
    }

    /// `16 * halves` elements by table lookup: `8 * halves` src bytes at `sp` (from
    /// a low nibble) to dst byte address `dp`.
    fn emit_lut_step(&mut self, tab: &[Value], sp: Value, dp: Value, halves: usize) {
        let v = if halves == 2 {
            self.b.ins().load(types::I8X16, mem(), sp, 0)
        } else {
            self.load_low64(sp)
        };
        let (lo, hi) = self.nibbles(v);
        let out_bytes = 16 * self.spec.out_bytes() as i32;
        for h in 0..halves as u8 {
            // Nibbles 16h..16h+16 in element order.
            let idx = self.shuffle(lo, hi, (8 * h..8 * h + 8).flat_map(|i| [i, i + 16]));
            self.emit_lut_16(tab, idx, dp, out_bytes * h as i32);
        }
    }

    /// The 16 elements whose nibbles are `idx`, stored at `dp + off`.
    fn emit_lut_16(&mut self, tab: &[Value], idx: Value, dp: Value, off: i32) {
        let got: Vec<Value> = tab.iter().map(|&t| self.lookup(t, idx)).collect();
        let lo_bytes = |i: u8| [i, i + 16];
        let out: Vec<Value> = if got.len() == 2 {
            vec![
                self.shuffle(got[0], got[1], (0..8).flat_map(lo_bytes)),
                self.shuffle(got[0], got[1], (8..16).flat_map(lo_bytes)),
            ]
        } else {
            let b01l = self.shuffle(got[0], got[1], (0..8).flat_map(lo_bytes));
            let b01h = self.shuffle(got[0], got[1], (8..16).flat_map(lo_bytes));
            let b23l = self.shuffle(got[2], got[3], (0..8).flat_map(lo_bytes));
            let b23h = self.shuffle(got[2], got[3], (8..16).flat_map(lo_bytes));
            let words = |i: u8| [2 * i, 2 * i + 1, 2 * i + 16, 2 * i + 17];
            vec![
                self.shuffle(b01l, b23l, (0..4).flat_map(words)),
                self.shuffle(b01l, b23l, (4..8).flat_map(words)),
                self.shuffle(b01h, b23h, (0..4).flat_map(words)),
                self.shuffle(b01h, b23h, (4..8).flat_map(words)),
            ]
        };
        for (k, x) in out.into_iter().enumerate() {
            self.b.ins().store(mem(), x, dp, off + 16 * k as i32);
        }
    }

    /// The low and the high nibble of every byte of `v` (I8X16), as bytes.
    fn nibbles(&mut self, v: Value) -> (Value, Value) {
        let m = self.vconst(types::I8X16, 0x0f);
        let lo = self.b.ins().band(v, m);
        // A 16-bit lane shift moves each byte's high nibble down (the mask drops
        // the bits shifted in from the next byte).
        let v16 = self.b.ins().bitcast(types::I16X8, lanes(), v);
        let hi = self.vushr(v16, 4);
        let hi = self.b.ins().bitcast(types::I8X16, lanes(), hi);
        (lo, self.b.ins().band(hi, m))
    }

    /// Byte `idx[i]` (0..16) of `table` in lane `i`.
    fn lookup(&mut self, table: Value, idx: Value) -> Value {
        debug_assert_eq!(self.lut, Lut::Pshufb);
        self.b.ins().x86_pshufb(table, idx)
    }

    /// A constant shuffle of the 32 bytes of `a` then `b`.
    fn shuffle(&mut self, a: Value, b: Value, order: impl IntoIterator<Item = u8>) -> Value {
        let order: Vec<u8> = order.into_iter().collect();
        debug_assert_eq!(order.len(), 16);
        let imm = self.b.func.dfg.immediates.push(ConstantData::from(order));
        self.b.ins().shuffle(a, b, imm)
    }

    /// An I8X16 constant of 16 `bytes`, emitted once at the top of the entry block.
    fn vconst_bytes(&mut self, bytes: Vec<u8>) -> Value {
        debug_assert_eq!(bytes.len(), 16);
        if let Some(&v) = self.byte_consts.get(&bytes) {
            return v;
        }
        let c = self
            .b
            .func
            .dfg
            .constants
            .insert(ConstantData::from(bytes.clone()));
        let mut pos = FuncCursor::new(self.b.func).at_first_insertion_point(self.entry);
        let v = pos.ins().vconst(types::I8X16, c);
        self.byte_consts.insert(bytes, v);
        v
    }

    /// A vector constant from its little-endian lane bytes (emitted where used).
    fn vconst_lanes(&mut self, ty: Type, bytes: Vec<u8>) -> Value {
        let c = self.b.func.dfg.constants.insert(ConstantData::from(bytes));
        self.b.ins().vconst(ty, c)
    }

    /// For a 4-bit src at an odd nibble offset, computes element `j0` alone (when
    /// `j0 < j1`) and returns the next index.
    fn emit_peel(&mut self, j0: Value, j1: Value, run: Run) -> Value {
        let so = self.add(run.src, j0);
        let odd = self.b.ins().band_imm_s(so, 1);
        let some = self.b.ins().icmp(IntCC::UnsignedLessThan, j0, j1);
        let some = self.b.ins().uextend(types::I64, some);
        let peel = self.b.ins().band(odd, some);
        let (one, next) = (self.b.create_block(), self.b.create_block());
        let jn = self.b.append_block_param(next, types::I64);
        self.b.ins().brif(peel, one, &[], next, &[j0.into()]);
        self.b.switch_to_block(one);
        let p = self.fixed_params_for_peel(run);
        self.emit_scalar_elem(j0, run, p);
        let j1p = self.add_imm(j0, 1);
        self.b.ins().jump(next, &[j1p.into()]);
        self.b.switch_to_block(next);
        jn
    }

    /// Peeled elements reload their params (they may be per element), or look
    /// up the current segment's table.
    fn fixed_params_for_peel(&mut self, run: Run) -> Params {
        match self.table {
            Some(addr) => Params::Table { addr },
            None => Params::PerElem { base: run.scale },
        }
    }

    /// Scalar loop over `j0..j1`.
    fn emit_scalar_loop(&mut self, j0: Value, j1: Value, run: Run, p: Params) {
        let head = self.b.create_block();
        self.b.append_block_param(head, types::I64);
        self.b.ins().jump(head, &[j0.into()]);
        self.emit_scalar_loop_at(head, j1, run, p);
    }

    /// Scalar loop from `head`'s param (jumped to, not yet switched to) to `j1`.
    fn emit_scalar_loop_at(&mut self, head: Block, j1: Value, run: Run, p: Params) {
        let (body, exit) = (self.b.create_block(), self.b.create_block());
        self.b.switch_to_block(head);
        let j = self.b.block_params(head)[0];
        let more = self.b.ins().icmp(IntCC::UnsignedLessThan, j, j1);
        self.b.ins().brif(more, body, &[], exit, &[]);
        self.b.switch_to_block(body);
        self.emit_scalar_elem(j, run, p);
        let jn = self.add_imm(j, 1);
        self.b.ins().jump(head, &[jn.into()]);
        self.b.switch_to_block(exit);
    }

    /// One element `j` of the current run from the table at `addr`: the entry
    /// of its nibble, copied.
    fn emit_table_elem(&mut self, j: Value, run: Run, addr: Value) {
        let (so, dof) = self.elem_offsets(run, j);
        let n = self.load_nibble(self.src, so);
        let w = self.spec.out_bytes() as i64;
        let off = self.mul_imm(n, w);
        let at = self.add(addr, off);
        let dp = self.dst_addr(dof);
        let ty = Type::int_with_byte_size(w as u16).expect("a 2, 4 or 8-byte dst");
        let x = self.b.ins().load(ty, mem(), at, 0);
        self.b.ins().store(mem(), x, dp, 0);
    }

    /// One element `j` of the current run.
    fn emit_scalar_elem(&mut self, j: Value, run: Run, p: Params) {
        let inner = self.inner();
        let (s, z) = match p {
            Params::Table { addr } => return self.emit_table_elem(j, run, addr),
            Params::Fixed { s, z } => (s, z),
            Params::PerElem { base } => {
                let sidx = if inner.is_constant() {
                    base
                } else {
                    let g = self.udiv_imm(j, inner.group as i64);
                    let off = self.mul_imm(g, inner.scale_stride as i64);
                    self.add(base, off)
                };
                let s = self.load_scale(sidx);
                let zidx = if self.spec.zps_broadcast {
                    self.iconst(0)
                } else {
                    sidx
                };
                (s, self.load_zp(zidx))
            }
        };
        let (so, dof) = self.elem_offsets(run, j);
        let q = self.load_int(self.spec.src, self.src, so);
        let y = self.eval(Ints::Plain { q, z }, s, false);
        self.store_scalar(dof, y);
    }

    /// Src and dst element offsets of element `j` of the current run.
    fn elem_offsets(&mut self, run: Run, j: Value) -> (Value, Value) {
        let inner = self.inner();
        let so = self.mul_imm(j, inner.src_stride as i64);
        let dof = self.mul_imm(j, inner.dst_stride as i64);
        (self.add(run.src, so), self.add(run.dst, dof))
    }

    // ---- loads -------------------------------------------------------------

    fn int_ty(&self) -> Type {
        match self.an.int {
            IntWidth::I64 => types::I64,
            IntWidth::I128 => types::I128,
        }
    }

    fn work_ty(&self) -> Type {
        if self.spec.dst == DType::F64 {
            types::F64
        } else {
            types::F32
        }
    }

    /// The raw nibble (0..16, I64) of 4-bit element `o` of `buf` (even `o`: the
    /// byte's low nibble).
    fn load_nibble(&mut self, buf: Value, o: Value) -> Value {
        let byte = self.b.ins().ushr_imm_s(o, 1);
        let addr = self.add(buf, byte);
        let x = self.b.ins().uload8(types::I64, mem(), addr, 0);
        let sh = self.b.ins().band_imm_s(o, 1);
        let sh = self.b.ins().ishl_imm_s(sh, 2);
        let x = self.b.ins().ushr(x, sh);
        self.b.ins().band_imm_s(x, 15)
    }

    /// Integer element `o` (nibbles for 4-bit) of `buf`, as the scalar int type.
    fn load_int(&mut self, t: DType, buf: Value, o: Value) -> Value {
        let v = match t {
            DType::S4 | DType::U4 => {
                let x = self.load_nibble(buf, o);
                if t == DType::S4 {
                    let x = self.b.ins().bxor_imm_s(x, 8);
                    self.add_imm(x, -8)
                } else {
                    x
                }
            }
            DType::S8 | DType::U8 => {
                let addr = self.add(buf, o);
                if t == DType::S8 {
                    self.b.ins().sload8(types::I64, mem(), addr, 0)
                } else {
                    self.b.ins().uload8(types::I64, mem(), addr, 0)
                }
            }
            DType::S32 => {
                let off = self.b.ins().ishl_imm_s(o, 2);
                let addr = self.add(buf, off);
                self.b.ins().sload32(mem(), addr, 0)
            }
            _ => {
                let off = self.b.ins().ishl_imm_s(o, 3);
                let addr = self.add(buf, off);
                self.b.ins().load(types::I64, mem(), addr, 0)
            }
        };
        if self.int_ty() == types::I128 {
            self.b.ins().sextend(types::I128, v)
        } else {
            v
        }
    }

    fn load_zp(&mut self, idx: Value) -> Value {
        match self.spec.zps {
            Some(t) => self.load_int(t, self.zps, idx),
            None => {
                let z = self.iconst(0);
                if self.int_ty() == types::I128 {
                    self.b.ins().sextend(types::I128, z)
                } else {
                    z
                }
            }
        }
    }

    /// Scale `idx` as the work float (exact widening).
    fn load_scale(&mut self, idx: Value) -> Value {
        let w = self.spec.dst_bytes() as i64;
        let off = self.mul_imm(idx, w);
        let addr = self.add(self.scales, off);
        match self.spec.dst {
            DType::F32 => self.b.ins().load(types::F32, mem(), addr, 0),
            DType::F64 => self.b.ins().load(types::F64, mem(), addr, 0),
            DType::BF16 => {
                let h = self.b.ins().uload16(types::I32, mem(), addr, 0);
                let x = self.b.ins().ishl_imm_s(h, 16);
                self.b.ins().bitcast(types::F32, lanes(), x)
            }
            _ => {
                let h = self.b.ins().uload16(types::I32, mem(), addr, 0);
                self.f16_to_f32(h, types::I32)
            }
        }
    }

    /// 16 contiguous integer elements from element offset `o` as four I32X4
    /// (4-bit: `o` is even, the caller peeled an odd start).
    fn load_int_vec(&mut self, t: DType, buf: Value, o: Value) -> [Value; 4] {
        let o = if t.is_4bit() {
            self.b.ins().ushr_imm_s(o, 1)
        } else {
            o
        };
        let addr = self.add(buf, o);
        self.load_int_vec_at(t, addr)
    }

    /// 16 contiguous integer elements starting at byte address `addr` (4-bit: on
    /// the byte's low nibble) as four I32X4.
    ///
    /// One byte shuffle puts element `4j + k` in byte `j` of lane `k`; shifts then
    /// extend byte `j` of every lane to I32 (x86 has one shuffle port, while
    /// widening through I16X8 costs nine shuffles).
    fn load_int_vec_at(&mut self, t: DType, addr: Value) -> [Value; 4] {
        let x = match t {
            DType::S8 | DType::U8 => {
                let v = self.b.ins().load(types::I8X16, mem(), addr, 0);
                self.shuffle(v, v, (0..16).map(|i| 4 * (i % 4) + i / 4))
            }
            _ => {
                // 8 bytes = 16 nibbles; low nibble first: element `e` is the low
                // (even `e`) or high nibble of byte `e / 2`.
                let v = self.load_low64(addr);
                let (lo, hi) = self.nibbles(v);
                let at = |e: u8| e / 2 + 16 * (e % 2);
                self.shuffle(lo, hi, (0..16).map(|i| at(4 * (i % 4) + i / 4)))
            }
        };
        let x = self.b.ins().bitcast(types::I32X4, lanes(), x);
        // Bits of the value in its byte: 8, or 4 for a nibble (upper bits zero).
        let bits = if t.is_4bit() { 4 } else { 8 };
        let signed = matches!(t, DType::S8 | DType::S4);
        let mut out = [x; 4];
        for (j, o) in out.iter_mut().enumerate() {
            let lowest = 8 * j as i64;
            *o = if signed {
                // Move the value's top bit to bit 31, then shift back arithmetically.
                let up = 32 - bits - lowest;
                let y = if up > 0 { self.vshl(x, up) } else { x };
                self.vsshr(y, 32 - bits)
            } else {
                let y = if lowest > 0 { self.vushr(x, lowest) } else { x };
                if lowest + 8 < 32 {
                    self.and_c(y, 0xff)
                } else {
                    y
                }
            };
        }
        out
    }

    /// The byte address of scale `base + j`.
    fn scale_addr(&mut self, base: Value, j: Value) -> Value {
        let idx = self.add(base, j);
        let off = self.mul_imm(idx, self.spec.dst_bytes() as i64);
        self.add(self.scales, off)
    }

    /// Scales `4k .. 4k + 4` from byte address `addr` as an F32X4.
    fn load_scale_lanes(&mut self, addr: Value, k: usize) -> Value {
        let at = (k * 4 * self.spec.dst_bytes()) as i32;
        match self.spec.dst {
            DType::F32 => self.b.ins().load(types::F32X4, mem(), addr, at),
            DType::BF16 => {
                let h = self.b.ins().uload16x4(mem(), addr, at);
                let x = self.vshl(h, 16);
                self.b.ins().bitcast(types::F32X4, lanes(), x)
            }
            _ => {
                let h = self.b.ins().uload16x4(mem(), addr, at);
                self.f16_to_f32(h, types::I32X4)
            }
        }
    }

    /// The F32X4 splat of `2^23 + bias(t)`: biased values of dtype `t` minus it are
    /// the values.
    fn bias_splat(&mut self, t: DType) -> Value {
        let k = (MAGIC + bias(t)) as f32;
        self.vconst(types::F32X4, k.to_bits() as u64)
    }

    /// 8 bytes at `addr` in the low half of an I8X16 (the high half zero).
    fn load_low64(&mut self, addr: Value) -> Value {
        let w = self.b.ins().load(types::I64, mem(), addr, 0);
        let v = self.b.ins().scalar_to_vector(types::I64X2, w);
        self.b.ins().bitcast(types::I8X16, lanes(), v)
    }

    /// A constant byte shuffle `pshufb(x, order)` (an index of 0x80 gives 0).
    fn pshufb(&mut self, x: Value, order: impl IntoIterator<Item = u8>) -> Value {
        // Hoisted: a mask loaded in the loop costs more than the register.
        let m = self.vconst_bytes(order.into_iter().collect());
        self.b.ins().x86_pshufb(x, m)
    }

    /// 16 contiguous integer elements of dtype `t` (8- or 4-bit) from byte address
    /// `addr` (4-bit: from the low nibble) as [`Ints::Biased`] floats: four F32X4 of
    /// `2^23 + q + bias(t)`.
    fn load_biased_at(&mut self, t: DType, addr: Value) -> [Value; 4] {
        if t.is_4bit() {
            let v = self.load_low64(addr);
            let (lo, hi) = self.nibbles(v);
            // Nibble values in element order (element 2i low, 2i + 1 high nibble).
            let x = self.shuffle(lo, hi, (0..8).flat_map(|i| [i, i + 16]));
            return self.biased_lanes(x, t);
        }
        let v = self.b.ins().load(types::I8X16, mem(), addr, 0);
        self.biased_lanes(v, t)
    }

    /// The 16 values of dtype `t` in the bytes of `x` as four F32X4 of
    /// `2^23 + q + bias(t)`: a byte shuffle places each byte at the bottom of a
    /// zeroed lane, one xor sets the bits of 2^23 and (signed) flips the value's
    /// sign bit, which adds the bias.
    fn biased_lanes(&mut self, x: Value, t: DType) -> [Value; 4] {
        // The bias is the value's sign bit (0 for unsigned).
        let top = self.vconst(types::I32X4, MAGIC_BITS | bias(t) as u64);
        let mut out = [x; 4];
        for (k, o) in out.iter_mut().enumerate() {
            let b = 4 * k as u8;
            let y = self.pshufb(x, (b..b + 4).flat_map(|i| [i, 0x80, 0x80, 0x80]));
            let y = self.b.ins().bitcast(types::I32X4, lanes(), y);
            let y = self.b.ins().bxor(y, top);
            *o = self.b.ins().bitcast(types::F32X4, lanes(), y);
        }
        out
    }

    // ---- integer helpers that work on I32 and I32X4 alike ----------------------

    fn c32(&mut self, ty: Type, v: i64) -> Value {
        if ty.is_vector() {
            self.vconst(ty, v as i32 as u32 as u64)
        } else {
            self.b.ins().iconst(types::I32, v as i32 as u32 as i64)
        }
    }

    fn vshl(&mut self, x: Value, n: i64) -> Value {
        let n = self.b.ins().iconst(types::I32, n);
        self.b.ins().ishl(x, n)
    }

    fn vsshr(&mut self, x: Value, n: i64) -> Value {
        let n = self.b.ins().iconst(types::I32, n);
        self.b.ins().sshr(x, n)
    }

    fn vushr(&mut self, x: Value, n: i64) -> Value {
        let n = self.b.ins().iconst(types::I32, n);
        self.b.ins().ushr(x, n)
    }

    fn and_c(&mut self, x: Value, c: i64) -> Value {
        let ty = self.b.func.dfg.value_type(x);
        let c = self.c32(ty, c);
        self.b.ins().band(x, c)
    }

    fn or_c(&mut self, x: Value, c: i64) -> Value {
        let ty = self.b.func.dfg.value_type(x);
        let c = self.c32(ty, c);
        self.b.ins().bor(x, c)
    }

    fn add_c(&mut self, x: Value, c: i64) -> Value {
        let ty = self.b.func.dfg.value_type(x);
        let c = self.c32(ty, c);
        self.add(x, c)
    }

    /// `m ? a : b` where `m` is an icmp/fcmp result (i8 scalar or lane mask).
    fn sel(&mut self, m: Value, a: Value, b: Value) -> Value {
        let ty = self.b.func.dfg.value_type(a);
        if ty.is_vector() {
            let mt = self.b.func.dfg.value_type(m);
            let m = if mt == ty {
                m
            } else {
                self.b.ins().bitcast(ty, lanes(), m)
            };
            self.b.ins().bitselect(m, a, b)
        } else {
            self.b.ins().select(m, a, b)
        }
    }

    /// f16 bits (`ity` = I32 or I32X4, values < 2^16) to the exact f32, quieting NaNs
    /// like `half`.
    fn f16_to_f32(&mut self, h: Value, ity: Type) -> Value {
        let fty = if ity.is_vector() {
            types::F32X4
        } else {
            types::F32
        };
        let sign = self.and_c(h, 0x8000);
        let sign = self.vshl(sign, 16);
        let em = self.and_c(h, 0x7fff);
        let sh = self.vshl(em, 13);
        // Normal and subnormal: rescale the exponent by 2^112 (exact).
        let f = self.b.ins().bitcast(fty, lanes(), sh);
        let k = if ity.is_vector() {
            self.vconst(fty, 0x7780_0000)
        } else {
            self.b.ins().f32const(f32::from_bits(0x7780_0000))
        };
        let f = self.b.ins().fmul(f, k);
        let norm = self.b.ins().bitcast(ity, lanes(), f);
        // Inf and NaN: all-ones exponent; NaN gets its quiet bit.
        let infnan = self.or_c(sh, 0x7f80_0000);
        let inf_lim = self.c32(ity, 0x7c00);
        let is_nan = self.b.ins().icmp(IntCC::SignedGreaterThan, em, inf_lim);
        let quiet = self.or_c(infnan, 0x0040_0000);
        let infnan = self.sel(is_nan, quiet, infnan);
        let is_big = self
            .b
            .ins()
            .icmp(IntCC::SignedGreaterThanOrEqual, em, inf_lim);
        let r = self.sel(is_big, infnan, norm);
        let r = self.b.ins().bor(r, sign);
        self.b.ins().bitcast(fty, lanes(), r)
    }

    // ---- the formula -------------------------------------------------------

    /// Evaluates the formula for integer operands `ints` and scale `s` (work float),
    /// scalar or I32X4/F32X4 when `vector`.
    fn eval(&mut self, ints: Ints, s: Value, vector: bool) -> Value {
        let wty = if vector { types::F32X4 } else { self.work_ty() };
        let zps = self.spec.zps.is_some();
        let nodes = self.spec.formula.nodes;
        let mut v: Vec<Val> = Vec::with_capacity(nodes.len());
        for node in nodes {
            let int = |i: u16| match v[i as usize] {
                Val::I(x) => x,
                Val::F(_) => unreachable!("analysed: integer operand"),
            };
            let f = |i: u16| match v[i as usize] {
                Val::F(x) => x,
                Val::I(_) => unreachable!("analysed: float operand"),
            };
            let x = match *node {
                Node::Q | Node::Z | Node::IntSub(..) => {
                    let (a, b) = match *node {
                        Node::IntSub(a, b) => (int(a), int(b)),
                        _ => (Int::Zero, Int::Zero),
                    };
                    match Int::of(*node, zps, a, b) {
                        Some(x) => Val::I(x),
                        None => {
                            let (a, b) = (self.int_value(a, ints), self.int_value(b, ints));
                            Val::I(Int::V(self.b.ins().isub(a, b)))
                        }
                    }
                }
                Node::S => Val::F(s),
                Node::Float(a) => Val::F(self.float_of(int(a), ints, wty)),
                Node::Lit(bits) => Val::F(self.lit(f64::from_bits(bits), wty)),
                Node::Neg(a) => Val::F(self.b.ins().fneg(f(a))),
                Node::Abs(a) => Val::F(self.b.ins().fabs(f(a))),
                Node::Add(a, b) => Val::F(self.b.ins().fadd(f(a), f(b))),
                Node::Sub(a, b) => Val::F(self.b.ins().fsub(f(a), f(b))),
                Node::Mul(a, b) => Val::F(self.b.ins().fmul(f(a), f(b))),
                Node::Min(a, b) => Val::F(self.min_max(f(a), f(b), false)),
                Node::Max(a, b) => Val::F(self.min_max(f(a), f(b), true)),
            };
            v.push(x);
        }
        match v.last() {
            Some(Val::F(y)) => *y,
            _ => unreachable!("analysed: ends in a float node"),
        }
    }

    /// The integer value of `x` (plain operands only: biased ones are used only for
    /// formulas where [`Int::biased_ok`] holds).
    fn int_value(&mut self, x: Int, ints: Ints) -> Value {
        let Ints::Plain { q, z } = ints else {
            unreachable!("biased operands need no integer values")
        };
        match x {
            Int::Q => q,
            Int::Z => z,
            Int::QmZ => self.b.ins().isub(q, z),
            Int::V(v) => v,
            Int::Zero => {
                let ty = self.b.func.dfg.value_type(q);
                if ty.is_vector() {
                    self.vconst(ty, 0)
                } else {
                    let zero = self.iconst(0);
                    if ty == types::I128 {
                        self.b.ins().sextend(types::I128, zero)
                    } else {
                        zero
                    }
                }
            }
        }
    }

    /// `float(x)` in the work type `wty` (exact for biased operands).
    fn float_of(&mut self, x: Int, ints: Ints, wty: Type) -> Value {
        match (x, ints) {
            (Int::Q, Ints::Biased { fq, k, .. }) => match k {
                Some(k) => self.b.ins().fsub(fq, k),
                None => fq,
            },
            (Int::QmZ, Ints::Biased { fq, fz, .. }) => self.b.ins().fsub(fq, fz),
            (Int::Zero, Ints::Biased { .. }) => self.lit(0.0, wty),
            _ => {
                let i = self.int_value(x, ints);
                self.int_to_float(i, wty)
            }
        }
    }

    fn lit(&mut self, x: f64, wty: Type) -> Value {
        match wty {
            types::F64 => self.b.ins().f64const(x),
            types::F32 => self.b.ins().f32const(x as f32),
            _ => self.vconst(types::F32X4, (x as f32).to_bits() as u64),
        }
    }

    /// Round-to-nearest-even of an exact integer to the work type.
    fn int_to_float(&mut self, x: Value, wty: Type) -> Value {
        if self.b.func.dfg.value_type(x) != types::I128 {
            return self.b.ins().fcvt_from_sint(wty, x);
        }
        // i128 (|x| < 2^99, f32 work): direct when it fits i64, else shift right by
        // 36 keeping a sticky bit (round to odd), convert and rescale: exact RNE.
        let lo = self.b.ins().ireduce(types::I64, x);
        let back = self.b.ins().sextend(types::I128, lo);
        let fits = self.b.ins().icmp(IntCC::Equal, back, x);
        let direct = self.b.ins().fcvt_from_sint(types::F32, lo);
        let hi = self.b.ins().sshr_imm_s(x, 36);
        let hi = self.b.ins().ireduce(types::I64, hi);
        let rest = self.b.ins().band_imm_s(lo, (1i64 << 36) - 1);
        let sticky = self.b.ins().icmp_imm_s(IntCC::NotEqual, rest, 0);
        let sticky = self.b.ins().uextend(types::I64, sticky);
        let hi = self.b.ins().bor(hi, sticky);
        let big = self.b.ins().fcvt_from_sint(types::F32, hi);
        let k = self.b.ins().f32const((1u64 << 36) as f32);
        let big = self.b.ins().fmul(big, k);
        self.b.ins().select(fits, direct, big)
    }

    /// `max`/`min` with the NaN and signed-zero rules of `dq_runtime::formula`.
    fn min_max(&mut self, a: Value, b: Value, max: bool) -> Value {
        let ty = self.b.func.dfg.value_type(a);
        let ity = ty.as_int();
        let (better, neg_of) = if max {
            (FloatCC::GreaterThan, b)
        } else {
            (FloatCC::LessThan, a)
        };
        let wins = self.b.ins().fcmp(better, a, b);
        let eq = self.b.ins().fcmp(FloatCC::Equal, a, b);
        let bits = self.b.ins().bitcast(ity, lanes(), neg_of);
        let zero = if ty.is_vector() {
            self.vconst(ity, 0)
        } else {
            self.b.ins().iconst(ity, 0)
        };
        let neg = self.b.ins().icmp(IntCC::SignedLessThan, bits, zero);
        let tie = self.b.ins().band(eq, neg);
        let pick_a = self.b.ins().bor(wins, tie);
        let r = self.sel(pick_a, a, b);
        let b_nan = self.b.ins().fcmp(FloatCC::Unordered, b, b);
        let r = self.sel(b_nan, b, r);
        let a_nan = self.b.ins().fcmp(FloatCC::Unordered, a, a);
        self.sel(a_nan, a, r)
    }

    // ---- stores ------------------------------------------------------------

    /// The byte address of output element `dof` (in elements of the kernel's
    /// output, [`Spec::out_bytes`] each).
    fn dst_addr(&mut self, dof: Value) -> Value {
        let off = self.mul_imm(dof, self.spec.out_bytes() as i64);
        self.add(self.dst, off)
    }

    fn store_scalar(&mut self, dof: Value, y: Value) {
        let addr = self.dst_addr(dof);
        match self.spec.out() {
            DType::F64 if self.an.quiet => {
                let x = self.b.ins().bitcast(types::I64, lanes(), y);
                self.b.ins().store(mem(), x, addr, 0);
            }
            DType::F64 => {
                let x = self.b.ins().bitcast(types::I64, lanes(), y);
                let q = self.b.ins().bor_imm_s(x, 0x0008_0000_0000_0000);
                let nan = self.b.ins().fcmp(FloatCC::Unordered, y, y);
                let x = self.b.ins().select(nan, q, x);
                self.b.ins().store(mem(), x, addr, 0);
            }
            DType::F32 => {
                let x = self.f32_bits(y);
                self.b.ins().store(mem(), x, addr, 0);
            }
            _ => {
                let x = self.round_16(y);
                self.b.ins().istore16(mem(), x, addr, 0);
            }
        }
    }

    /// 16 results at dst byte address `addr` (contiguous).
    fn store_vec_at(&mut self, addr: Value, ys: [Value; 4]) {
        if self.spec.out() == DType::F32 {
            for (k, y) in ys.into_iter().enumerate() {
                let x = self.f32_bits(y);
                self.b.ins().store(mem(), x, addr, 16 * k as i32);
            }
            return;
        }
        let h: Vec<Value> = ys.into_iter().map(|y| self.round_16(y)).collect();
        for k in 0..2 {
            let packed = self.b.ins().unarrow(h[2 * k], h[2 * k + 1]);
            self.b.ins().store(mem(), packed, addr, 16 * k as i32);
        }
    }

    /// f32 (scalar or F32X4) to its bits with NaNs quieted (a no-op when the
    /// analysis proved the result is never a signalling NaN).
    fn f32_bits(&mut self, y: Value) -> Value {
        let ty = self.b.func.dfg.value_type(y).as_int();
        let x = self.b.ins().bitcast(ty, lanes(), y);
        if self.an.quiet {
            return x;
        }
        let q = self.or_c(x, 0x0040_0000);
        let nan = self.b.ins().fcmp(FloatCC::Unordered, y, y);
        self.sel(nan, q, x)
    }

    /// f32 (scalar or F32X4) to f16/bf16 bits in the low half of each I32 lane.
    fn round_16(&mut self, y: Value) -> Value {
        if self.spec.dst == DType::BF16 {
            self.round_bf16(y)
        } else {
            self.round_f16(y)
        }
    }

    /// bf16: the integer RNE of `dq_runtime::convert::f32_to_bf16_bits`.
    fn round_bf16(&mut self, y: Value) -> Value {
        let ity = self.b.func.dfg.value_type(y).as_int();
        let x = self.b.ins().bitcast(ity, lanes(), y);
        let hi = self.vushr(x, 16);
        let lsb = self.and_c(hi, 1);
        let r = self.add_c(x, 0x7fff);
        let r = self.add(r, lsb);
        let r = self.vushr(r, 16);
        if self.an.plain_bf16 {
            return r;
        }
        let nanv = self.or_c(hi, 0x40);
        let nan = self.b.ins().fcmp(FloatCC::Unordered, y, y);
        self.sel(nan, nanv, r)
    }

    /// f16: exact RNE by float rescaling (subnormals and overflow included); NaN keeps
    /// its top payload bits with the quiet bit set (as F16C and `half` do).
    fn round_f16(&mut self, y: Value) -> Value {
        let fty = self.b.func.dfg.value_type(y);
        let ity = fty.as_int();
        let fconst = |t: &mut Self, bits: u32| {
            if fty.is_vector() {
                t.vconst(fty, bits as u64)
            } else {
                t.b.ins().f32const(f32::from_bits(bits))
            }
        };
        let w = self.b.ins().bitcast(ity, lanes(), y);
        let shl1 = self.add(w, w);
        let sign = self.and_c(w, 0x8000_0000_u32 as i64);
        let sign = self.vushr(sign, 16);
        let bias = self.and_c(shl1, 0xff00_0000_u32 as i64);
        let min_bias = self.c32(ity, 0x7100_0000);
        let bias = self.b.ins().umax(bias, min_bias);
        let a = self.b.ins().fabs(y);
        let up = fconst(self, 0x7780_0000); // 2^112
        let down = fconst(self, 0x0880_0000); // 2^-110
        let base = self.b.ins().fmul(a, up);
        let base = self.b.ins().fmul(base, down);
        let bias = self.vushr(bias, 1);
        let bias = self.add_c(bias, 0x0780_0000);
        let bias = self.b.ins().bitcast(fty, lanes(), bias);
        let base = self.b.ins().fadd(bias, base);
        let bits = self.b.ins().bitcast(ity, lanes(), base);
        let exp = self.vushr(bits, 13);
        let exp = self.and_c(exp, 0x7c00);
        let man = self.and_c(bits, 0x0fff);
        let nonsign = self.add(exp, man);
        let payload = self.and_c(w, 0x007f_ffff);
        let payload = self.vushr(payload, 13);
        let nanv = self.or_c(payload, 0x7e00);
        let nan_lim = self.c32(ity, 0xff00_0000_u32 as i64);
        let nan = self.b.ins().icmp(IntCC::UnsignedGreaterThan, shl1, nan_lim);
        let r = self.sel(nan, nanv, nonsign);
        self.b.ins().bor(r, sign)
    }
}
