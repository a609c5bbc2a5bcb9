//! 8-bit float src over long segments of one scale: the segment's 256 possible
//! results are computed once (by the vector code, 16 codes a step) into a
//! 256-entry table of dst bits, then every element is two loads and a store.
//! Cheaper than decoding every code in 128-bit lanes once a segment is a few
//! hundred elements long.

use cranelift_codegen::cursor::{Cursor, FuncCursor};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, StackSlotData, StackSlotKind, Value, types};
use dq_runtime::Lowering;

use super::float_src::Codes;
use super::vector::Scales;
use super::{Lut, Translator, mem};

/// Shortest segment (elements) worth a 256-entry table: building it costs about
/// 256 elements of vector code.
pub(super) const BYTE_TABLE_MIN: usize = 1024;

/// True when `l` has an 8-bit float src, a contiguous inner loop and
/// constant-scale segments that can be [`BYTE_TABLE_MIN`] long: where the
/// translator looks codes up in 256-entry tables (given vector code and byte
/// shuffles).
pub(crate) fn long_f8_segments(l: &Lowering) -> bool {
    let Some(inner) = l.loops.last() else {
        return false;
    };
    l.src.is_float_src()
        && l.src.bits() == 8
        && inner.src_stride == 1
        && inner.dst_stride == 1
        && longest_segment(l) >= BYTE_TABLE_MIN
}

/// The longest run of the inner loop over which scale and zero point stay the
/// same (0 for a plan without loops).
pub(crate) fn longest_segment(l: &Lowering) -> usize {
    match l.loops.last() {
        Some(inner) if inner.is_constant() => inner.len,
        Some(inner) => inner.group.min(inner.len),
        None => 0,
    }
}

impl<'a, 'f> Translator<'a, 'f> {
    /// True when constant-scale segments of this spec look their codes up in a
    /// 256-entry table: 8-bit float src, vector code with byte shuffles, a
    /// contiguous inner loop, and segments that can be [`BYTE_TABLE_MIN`] long.
    pub(super) fn byte_table_pays(&self) -> bool {
        long_f8_segments(&self.spec.lowering) && self.an.vector && self.lut == Lut::Pshufb
    }

    /// The 256-entry table of scale `sv` (an F32X4 splat): entry `c` holds the
    /// output bits of code `c`, computed by the vector step in a loop of 16
    /// codes a step. Returns the table's address (a stack slot).
    pub(super) fn byte_table(&mut self, sv: Value) -> Value {
        let w = self.spec.out_bytes() as i64;
        let addr = self.byte_table_slot(w);
        let first = self.vconst_bytes((0..16).collect());
        let sixteen = self.vconst_bytes(vec![16; 16]);
        let end = self.add_imm(addr, 256 * w);
        let (body, done) = (self.b.create_block(), self.b.create_block());
        let codes = self.b.append_block_param(body, types::I8X16);
        let p = self.b.append_block_param(body, types::I64);
        self.b.ins().jump(body, &[first.into(), addr.into()]);
        self.b.switch_to_block(body);
        if self.spec.f16_tables {
            // f16 entries rounded by the host (exact, and less code than the
            // integer rounding).
            let ys = self.float_codes_f32(Codes::Bytes(codes), Scales::Splat(sv));
            let h = self.round_f16_host(ys);
            for (k, &x) in h.iter().enumerate() {
                self.b.ins().store(mem(), x, p, 16 * k as i32);
            }
        } else {
            self.emit_float_codes(Codes::Bytes(codes), p, Scales::Splat(sv));
        }
        let next = self.b.ins().iadd(codes, sixteen);
        let pn = self.add_imm(p, 16 * w);
        let more = self.b.ins().icmp(IntCC::UnsignedLessThan, pn, end);
        self.b
            .ins()
            .brif(more, body, &[next.into(), pn.into()], done, &[]);
        self.b.switch_to_block(done);
        addr
    }

    /// 16 elements by table lookup: the codes at src byte address `sp`, their
    /// entries of `table` to dst byte address `dp`.
    ///
    /// The codes come in as two words, each byte then taken by a shift and a
    /// zero extension: x86 has more ALU ports than memory ports, and a load
    /// per code would make each element three memory operations.
    pub(super) fn emit_byte_lookups(&mut self, table: Value, sp: Value, dp: Value) {
        let w = self.spec.out_bytes() as i32;
        for half in 0..2 {
            let mut word = self.b.ins().load(types::I64, mem(), sp, 8 * half);
            for k in 0..8 {
                let byte = self.b.ins().ireduce(types::I8, word);
                let c = self.b.ins().uextend(types::I64, byte);
                if k < 7 {
                    word = self.b.ins().ushr_imm_s(word, 8);
                }
                let off = self.b.ins().ishl_imm_s(c, w.trailing_zeros() as i64);
                let at = self.b.ins().iadd(table, off);
                let to = w * (8 * half + k);
                if w == 2 {
                    let e = self.b.ins().uload16(types::I32, mem(), at, 0);
                    self.b.ins().istore16(mem(), e, dp, to);
                } else {
                    let e = self.b.ins().load(types::I32, mem(), at, 0);
                    self.b.ins().store(mem(), e, dp, to);
                }
            }
        }
    }

    /// The function's 256-entry table slot (`w` bytes an entry), created on
    /// first use.
    fn byte_table_slot(&mut self, w: i64) -> Value {
        if let Some(a) = self.byte_table_slot {
            return a;
        }
        let data = StackSlotData::new(StackSlotKind::ExplicitSlot, 256 * w as u32, 4);
        let slot = self.b.create_sized_stack_slot(data);
        let mut pos = FuncCursor::new(self.b.func).at_first_insertion_point(self.entry);
        let a = pos.ins().stack_addr(types::I64, slot, 0);
        self.byte_table_slot = Some(a);
        a
    }
}
