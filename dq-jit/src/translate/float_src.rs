//! Float src (SPEC §10) on the vector path: 16 codes to four F32X4 of their exact
//! values by bit manipulation, and the lanes whose code is a NaN.
//!
//! A code's exponent and mantissa bits move to an f32's, its exponent rebiased
//! (subnormal codes by one exact subtraction and a minimum, see
//! [`Translator::decode_lanes`]);
//! f8_e5m2's all-ones exponent is infinity; NaN codes are left to the caller,
//! whose result for them is [`NAN_BITS`] whatever the formula gives.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{InstBuilder, Value, types};
use dq_runtime::DType;
use dq_runtime::minifloat::NAN_BITS;

use super::{Lut, Translator, lanes, mem};
use crate::lane_math::LaneMath;

/// The layout of a float src code.
struct Layout {
    /// Code bits (8 or 4).
    bits: i64,
    /// Mantissa bits.
    man: i64,
    /// Exponent bias.
    bias: i64,
}

fn layout(t: DType) -> Layout {
    match t {
        DType::F8E4M3 => Layout {
            bits: 8,
            man: 3,
            bias: 7,
        },
        DType::F8E5M2 => Layout {
            bits: 8,
            man: 2,
            bias: 15,
        },
        _ => Layout {
            bits: 4,
            man: 1,
            bias: 1,
        },
    }
}

/// 16 float src codes as loaded, before decoding (see
/// [`Translator::load_float_codes`]).
pub(super) enum Codes {
    /// 8-bit codes: the 16 bytes, code `i` in byte `i`.
    Bytes(Value),
    /// 4-bit codes: per lane group, each code at the top of its I32 lane.
    Tops([Value; 4]),
}

/// Four decoded float src values, and where their codes are NaN.
pub(super) struct Decoded {
    /// The values (F32X4); NaN codes give a finite or infinite stand-in.
    pub(super) x: Value,
    /// The I32X4 mask of NaN codes (`None`: the type has none).
    pub(super) nan: Option<Value>,
}

impl<'a, 'f> Translator<'a, 'f> {
    /// The 16 float src codes from byte address `addr` (4-bit: from its low
    /// nibble), loaded for [`decode_group`](Self::decode_group).
    pub(super) fn load_float_codes(&mut self, addr: Value) -> Codes {
        let l = layout(self.spec.src);
        if l.bits == 8 && self.lut == Lut::Pshufb {
            return Codes::Bytes(self.b.ins().load(types::I8X16, mem(), addr, 0));
        }
        let int = if l.bits == 8 { DType::U8 } else { DType::U4 };
        let c = self.load_int_vec_at(int, addr);
        Codes::Tops(c.map(|c| self.vshl(c, 32 - l.bits)))
    }

    /// Codes `4k .. 4k + 4` of `codes`, decoded. One lane group at a time: its
    /// values go to the formula and the store before the next group's decoding,
    /// so fewer vectors are live (no spills in the loop).
    pub(super) fn decode_group(&mut self, codes: &Codes, k: usize) -> Decoded {
        let l = layout(self.spec.src);
        // The group's codes at the top of their I32 lanes: the sign at bit 31
        // (one byte shuffle for 8-bit codes).
        let top = match *codes {
            Codes::Bytes(v) => {
                let b = 4 * k as u8;
                let y = self.pshufb(v, (b..b + 4).flat_map(|i| [0x80, 0x80, 0x80, i]));
                self.b.ins().bitcast(types::I32X4, lanes(), y)
            }
            Codes::Tops(t) => t[k],
        };
        let (v, mag) = self.decode_lanes(&l, top);
        let x = self.b.ins().bitcast(types::F32X4, lanes(), v);
        // NaN codes by their magnitude bits (signed compares: one instruction).
        let pos = 23 - l.man;
        let nan = match self.spec.src {
            DType::F8E4M3 => {
                let all = self.c32(types::I32X4, 0x7f << pos);
                Some(self.b.ins().icmp(IntCC::Equal, mag, all))
            }
            DType::F8E5M2 => {
                let inf = self.c32(types::I32X4, 0x7c << pos);
                Some(self.b.ins().icmp(IntCC::SignedGreaterThan, mag, inf))
            }
            _ => None,
        };
        Decoded { x, nan }
    }

    /// The f32 bits (I32X4) of the codes `c` (each at the top of its lane) of a
    /// float src with layout `l`, in integer arithmetic and exact float
    /// operations (never a subnormal operand, which costs x86 a slow assist);
    /// and the codes' magnitude bits (exponent and mantissa, where the f32's are).
    ///
    /// A code's exponent and mantissa bits, moved into place, plus the rebiased
    /// exponent are the bits of `n`, its value when the code is normal; with the
    /// exponent one up they are `u = 2n`. A subnormal code `m * 2^(1 - bias - man)`
    /// is `u - 2^(1 - bias)` (exact: `u` is below `2^(2 - bias)`), which is then
    /// below `n`; for a normal code `u >= 2^(2 - bias)`, so `u - 2^(1 - bias) >= n`.
    /// Either way the value is `min(n, u - 2^(1 - bias))` (one `minps`: no NaN
    /// among them). f8_e5m2's all-ones exponent gives infinity (NaN codes too:
    /// the caller replaces those); the sign goes in last (a subnormal -0 stays
    /// -0).
    fn decode_lanes(&mut self, l: &Layout, c: Value) -> (Value, Value) {
        let pos = 23 - l.man;
        let mag = self.vushr(c, 32 - l.bits - pos);
        let mag = self.and_c(mag, ((1i64 << (l.bits - 1)) - 1) << pos);
        let normal = self.add_c(mag, (127 - l.bias) << 23);
        let up = self.add_c(normal, 1 << 23);
        let (nf, upf) = (self.fbits(normal), self.fbits(up));
        let one = self.vconst(types::F32X4, ((128 - l.bias) << 23) as u64);
        let sub = self.b.ins().fsub(upf, one);
        // `n < sub ? n : sub`, the pattern the backend lowers to one `minps`.
        let lt = self.b.ins().fcmp(FloatCC::LessThan, nf, sub);
        let lt = self.b.ins().bitcast(types::F32X4, lanes(), lt);
        let v = self.b.ins().bitselect(lt, nf, sub);
        let mut v = self.b.ins().bitcast(types::I32X4, lanes(), v);
        if self.spec.src == DType::F8E5M2 {
            // `mag >= inf_at` as one signed compare.
            let below_inf = self.c32(types::I32X4, (0x7c << pos) - 1);
            let big = self.b.ins().icmp(IntCC::SignedGreaterThan, mag, below_inf);
            let inf = self.c32(types::I32X4, 0x7f80_0000);
            v = self.pick(big, inf, v);
        }
        let sign = self.and_c(c, 0x8000_0000_u32 as i64);
        (self.b.ins().bor(v, sign), mag)
    }

    /// I32X4 bits as F32X4.
    fn fbits(&mut self, x: Value) -> Value {
        self.b.ins().bitcast(types::F32X4, lanes(), x)
    }

    /// Result `y` (F32X4) with the lanes of `nan` (I32X4 mask, if any) set to
    /// [`NAN_BITS`]: a NaN src gives its own NaN (SPEC §10, as the scalar code).
    /// Selected as I32X4, where the backend sees the mask is a compare's (one
    /// blend).
    pub(super) fn float_src_nan(&mut self, nan: Option<Value>, y: Value) -> Value {
        match nan {
            Some(m) => {
                let q = self.c32(types::I32X4, NAN_BITS as i64);
                let yi = self.b.ins().bitcast(types::I32X4, lanes(), y);
                let r = self.pick(m, q, yi);
                self.fbits(r)
            }
            None => y,
        }
    }
}
