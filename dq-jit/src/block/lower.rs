//! A declared block type as one loop over whole blocks, each block's code fully
//! unrolled: the parameter program once per group ([`params`](super::params)),
//! then for every run of inner elements, 8 or 16 lanes at a time, the integers
//! assembled in byte lanes ([`fields`](super::fields)), widened to I32X4, converted
//! and put through the formula in F32X4, and stored.
//!
//! ```text
//! fn(src, blocks, out)
//!   entry:        jump head(src, out, blocks)
//!   head(s, o, n): n == 0 ? exit : body
//!   body:         block at s -> out at o; jump head(s + block_bytes, o + 4 * block_elems, n - 1)
//! ```

use crate::hoist::Hoisted;
use std::collections::HashMap;

use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::{
    Block, Function, InstBuilder, Signature, Type, UserFuncName, Value, types,
};
use cranelift_codegen::isa::TargetFrontendConfig;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use dq_runtime::block::{BlockDecl, BlockNode, MAX_RUN};

use super::{lanes, mem};
use crate::error::JitError;

/// Emits one block function: the builder, and vector constants hoisted to the
/// entry block.
pub(super) struct Emit<'f> {
    pub(super) b: FunctionBuilder<'f>,
    /// The host has x86's `pshufb` (zero for an index with its top bit set).
    pshufb: bool,
    entry: Block,
    consts: Hoisted,
}

impl<'f> Emit<'f> {
    /// Starts `b`'s entry block; returns the emitter and the function's parameters.
    pub(super) fn start(mut b: FunctionBuilder<'f>, pshufb: bool) -> (Self, Vec<Value>) {
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let p = b.block_params(entry).to_vec();
        let e = Emit {
            b,
            pshufb,
            entry,
            consts: Hoisted::default(),
        };
        (e, p)
    }

    /// A 128-bit vector constant of type `ty` from its 16 little-endian bytes,
    /// materialised once at the top of the entry block.
    pub(super) fn vconst_bytes(&mut self, ty: Type, bytes: Vec<u8>) -> Value {
        let bytes: [u8; 16] = bytes.try_into().expect("a 128-bit constant is 16 bytes");
        self.consts.vconst(self.b.func, self.entry, ty, bytes)
    }

    /// Byte `idx[i]` of `x` in byte `i` (0 for an index of 0x80), by a constant
    /// byte shuffle.
    pub(super) fn shuffle_bytes(&mut self, x: Value, idx: Vec<u8>) -> Value {
        let idx = self.vconst_bytes(types::I8X16, idx);
        self.lookup(x, idx)
    }

    /// Byte `idx[i]` of `table` in byte `i` (0 for an index of 0x80 or more): x86's
    /// `pshufb` where the host has it, else Cranelift's `swizzle` (the same for
    /// these indices).
    pub(super) fn lookup(&mut self, table: Value, idx: Value) -> Value {
        if self.pshufb {
            self.b.ins().x86_pshufb(table, idx)
        } else {
            self.b.ins().swizzle(table, idx)
        }
    }

    /// True when the host's float additions and products of two registers return
    /// the first operand's NaN (quieted) when both are NaN, with the operands in
    /// the IR's order: x86-64 (its lowering swaps `fadd`/`fmul` operands only to
    /// fold a load of the first one, and no formula operand is a load). Elsewhere
    /// the rule is pinned by [`first_nan`](Self::first_nan).
    fn keeps_order(&self) -> bool {
        self.pshufb
    }

    /// A vector constant of type `ty` with every lane `bits`.
    pub(super) fn splat_c(&mut self, ty: Type, bits: u64) -> Value {
        let lane = ty.lane_bits() as usize / 8;
        let bytes = (0..ty.lane_count())
            .flat_map(|_| bits.to_le_bytes().into_iter().take(lane))
            .collect();
        self.vconst_bytes(ty, bytes)
    }

    /// `x >> n` (logical, every lane).
    pub(super) fn vushr(&mut self, x: Value, n: i64) -> Value {
        if n == 0 {
            return x;
        }
        let n = self.b.ins().iconst(types::I32, n);
        self.b.ins().ushr(x, n)
    }

    /// `x >> n` (arithmetic, every lane).
    pub(super) fn vsshr(&mut self, x: Value, n: i64) -> Value {
        if n == 0 {
            return x;
        }
        let n = self.b.ins().iconst(types::I32, n);
        self.b.ins().sshr(x, n)
    }

    /// `x << n` (every lane).
    pub(super) fn vshl(&mut self, x: Value, n: i64) -> Value {
        if n == 0 {
            return x;
        }
        let n = self.b.ins().iconst(types::I32, n);
        self.b.ins().ishl(x, n)
    }

    /// `x op z` for a float `op` where both operands may be NaN: a NaN `x` is the
    /// result (quieted) even when `z` is NaN too, as x86-64 returns it and the
    /// generated driver pins it (`first_nan`); otherwise the plain result. Scalar
    /// F32 or F32X4.
    pub(super) fn first_nan(&mut self, x: Value, r: Value) -> Value {
        let ty = self.b.func.dfg.value_type(x);
        let nan = self.b.ins().fcmp(FloatCC::Unordered, x, x);
        if ty.is_vector() {
            let xi = self.b.ins().bitcast(types::I32X4, lanes(), x);
            let quiet = self.splat_c(types::I32X4, 0x0040_0000);
            let q = self.b.ins().bor(xi, quiet);
            let q = self.b.ins().bitcast(types::F32X4, lanes(), q);
            let m = self.b.ins().bitcast(types::F32X4, lanes(), nan);
            self.b.ins().bitselect(m, q, r)
        } else {
            let xi = self.b.ins().bitcast(types::I32, lanes(), x);
            let q = self.b.ins().bor_imm_s(xi, 0x0040_0000);
            let q = self.b.ins().bitcast(types::F32, lanes(), q);
            self.b.ins().select(nan, q, r)
        }
    }
}

/// True when formula node `i` may be a NaN (anything but the integer or its float).
fn may_nan(nodes: &[BlockNode], i: u16) -> bool {
    !matches!(nodes[i as usize], BlockNode::Q | BlockNode::Float(_))
}

/// Why `d` cannot be lowered, if it cannot: the vector code takes runs of a
/// multiple of 8 elements and an integer that fits a signed byte.
fn check(d: &BlockDecl) -> Result<(), &'static str> {
    d.check()?;
    d.then.iter().try_for_each(|p| check_part(p))?;
    check_part(d)
}

/// [`check`] for one part of a declaration (its own elements).
fn check_part(d: &BlockDecl) -> Result<(), &'static str> {
    let inner = d.inner();
    // Chunks of 8 or 16 elements share a group: runs of a multiple of 8, or one
    // group (positions are per element; TQ1_0's last section has runs of 4).
    let chunks = inner.is_multiple_of(8) || (d.groups == 1 && d.own_elems().is_multiple_of(8));
    if !chunks || inner > MAX_RUN || (d.grid.is_some() && inner != 8) {
        return Err("inner runs must be a multiple of 8 elements (or one group), at most 32");
    }
    super::grid::check(d)?;
    if d.fields
        .iter()
        .any(|f| f.table.is_some_and(|t| t.values.len() > 16))
    {
        return Err("a field's table has more than 16 entries (one byte shuffle)");
    }
    let (lo, hi) = super::fields::range(d);
    if lo < i64::from(i8::MIN) || hi > i64::from(i8::MAX) {
        return Err("the element's integer does not fit a signed byte");
    }
    Ok(())
}

/// The IR of declared type `d`.
pub(super) fn declared(
    d: &'static BlockDecl,
    sig: Signature,
    cfg: TargetFrontendConfig,
    pshufb: bool,
) -> Result<Function, JitError> {
    check(d).map_err(|reason| JitError::UnsupportedBlock {
        name: d.name.to_owned(),
        reason,
    })?;
    let mut func = Function::with_name_signature(UserFuncName::default(), sig);
    let mut fctx = FunctionBuilderContext::new();
    let b = FunctionBuilder::new(&mut func, &mut fctx);
    let (mut e, p) = Emit::start(b, pshufb);
    let (src, n, out) = (p[0], p[1], p[2]);
    let head = e.b.create_block();
    let s = e.b.append_block_param(head, types::I64);
    let o = e.b.append_block_param(head, types::I64);
    let left = e.b.append_block_param(head, types::I64);
    let body = e.b.create_block();
    let exit = e.b.create_block();
    e.b.ins().jump(head, &[src.into(), out.into(), n.into()]);
    e.b.switch_to_block(head);
    e.b.ins().brif(left, body, &[], exit, &[]);
    e.b.switch_to_block(body);
    let mut at = 0;
    for part in std::iter::once(d).chain(d.then.iter().copied()) {
        e.block(part, s, o, at);
        at += part.own_elems();
    }
    let s1 = e.b.ins().iadd_imm_s(s, d.block_bytes as i64);
    let o1 = e.b.ins().iadd_imm_s(o, 4 * d.block_elems as i64);
    let l1 = e.b.ins().iadd_imm_s(left, -1);
    e.b.ins().jump(head, &[s1.into(), o1.into(), l1.into()]);
    e.b.switch_to_block(exit);
    e.b.ins().return_(&[]);
    e.b.seal_all_blocks();
    e.b.finalize(cfg);
    Ok(func)
}

/// The outer digits of run `r` (innermost excluded), dotted with `coef`.
pub(super) fn dot(digits: &[usize], coef: impl Fn(usize) -> usize, r: usize) -> usize {
    let n = digits.len();
    let mut rest = r;
    let mut sum = 0;
    for k in (0..n - 1).rev() {
        sum += (rest % digits[k]) * coef(k);
        rest /= digits[k];
    }
    sum
}

impl Emit<'_> {
    /// One block's part `d` at address `blk` into the f32 at address `out` from its
    /// element `first` on: chunks of 16 consecutive elements of one group (8 where a
    /// group's run is shorter).
    fn block(&mut self, d: &BlockDecl, blk: Value, out: Value, first: usize) {
        let inner = d.inner();
        let group = |e: usize| dot(d.digits, |k| d.group[k], e / inner);
        let mut params = super::params::Params::new(d);
        let mut splats: HashMap<usize, Vec<Value>> = HashMap::new();
        let mut e0 = 0;
        let own = d.own_elems();
        while e0 < own {
            let g = group(e0);
            // `check`: runs are multiples of 8 (or one group), so 8 elements share a
            // group.
            let width = if e0 + 16 <= own && group(e0 + 15) == g && group(e0 + 8) == g {
                16
            } else {
                8
            };
            let p = match splats.get(&g) {
                Some(p) => p.clone(),
                None => {
                    let p: Vec<Value> = (0..d.outputs.len())
                        .map(|k| {
                            let x = params.get(self, blk, usize::from(d.outputs[k]), g);
                            self.b.ins().splat(types::F32X4, x)
                        })
                        .collect();
                    splats.insert(g, p.clone());
                    p
                }
            };
            let qb = self.assemble(d, blk, e0, width);
            for j in 0..width / 4 {
                let fq = self.spread(d, qb, j);
                let y = self.formula(d, fq, &p);
                let at = 4 * (first + e0 + 4 * j);
                // In bounds: elements `first + e0 + 4j .. + 4 <= block_elems` of this
                // block's output (`BlockDecl::check`: the parts add up to it).
                self.b.ins().store(mem(), y, out, at as i32);
            }
            e0 += width;
        }
    }

    /// The formula over four elements' integers, given as their exact floats `fq`
    /// (F32X4), with the group's parameters `p` (F32X4 splats), node by node in the
    /// declaration's order (`BlockDecl::check`: `Q` is only an operand of `Float`).
    fn formula(&mut self, d: &BlockDecl, fq: Value, p: &[Value]) -> Value {
        let nodes = d.formula.nodes;
        let mut v: Vec<Value> = Vec::with_capacity(nodes.len());
        for node in nodes {
            let y = match *node {
                BlockNode::Q | BlockNode::Float(_) => fq,
                BlockNode::Param(k) => p[usize::from(k)],
                BlockNode::Mul(a, b) => {
                    let (x, z) = (v[usize::from(a)], v[usize::from(b)]);
                    let r = self.b.ins().fmul(x, z);
                    if may_nan(nodes, a) && may_nan(nodes, b) && !self.keeps_order() {
                        self.first_nan(x, r)
                    } else {
                        r
                    }
                }
                BlockNode::Add(a, b) => {
                    let (x, z) = (v[usize::from(a)], v[usize::from(b)]);
                    let r = self.b.ins().fadd(x, z);
                    if may_nan(nodes, a) && may_nan(nodes, b) && !self.keeps_order() {
                        self.first_nan(x, r)
                    } else {
                        r
                    }
                }
                // A subtraction is not commuted: the hardware's first-NaN rule
                // holds as it does in the generated driver (a plain `-`).
                BlockNode::Sub(a, b) => self.b.ins().fsub(v[usize::from(a)], v[usize::from(b)]),
                BlockNode::FlipSign(a, b) => {
                    let x = self
                        .b
                        .ins()
                        .bitcast(types::I32X4, lanes(), v[usize::from(a)]);
                    let z = self
                        .b
                        .ins()
                        .bitcast(types::I32X4, lanes(), v[usize::from(b)]);
                    let sign = self.splat_c(types::I32X4, 0x8000_0000);
                    let z = self.b.ins().band(z, sign);
                    let y = self.b.ins().bxor(x, z);
                    self.b.ins().bitcast(types::F32X4, lanes(), y)
                }
            };
            v.push(y);
        }
        *v.last().expect("a checked formula has nodes")
    }
}
