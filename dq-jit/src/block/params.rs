//! The parameter program as scalar code, once per group of a block: integer nodes
//! in I32, float nodes in F32, exactly as `dq_runtime::block::params::eval` does.
//! Nodes that do not depend on the group (the block's f16 `d`, `dmin`, an e8m0
//! exponent, and what is computed from them alone) are emitted once per block.

use std::collections::HashMap;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, Value, types};
use dq_runtime::block::{BlockDecl, ParamNode};

use super::lower::Emit;
use super::mem;

/// The values of one block's parameter nodes emitted so far, by (node, group);
/// group-independent nodes are kept under group `None`.
pub(super) struct Params<'d> {
    d: &'d BlockDecl,
    values: HashMap<(usize, Option<usize>), Value>,
}

impl<'d> Params<'d> {
    /// No node emitted yet.
    pub(super) fn new(d: &'d BlockDecl) -> Self {
        Params {
            d,
            values: HashMap::new(),
        }
    }

    /// True when node `i` reads the group.
    fn per_group(&self, i: usize) -> bool {
        match self.d.params[i] {
            ParamNode::F16Of(a) | ParamNode::Quiet(a) => self.per_group(usize::from(a)),
            ParamNode::Bits { .. } => true,
            ParamNode::F16(_)
            | ParamNode::E8m0Half(_)
            | ParamNode::F32(_)
            | ParamNode::Const(_) => false,
            ParamNode::Byte { .. }
            | ParamNode::K4ScaleMin { .. }
            | ParamNode::K3Scale(_)
            | ParamNode::GroupBits { .. }
            | ParamNode::Ue4m3Half(_) => true,
            ParamNode::OrShl(a, b, _) | ParamNode::Add(a, b) => {
                self.per_group(usize::from(a)) || self.per_group(usize::from(b))
            }
            ParamNode::AddInt(a, _) | ParamNode::Float(a) => self.per_group(usize::from(a)),
            ParamNode::Mul(a, b) => {
                self.per_group(usize::from(a)) || self.per_group(usize::from(b))
            }
        }
    }

    /// True when float node `i` may be a NaN (not the float of an integer).
    fn may_nan(&self, i: usize) -> bool {
        !matches!(
            self.d.params[i],
            ParamNode::Float(_) | ParamNode::Ue4m3Half(_) | ParamNode::Const(_)
        )
    }

    /// Node `i` of group `g` of the block at `blk` (emitting it and its operands
    /// where not emitted yet).
    pub(super) fn get(&mut self, e: &mut Emit<'_>, blk: Value, i: usize, g: usize) -> Value {
        let key = (i, self.per_group(i).then_some(g));
        if let Some(&v) = self.values.get(&key) {
            return v;
        }
        // `BlockDecl::check`: every byte read below lies in the block (F16 `at + 2`,
        // F32 `at + 4`, Byte `at + stride * (groups - 1)`, GroupBits' last byte,
        // Ue4m3Half `at + groups`, the 12 packed-scale bytes).
        let byte =
            |e: &mut Emit<'_>, at: usize| e.b.ins().uload8(types::I32, mem(), blk, at as i32);
        let v = match self.d.params[i] {
            ParamNode::F16(at) => {
                let h = e.b.ins().uload16(types::I32, mem(), blk, at as i32);
                e.f16_to_f32(h)
            }
            ParamNode::E8m0Half(at) => {
                let x = byte(e, at);
                e.e8m0_half(x)
            }
            ParamNode::F32(at) => e.b.ins().load(types::F32, mem(), blk, at as i32),
            ParamNode::Quiet(a) => {
                let x = self.get(e, blk, usize::from(a), g);
                let r = x;
                e.first_nan(x, r)
            }
            ParamNode::F16Of(a) => {
                let x = self.get(e, blk, usize::from(a), g);
                let x = e.b.ins().band_imm_s(x, 0xFFFF);
                e.f16_to_f32(x)
            }
            ParamNode::Bits {
                at,
                per,
                outer,
                inner,
                bits,
            } => {
                let (per, bits) = (usize::from(per), usize::from(bits));
                let bit = usize::from(outer) * (g / per) + usize::from(inner) * (g % per);
                let (first, low) = (at + bit / 8, bit % 8);
                let mut x = byte(e, first);
                if low + bits > 8 {
                    // `BlockDecl::check`: these bits, so this byte, lie in the block.
                    let next = byte(e, first + 1);
                    let next = e.b.ins().ishl_imm_s(next, 8);
                    x = e.b.ins().bor(x, next);
                }
                let x = e.b.ins().ushr_imm_s(x, low as i64);
                e.b.ins().band_imm_s(x, (1i64 << bits) - 1)
            }
            ParamNode::Ue4m3Half(at) => {
                let x = byte(e, at + g);
                e.ue4m3_half(x)
            }
            ParamNode::GroupBits { at, shift, bits } => {
                let bit = usize::from(shift) * g;
                let x = byte(e, at + bit / 8);
                let x = e.b.ins().ushr_imm_s(x, (bit % 8) as i64);
                e.b.ins().band_imm_s(x, (1i64 << bits) - 1)
            }
            ParamNode::OrShl(a, b, k) => {
                let x = self.get(e, blk, usize::from(a), g);
                let z = self.get(e, blk, usize::from(b), g);
                let z = e.b.ins().ishl_imm_s(z, i64::from(k));
                e.b.ins().bor(x, z)
            }
            ParamNode::Byte {
                at,
                stride,
                shift,
                bits,
                signed,
            } => {
                let x = byte(e, at + stride * g);
                // A byte's bits: no shift by 0, no mask for the top bits.
                let x = if shift == 0 {
                    x
                } else {
                    e.b.ins().ushr_imm_s(x, i64::from(shift))
                };
                let x = if shift + bits >= 8 {
                    x
                } else {
                    e.b.ins().band_imm_s(x, (1i64 << bits) - 1)
                };
                if signed {
                    let up = e.b.ins().ishl_imm_s(x, 32 - i64::from(bits));
                    e.b.ins().sshr_imm_s(up, 32 - i64::from(bits))
                } else {
                    x
                }
            }
            ParamNode::K4ScaleMin { at, min } => {
                // gguf-py's `get_scale_min` for group `j = g`.
                let j = g;
                let lo6 = |e: &mut Emit<'_>, k: usize| {
                    let x = byte(e, at + k);
                    e.b.ins().band_imm_s(x, 0x3F)
                };
                match (j < 4, min) {
                    (true, false) => lo6(e, j),
                    (true, true) => lo6(e, j + 4),
                    (false, _) => {
                        let a = byte(e, at + j + 4);
                        let low = if min {
                            e.b.ins().ushr_imm_s(a, 4)
                        } else {
                            e.b.ins().band_imm_s(a, 0x0F)
                        };
                        let hb = byte(e, at + if min { j } else { j - 4 });
                        let high = e.b.ins().ushr_imm_s(hb, 2);
                        let high = e.b.ins().band_imm_s(high, 0x30);
                        e.b.ins().bor(low, high)
                    }
                }
            }
            ParamNode::K3Scale(at) => {
                let k = g;
                let l = byte(e, at + k % 8);
                let l = e.b.ins().ushr_imm_s(l, 4 * (k / 8) as i64);
                let l = e.b.ins().band_imm_s(l, 0x0F);
                let h = byte(e, at + 8 + k % 4);
                let h = e.b.ins().ushr_imm_s(h, 2 * (k / 4) as i64);
                let h = e.b.ins().band_imm_s(h, 0x03);
                let h = e.b.ins().ishl_imm_s(h, 4);
                e.b.ins().bor(l, h)
            }
            ParamNode::AddInt(a, k) => {
                let x = self.get(e, blk, usize::from(a), g);
                e.b.ins().iadd_imm_s(x, i64::from(k))
            }
            ParamNode::Float(a) => {
                let x = self.get(e, blk, usize::from(a), g);
                e.b.ins().fcvt_from_sint(types::F32, x)
            }
            ParamNode::Const(bits) => e.b.ins().f32const(f32::from_bits(bits)),
            ParamNode::Add(a, b) => {
                let x = self.get(e, blk, usize::from(a), g);
                let z = self.get(e, blk, usize::from(b), g);
                let r = e.b.ins().fadd(x, z);
                if self.may_nan(usize::from(a)) && self.may_nan(usize::from(b)) {
                    e.first_nan(x, r)
                } else {
                    r
                }
            }
            ParamNode::Mul(a, b) => {
                let x = self.get(e, blk, usize::from(a), g);
                let z = self.get(e, blk, usize::from(b), g);
                let r = e.b.ins().fmul(x, z);
                if self.may_nan(usize::from(a)) && self.may_nan(usize::from(b)) {
                    e.first_nan(x, r)
                } else {
                    r
                }
            }
        };
        self.values.insert(key, v);
        v
    }
}

impl Emit<'_> {
    /// gguf-py's NVFP4 `ue4m3_to_fp32` of the byte `x` (I32), as
    /// `dq_runtime::block::ue4m3_half` builds it: exponent 0 gives `man * 2^-10`
    /// (converted, then scaled by an exact power of two), others the bits
    /// `(exp + 119) << 23 | man << 20`; the bytes 0 and 0x7F give 0.
    fn ue4m3_half(&mut self, x: Value) -> Value {
        let exp = self.b.ins().ushr_imm_s(x, 3);
        let exp = self.b.ins().band_imm_s(exp, 0xF);
        let man = self.b.ins().band_imm_s(x, 7);
        let hi = self.b.ins().iadd_imm_s(exp, 119);
        let hi = self.b.ins().ishl_imm_s(hi, 23);
        let lo = self.b.ins().ishl_imm_s(man, 20);
        let normal = self.b.ins().bor(hi, lo);
        let normal = self.b.ins().bitcast(types::F32, super::lanes(), normal);
        let sub = self.b.ins().fcvt_from_sint(types::F32, man);
        let k = self.b.ins().f32const(1.0 / 1024.0);
        let sub = self.b.ins().fmul(sub, k);
        let is_sub = self.b.ins().icmp_imm_s(IntCC::Equal, exp, 0);
        let v = self.b.ins().select(is_sub, sub, normal);
        let zero = self.b.ins().f32const(0.0);
        let z0 = self.b.ins().icmp_imm_s(IntCC::Equal, x, 0);
        let z7 = self.b.ins().icmp_imm_s(IntCC::Equal, x, 0x7F);
        let z = self.b.ins().bor(z0, z7);
        self.b.ins().select(z, zero, v)
    }

    /// gguf-py's `e8m0_to_fp32_half` of the byte `e` (I32): `2^(e - 128)` from bits.
    fn e8m0_half(&mut self, e: Value) -> Value {
        let small = self.b.ins().iconst(types::I32, 0x0020_0000);
        let low = self.b.ins().band_imm_s(e, 1);
        let small = self.b.ins().ishl(small, low);
        let big = self.b.ins().iadd_imm_s(e, -1);
        let big = self.b.ins().ishl_imm_s(big, 23);
        let lt2 = self.b.ins().icmp_imm_s(IntCC::UnsignedLessThan, e, 2);
        let bits = self.b.ins().select(lt2, small, big);
        self.b.ins().bitcast(types::F32, super::lanes(), bits)
    }
}
