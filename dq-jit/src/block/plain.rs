//! F32, F16 and BF16 tensors (one element a "block"): 16 elements a step in four
//! F32X4 (F16 where the host has F16C: 32 a step, one call of
//! [`host_f16::widen`]), then one at a time for the tail.
//!
//! ```text
//! fn(src, n, out)
//!   vhead(s, o, r): r >= step ? vbody : thead(s, o, r)
//!   vbody:          step elements; vhead(s + step * size, o + 4 * step, r - step)
//!   thead(s, o, r): r == 0 ? exit : tbody
//!   tbody:          one element; thead(s + size, o + 4, r - 1)
//! ```

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{Function, InstBuilder, Signature, UserFuncName, Value, types};
use cranelift_codegen::isa::TargetFrontendConfig;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};

use super::lower::Emit;
use super::{lanes, mem};
use crate::error::JitError;
use crate::host_f16;

/// The plain float types.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Plain {
    F32,
    F16,
    Bf16,
}

/// The IR of plain type `name` (`F32`, `F16` or `BF16`, `size` bytes an element).
pub(super) fn plain(
    name: &'static str,
    size: usize,
    sig: Signature,
    cfg: TargetFrontendConfig,
    pshufb: bool,
    host_f16: bool,
) -> Result<Function, JitError> {
    let t = match name {
        "F32" => Plain::F32,
        "F16" => Plain::F16,
        "BF16" => Plain::Bf16,
        _ => {
            return Err(JitError::UnsupportedBlock {
                name: name.to_owned(),
                reason: "neither declared nor a plain float type",
            });
        }
    };
    let mut func = Function::with_name_signature(UserFuncName::default(), sig);
    let mut fctx = FunctionBuilderContext::new();
    let b = FunctionBuilder::new(&mut func, &mut fctx);
    let (mut e, p) = Emit::start(b, pshufb);
    let (src, n, out) = (p[0], p[1], p[2]);
    let size = size as i64;
    let block = |e: &mut Emit<'_>| {
        let blk = e.b.create_block();
        let s = e.b.append_block_param(blk, types::I64);
        let o = e.b.append_block_param(blk, types::I64);
        let r = e.b.append_block_param(blk, types::I64);
        (blk, s, o, r)
    };
    // Elements a step: 16 in F32X4 lanes, 32 a call of the host widening.
    let host = t == Plain::F16 && host_f16;
    let step: i64 = if host { host_f16::WIDEN } else { 16 };
    let (vhead, s, o, r) = block(&mut e);
    let vbody = e.b.create_block();
    let (thead, ts, to, tr) = block(&mut e);
    let tbody = e.b.create_block();
    let exit = e.b.create_block();
    e.b.ins().jump(vhead, &[src.into(), out.into(), n.into()]);

    e.b.switch_to_block(vhead);
    let more =
        e.b.ins()
            .icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, r, step);
    e.b.ins()
        .brif(more, vbody, &[], thead, &[s.into(), o.into(), r.into()]);
    e.b.switch_to_block(vbody);
    // In bounds: elements `0..step` at `s` and `o` are among the `r >= step` left.
    if host {
        host_f16::widen(&mut e.b, s, o);
    } else {
        for j in 0..4 {
            let y = e.four(t, s, (4 * j * size) as i32);
            e.b.ins().store(mem(), y, o, 16 * j as i32);
        }
    }
    let s1 = e.b.ins().iadd_imm_s(s, step * size);
    let o1 = e.b.ins().iadd_imm_s(o, 4 * step);
    let r1 = e.b.ins().iadd_imm_s(r, -step);
    e.b.ins().jump(vhead, &[s1.into(), o1.into(), r1.into()]);

    e.b.switch_to_block(thead);
    e.b.ins().brif(tr, tbody, &[], exit, &[]);
    e.b.switch_to_block(tbody);
    // In bounds: element 0 at `ts` and `to` is among the `tr > 0` left.
    let y = e.one(t, ts);
    e.b.ins().store(mem(), y, to, 0);
    let s1 = e.b.ins().iadd_imm_s(ts, size);
    let o1 = e.b.ins().iadd_imm_s(to, 4);
    let r1 = e.b.ins().iadd_imm_s(tr, -1);
    e.b.ins().jump(thead, &[s1.into(), o1.into(), r1.into()]);

    e.b.switch_to_block(exit);
    e.b.ins().return_(&[]);
    e.b.seal_all_blocks();
    e.b.finalize(cfg);
    Ok(func)
}

impl Emit<'_> {
    /// Four elements at `s + at` as F32X4.
    fn four(&mut self, t: Plain, s: Value, at: i32) -> Value {
        match t {
            Plain::F32 => self.b.ins().load(types::F32X4, mem(), s, at),
            Plain::F16 => {
                let h = self.b.ins().uload16x4(mem(), s, at);
                self.f16_to_f32(h)
            }
            Plain::Bf16 => {
                let h = self.b.ins().uload16x4(mem(), s, at);
                let x = self.vshl(h, 16);
                self.b.ins().bitcast(types::F32X4, lanes(), x)
            }
        }
    }

    /// The element at `s` as F32.
    fn one(&mut self, t: Plain, s: Value) -> Value {
        match t {
            Plain::F32 => self.b.ins().load(types::F32, mem(), s, 0),
            Plain::F16 => {
                let h = self.b.ins().uload16(types::I32, mem(), s, 0);
                self.f16_to_f32(h)
            }
            Plain::Bf16 => {
                let h = self.b.ins().uload16(types::I32, mem(), s, 0);
                let x = self.b.ins().ishl_imm_s(h, 16);
                self.b.ins().bitcast(types::F32, lanes(), x)
            }
        }
    }
}
