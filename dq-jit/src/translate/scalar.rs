//! One element at a time: scalar loops (tails, and code without a vector path),
//! the peel of an odd first nibble, an element computed from its own loads or
//! copied from its segment's table, and the scalar loads of src, zero points and
//! scales (I64, or I128 where the analysis asks; scales in the work float).

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{Block, InstBuilder, Type, Value, types};
use dq_runtime::DType;

use super::eval::Ints;
use super::{Params, Run, Translator, lanes, mem};
use crate::lane_math::LaneMath;
use crate::spec::IntWidth;

impl<'a, 'f> Translator<'a, 'f> {
    /// For a 4-bit src at an odd nibble offset, computes element `j0` alone (when
    /// `j0 < j1`) and returns the next index.
    pub(super) fn emit_peel(&mut self, j0: Value, j1: Value, run: Run) -> Value {
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
    pub(super) fn emit_scalar_loop(&mut self, j0: Value, j1: Value, run: Run, p: Params) {
        let head = self.b.create_block();
        self.b.append_block_param(head, types::I64);
        self.b.ins().jump(head, &[j0.into()]);
        self.emit_scalar_loop_at(head, j1, run, p);
    }

    /// Scalar loop from `head`'s param (jumped to, not yet switched to) to `j1`.
    pub(super) fn emit_scalar_loop_at(&mut self, head: Block, j1: Value, run: Run, p: Params) {
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
    pub(super) fn emit_scalar_elem(&mut self, j: Value, run: Run, p: Params) {
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
        let q = match self.spec.src.decode_table() {
            Some(t) => {
                let code = self.load_code(self.spec.src, self.src, so);
                self.decode(t, code)
            }
            None => self.load_int(self.spec.src, self.src, so),
        };
        let mut y = self.eval(Ints::Plain { q, z }, s, false);
        if self.spec.src.is_float_src() {
            // A NaN src gives its own NaN (see dq_runtime::minifloat).
            let nan = self.b.ins().fcmp(FloatCC::Unordered, q, q);
            y = self.b.ins().select(nan, q, y);
        }
        self.store_scalar(dof, y);
    }

    /// Src and dst element offsets of element `j` of the current run.
    fn elem_offsets(&mut self, run: Run, j: Value) -> (Value, Value) {
        let inner = self.inner();
        let so = self.mul_imm(j, inner.src_stride as i64);
        let dof = self.mul_imm(j, inner.dst_stride as i64);
        (self.add(run.src, so), self.add(run.dst, dof))
    }

    /// The scalar integer type: I64, or I128 where the analysis needs it.
    fn int_ty(&self) -> Type {
        match self.an.int {
            IntWidth::I64 => types::I64,
            IntWidth::I128 => types::I128,
        }
    }

    /// The scalar work float: F64 for f64 dst, else F32.
    pub(super) fn work_ty(&self) -> Type {
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

    /// The code (0..=255, I64) of element `o` of a float src buffer (4-bit: its nibble).
    fn load_code(&mut self, t: DType, buf: Value, o: Value) -> Value {
        if t.is_4bit() {
            return self.load_nibble(buf, o);
        }
        let addr = self.add(buf, o);
        self.b.ins().uload8(types::I64, mem(), addr, 0)
    }

    /// Entry `code` (I64, 0..=255) of a 256-entry f32 decode table, as F32. The
    /// table is a `static` of dq-runtime: its address is fixed for the process.
    fn decode(&mut self, table: &'static [f32; 256], code: Value) -> Value {
        let base = self.iconst(table.as_ptr() as i64);
        let off = self.b.ins().ishl_imm_s(code, 2);
        let addr = self.add(base, off);
        self.b.ins().load(types::F32, mem(), addr, 0)
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

    /// Zero point `idx` as the scalar int type (0 without zero points).
    pub(super) fn load_zp(&mut self, idx: Value) -> Value {
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

    /// Scale `idx` as the work float (exact widening; e8m0 decoded by table).
    pub(super) fn load_scale(&mut self, idx: Value) -> Value {
        if let (DType::E8M0, Some(t)) = (self.spec.scales, DType::E8M0.decode_table()) {
            let code = self.load_code(DType::E8M0, self.scales, idx);
            return self.decode(t, code);
        }
        let w = self.spec.scale_type().bits() / 8;
        let off = self.mul_imm(idx, w as i64);
        let addr = self.add(self.scales, off);
        match self.spec.scale_type() {
            DType::F32 => self.b.ins().load(types::F32, mem(), addr, 0),
            DType::F64 => self.b.ins().load(types::F64, mem(), addr, 0),
            DType::BF16 => {
                let h = self.b.ins().uload16(types::I32, mem(), addr, 0);
                let x = self.b.ins().ishl_imm_s(h, 16);
                self.b.ins().bitcast(types::F32, lanes(), x)
            }
            _ => {
                let h = self.b.ins().uload16(types::I32, mem(), addr, 0);
                self.widen_f16(h, types::I32, true)
            }
        }
    }
}
