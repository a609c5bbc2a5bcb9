//! Float src (SPEC 10) on the vector path: 16 codes to four F32X4 of their exact
//! values by bit manipulation, and the lanes whose code is a NaN.
//!
//! A code's sign and exponent/mantissa bits move to an f32's sign bit and to the
//! top of its mantissa; that f32 times `2^(127 - bias)` is the code's value,
//! subnormals included (the f32 is then subnormal, and the product exact).
//! f8_e5m2's all-ones exponent is patched to infinity; NaN codes are left to the
//! caller, whose result for them is [`NAN_BITS`] whatever the formula gives.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, Value, types};
use dq_runtime::DType;
use dq_runtime::minifloat::NAN_BITS;

use super::{Translator, lanes, mem};

/// The layout of a float src code.
struct Layout {
    /// Code bits (8 or 4).
    bits: i64,
    /// Mantissa bits.
    man: i64,
    /// `2^(127 - bias)`, the rescaling of the exponent, as f32 bits.
    scale: u32,
}

fn layout(t: DType) -> Layout {
    match t {
        DType::F8E4M3 => Layout {
            bits: 8,
            man: 3,
            scale: (127 + 120) << 23,
        },
        DType::F8E5M2 => Layout {
            bits: 8,
            man: 2,
            scale: (127 + 112) << 23,
        },
        _ => Layout {
            bits: 4,
            man: 1,
            scale: (127 + 126) << 23,
        },
    }
}

/// 16 decoded float src values, and where their codes are NaN.
pub(super) struct Decoded {
    /// The values (F32X4, elements in order); NaN codes give a finite stand-in.
    pub(super) x: [Value; 4],
    /// Per lane group, the I32X4 mask of NaN codes (`None`: the type has none).
    pub(super) nan: Option<[Value; 4]>,
}

impl<'a, 'f> Translator<'a, 'f> {
    /// The 16 float src codes from byte address `addr` (4-bit: from its low
    /// nibble), decoded.
    pub(super) fn load_float_vec_at(&mut self, addr: Value) -> Decoded {
        let t = self.spec.src;
        let l = layout(t);
        // Each code at the top of its I32 lane: the sign at bit 31.
        let top: [Value; 4] = if l.bits == 8 {
            let v = self.b.ins().load(types::I8X16, mem(), addr, 0);
            std::array::from_fn(|k| {
                let b = 4 * k as u8;
                let y = self.pshufb(v, (b..b + 4).flat_map(|i| [0x80, 0x80, 0x80, i]));
                self.b.ins().bitcast(types::I32X4, lanes(), y)
            })
        } else {
            let c = self.load_int_vec_at(DType::U4, addr);
            c.map(|c| self.vshl(c, 28))
        };
        let shift = 32 - l.bits - (23 - l.man);
        let em_mask = ((1i64 << (l.bits - 1)) - 1) << (23 - l.man);
        let mut x = top;
        for (xk, &c) in x.iter_mut().zip(&top) {
            // The arithmetic shift copies the sign down; the mask keeps bit 31.
            let y = self.vsshr(c, shift);
            let y = self.and_c(y, em_mask | (0x8000_0000_u32 as i32 as i64));
            let y = self.b.ins().bitcast(types::F32X4, lanes(), y);
            let k = self.vconst(types::F32X4, l.scale as u64);
            let v = self.b.ins().fmul(y, k);
            *xk = if t == DType::F8E5M2 {
                self.e5m2_inf(c, v)
            } else {
                v
            };
        }
        let nan = match t {
            DType::F8E4M3 => Some(top.map(|c| {
                let m = self.vshl(c, 1);
                let nan = self.c32(types::I32X4, 0xfe00_0000_u32 as i64);
                self.b.ins().icmp(IntCC::Equal, m, nan)
            })),
            DType::F8E5M2 => Some(top.map(|c| {
                let m = self.vshl(c, 1);
                let inf = self.c32(types::I32X4, 0xf800_0000_u32 as i64);
                self.b.ins().icmp(IntCC::UnsignedGreaterThan, m, inf)
            })),
            _ => None,
        };
        Decoded { x, nan }
    }

    /// f8_e5m2 value `v` of code `c` (at the top of its lane) with the all-ones
    /// exponent made infinite (NaN codes included; the caller replaces those).
    fn e5m2_inf(&mut self, c: Value, v: Value) -> Value {
        let m = self.vshl(c, 1);
        let lim = self.c32(types::I32X4, 0xf7ff_ffff_u32 as i64);
        let big = self.b.ins().icmp(IntCC::UnsignedGreaterThan, m, lim);
        let sign = self.and_c(c, 0x8000_0000_u32 as i64);
        let inf = self.or_c(sign, 0x7f80_0000);
        let inf = self.b.ins().bitcast(types::F32X4, lanes(), inf);
        self.sel(big, inf, v)
    }

    /// Result `y` (F32X4) with the lanes of `nan` (I32X4 mask, if any) set to
    /// [`NAN_BITS`]: a NaN src gives its own NaN (SPEC 10, as the scalar code).
    pub(super) fn float_src_nan(&mut self, nan: Option<Value>, y: Value) -> Value {
        match nan {
            Some(m) => {
                let q = self.vconst(types::F32X4, NAN_BITS as u64);
                self.sel(m, q, y)
            }
            None => y,
        }
    }
}
