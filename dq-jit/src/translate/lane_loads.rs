//! Lane loads: 16 contiguous src values or zero points into four 32-bit-lane
//! vectors, as I32X4 integers (one byte shuffle, then shifts) or as biased F32X4
//! floats (a byte shuffle into the mantissa of 2^23, no integer conversion), and
//! contiguous scales as F32X4.

use cranelift_codegen::cursor::{Cursor, FuncCursor};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{ConstantData, InstBuilder, Value, types};
use dq_runtime::DType;
use dq_runtime::minifloat::NAN_BITS;

use super::{Translator, lanes, mem};
use crate::lane_math::LaneMath;

/// 2^23: a float in `2^23..2^24` has integer steps, its value in the mantissa.
pub(super) const MAGIC: i64 = 1 << 23;

/// The bits of 2^23 as f32.
const MAGIC_BITS: u64 = 0x4B00_0000;

/// What [`Ints::Biased`](super::eval::Ints::Biased) values of dtype `t` add to make them non-negative.
pub(super) fn bias(t: DType) -> i64 {
    match t {
        DType::S8 => 128,
        DType::S4 => 8,
        _ => 0,
    }
}

impl<'a, 'f> Translator<'a, 'f> {
    /// 16 contiguous integer elements from element offset `o` as four I32X4
    /// (4-bit: `o` is even, the caller peeled an odd start).
    pub(super) fn load_int_vec(&mut self, t: DType, buf: Value, o: Value) -> [Value; 4] {
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
    pub(super) fn load_int_vec_at(&mut self, t: DType, addr: Value) -> [Value; 4] {
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

    /// The low and the high nibble of every byte of `v` (I8X16), as bytes.
    pub(super) fn nibbles(&mut self, v: Value) -> (Value, Value) {
        let m = self.vconst(types::I8X16, 0x0f);
        let lo = self.b.ins().band(v, m);
        // A 16-bit lane shift moves each byte's high nibble down (the mask drops
        // the bits shifted in from the next byte).
        let v16 = self.b.ins().bitcast(types::I16X8, lanes(), v);
        let hi = self.vushr(v16, 4);
        let hi = self.b.ins().bitcast(types::I8X16, lanes(), hi);
        (lo, self.b.ins().band(hi, m))
    }

    /// 8 bytes at `addr` in the low half of an I8X16 (the high half zero).
    pub(super) fn load_low64(&mut self, addr: Value) -> Value {
        let w = self.b.ins().load(types::I64, mem(), addr, 0);
        let v = self.b.ins().scalar_to_vector(types::I64X2, w);
        self.b.ins().bitcast(types::I8X16, lanes(), v)
    }

    /// Bytes per scale as the kernel reads them.
    fn scale_bytes(&self) -> usize {
        self.spec.scale_type().bits() / 8
    }

    /// The byte address of scale `base + j`.
    pub(super) fn scale_addr(&mut self, base: Value, j: Value) -> Value {
        let idx = self.add(base, j);
        let off = self.mul_imm(idx, self.scale_bytes() as i64);
        self.add(self.scales, off)
    }

    /// Scales `4k .. 4k + 4` from byte address `addr` as an F32X4.
    pub(super) fn load_scale_lanes(&mut self, addr: Value, k: usize) -> Value {
        let at = (k * 4 * self.scale_bytes()) as i32;
        match self.spec.scale_type() {
            DType::E8M0 => self.load_e8m0_lanes(addr, at),
            DType::F32 => self.b.ins().load(types::F32X4, mem(), addr, at),
            DType::BF16 => {
                let h = self.b.ins().uload16x4(mem(), addr, at);
                let x = self.vshl(h, 16);
                self.b.ins().bitcast(types::F32X4, lanes(), x)
            }
            _ => {
                let h = self.b.ins().uload16x4(mem(), addr, at);
                self.widen_f16(h, types::I32X4, true)
            }
        }
    }

    /// Four e8m0 scales from byte address `addr + at` as an F32X4: `e << 23` is
    /// `2^(e - 127)`'s bits, except that 0 (`2^-127`, `0x0040_0000`) and 255
    /// (NaN, [`NAN_BITS`]) both need bit 22 set.
    fn load_e8m0_lanes(&mut self, addr: Value, at: i32) -> Value {
        let w = self.b.ins().load(types::I32, mem(), addr, at);
        let v = self.b.ins().scalar_to_vector(types::I32X4, w);
        let v = self.b.ins().bitcast(types::I8X16, lanes(), v);
        // Byte i to the top of lane i, then down to bits 23..30.
        let top = self.pshufb(v, (0..4).flat_map(|i| [0x80, 0x80, 0x80, i]));
        let top = self.b.ins().bitcast(types::I32X4, lanes(), top);
        let x = self.vushr(top, 1);
        let zero = self.vconst(types::I32X4, 0);
        let inf = self.c32(types::I32X4, 0x7f80_0000);
        let is0 = self.b.ins().icmp(IntCC::Equal, x, zero);
        let is255 = self.b.ins().icmp(IntCC::Equal, x, inf);
        let fix = self.b.ins().bor(is0, is255);
        let fix = self.and_c(fix, (NAN_BITS & !0x7f80_0000) as i64);
        let x = self.b.ins().bor(x, fix);
        self.b.ins().bitcast(types::F32X4, lanes(), x)
    }

    /// The F32X4 splat of `2^23 + bias(t)`: biased values of dtype `t` minus it are
    /// the values.
    pub(super) fn bias_splat(&mut self, t: DType) -> Value {
        let k = (MAGIC + bias(t)) as f32;
        self.vconst(types::F32X4, k.to_bits() as u64)
    }

    /// An I8X16 constant of 16 `bytes`, emitted once at the top of the entry block.
    pub(super) fn vconst_bytes(&mut self, bytes: Vec<u8>) -> Value {
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

    /// A constant byte shuffle `pshufb(x, order)` (an index of 0x80 gives 0).
    pub(super) fn pshufb(&mut self, x: Value, order: impl IntoIterator<Item = u8>) -> Value {
        // Hoisted: a mask loaded in the loop costs more than the register.
        let m = self.vconst_bytes(order.into_iter().collect());
        self.b.ins().x86_pshufb(x, m)
    }

    /// 16 contiguous integer elements of dtype `t` (8- or 4-bit) from byte address
    /// `addr` (4-bit: from the low nibble) as [`Ints::Biased`](super::eval::Ints::Biased) floats: four F32X4 of
    /// `2^23 + q + bias(t)`.
    pub(super) fn load_biased_at(&mut self, t: DType, addr: Value) -> [Value; 4] {
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
}
