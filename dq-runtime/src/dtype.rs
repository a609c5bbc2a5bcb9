//! Element types (SPEC §1) and packed 4-bit access.

use core::fmt;

use crate::minifloat::{E8M0_TABLE, F4_E2M1_TABLE, F8_E4M3_TABLE, F8_E5M2_TABLE};

/// An element type of a tensor, scale or zero point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// Signed 4-bit, two's complement, -8..=7, packed two per byte.
    S4,
    /// Unsigned 4-bit, 0..=15, packed two per byte.
    U4,
    /// Signed 8-bit integer.
    S8,
    /// Unsigned 8-bit integer.
    U8,
    /// Signed 32-bit integer, little-endian.
    S32,
    /// Signed 64-bit integer: only the static op's zero-point attribute.
    S64,
    /// IEEE 754 binary16.
    F16,
    /// bfloat16 (the top half of an f32).
    BF16,
    /// IEEE 754 binary32.
    F32,
    /// IEEE 754 binary64.
    F64,
    /// OCP float8 e4m3fn (SPEC §10): bias 7, no infinities, NaN `0x7f`/`0xff`.
    F8E4M3,
    /// OCP float8 e5m2 (SPEC §10): bias 15, IEEE-like with infinities and NaNs.
    F8E5M2,
    /// OCP MX fp4 e2m1 (SPEC §10): ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}, packed two per byte.
    F4E2M1,
    /// OCP MX scale e8m0 (SPEC §10): `2^(e - 127)`, `0xff` NaN.
    E8M0,
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 14] = [
        DType::S4,
        DType::U4,
        DType::S8,
        DType::U8,
        DType::S32,
        DType::S64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
        DType::F8E4M3,
        DType::F8E5M2,
        DType::F4E2M1,
        DType::E8M0,
    ];

    /// The name used by the spec, the CLI and error messages (`s4`, `bf16`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            DType::S4 => "s4",
            DType::U4 => "u4",
            DType::S8 => "s8",
            DType::U8 => "u8",
            DType::S32 => "s32",
            DType::S64 => "s64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::F8E4M3 => "f8_e4m3",
            DType::F8E5M2 => "f8_e5m2",
            DType::F4E2M1 => "f4_e2m1",
            DType::E8M0 => "e8m0",
        }
    }

    /// Storage width of one element in bits.
    pub const fn bits(self) -> usize {
        match self {
            DType::S4 | DType::U4 | DType::F4E2M1 => 4,
            DType::S8 | DType::U8 | DType::F8E4M3 | DType::F8E5M2 | DType::E8M0 => 8,
            DType::F16 | DType::BF16 => 16,
            DType::S32 | DType::F32 => 32,
            DType::S64 | DType::F64 => 64,
        }
    }

    /// True for the packed 4-bit types (s4, u4 and f4_e2m1).
    pub const fn is_4bit(self) -> bool {
        matches!(self, DType::S4 | DType::U4 | DType::F4E2M1)
    }

    /// True for the integer types.
    pub const fn is_int(self) -> bool {
        matches!(
            self,
            DType::S4 | DType::U4 | DType::S8 | DType::U8 | DType::S32 | DType::S64
        )
    }

    /// True for the IEEE floating-point types (scales and dst: f16, bf16, f32, f64).
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// True for the float src types of SPEC §10 (f8_e4m3, f8_e5m2, f4_e2m1).
    pub const fn is_float_src(self) -> bool {
        matches!(self, DType::F8E4M3 | DType::F8E5M2 | DType::F4E2M1)
    }

    /// The f32 value of every code of a float src type or e8m0 (`None` for the
    /// others): 256 entries (f4_e2m1: the first 16 are its nibbles, the rest 0).
    pub const fn decode_table(self) -> Option<&'static [f32; 256]> {
        match self {
            DType::F8E4M3 => Some(&F8_E4M3_TABLE),
            DType::F8E5M2 => Some(&F8_E5M2_TABLE),
            DType::F4E2M1 => Some(&F4_E2M1_TABLE),
            DType::E8M0 => Some(&E8M0_TABLE),
            _ => None,
        }
    }

    /// Bytes needed to store `n` elements (4-bit: `ceil(n / 2)`), `None` on overflow.
    pub const fn bytes_for(self, n: usize) -> Option<usize> {
        if self.is_4bit() {
            Some(n / 2 + n % 2)
        } else {
            n.checked_mul(self.bits() / 8)
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Reads the 4-bit element at physical offset `o` as its raw nibble (0..=15).
///
/// Even offsets live in the low nibble of byte `o / 2`, odd ones in the high nibble.
///
/// # Panics
/// If `o / 2` is outside `buf` (callers index validated buffers).
#[inline(always)]
pub fn nibble(buf: &[u8], o: usize) -> u8 {
    (buf[o / 2] >> ((o & 1) * 4)) & 0x0f
}

/// Sign-extends a raw nibble to the s4 value it encodes (-8..=7).
#[inline(always)]
pub const fn s4_value(n: u8) -> i8 {
    ((n << 4) as i8) >> 4
}

/// Writes the raw nibble `v & 0xf` at physical offset `o`, keeping the other nibble.
///
/// # Panics
/// If `o / 2` is outside `buf`.
#[inline(always)]
pub fn set_nibble(buf: &mut [u8], o: usize, v: u8) {
    let shift = (o & 1) * 4;
    let b = &mut buf[o / 2];
    *b = (*b & !(0x0f << shift)) | ((v & 0x0f) << shift);
}

/// Packs 4-bit values (each taken modulo 16) two per byte, low nibble first.
///
/// The padding nibble of an odd-length result is zero.
pub fn pack_4bit(values: &[i8]) -> Vec<u8> {
    let mut out = vec![0u8; values.len().div_ceil(2)];
    for (o, &v) in values.iter().enumerate() {
        set_nibble(&mut out, o, v as u8);
    }
    out
}

/// Reads integer element `o` of an integer-typed buffer as an `i64`.
///
/// For 4-bit types `o` is the physical nibble offset.
///
/// # Panics
/// If `dtype` is a float type or the element is outside `buf`.
#[inline]
pub fn load_int(dtype: DType, buf: &[u8], o: usize) -> i64 {
    match dtype {
        DType::S4 => s4_value(nibble(buf, o)) as i64,
        DType::U4 => nibble(buf, o) as i64,
        DType::S8 => buf[o] as i8 as i64,
        DType::U8 => buf[o] as i64,
        DType::S32 => i32::from_le_bytes(le_array(buf, o)) as i64,
        DType::S64 => i64::from_le_bytes(le_array(buf, o)),
        _ => panic!("load_int on float dtype {dtype}"),
    }
}

/// Reads float element `o` of a float-typed buffer, widened exactly to `f64`.
///
/// # Panics
/// If `dtype` is an integer type or the element is outside `buf`.
#[inline]
pub fn load_float(dtype: DType, buf: &[u8], o: usize) -> f64 {
    match dtype {
        DType::F16 => half::f16::from_bits(u16::from_le_bytes(le_array(buf, o))).to_f64(),
        DType::BF16 => half::bf16::from_bits(u16::from_le_bytes(le_array(buf, o))).to_f64(),
        DType::F32 => f32::from_le_bytes(le_array(buf, o)) as f64,
        DType::F64 => f64::from_le_bytes(le_array(buf, o)),
        _ => panic!("load_float on integer dtype {dtype}"),
    }
}

/// Reads float element `o` of an f16/bf16/f32 buffer, or of a float src or e8m0
/// buffer ([`load_code_f32`]), as the exact `f32`.
///
/// # Panics
/// If `dtype` is an integer type or f64, or the element is outside `buf`.
#[inline]
pub fn load_f32(dtype: DType, buf: &[u8], o: usize) -> f32 {
    match dtype {
        DType::F16 => half::f16::from_bits(u16::from_le_bytes(le_array(buf, o))).to_f32(),
        DType::BF16 => half::bf16::from_bits(u16::from_le_bytes(le_array(buf, o))).to_f32(),
        DType::F32 => f32::from_le_bytes(le_array(buf, o)),
        DType::F8E4M3 | DType::F8E5M2 | DType::F4E2M1 | DType::E8M0 => load_code_f32(dtype, buf, o),
        _ => panic!("load_f32 on dtype {dtype}"),
    }
}

/// Reads element `o` of a float src (f8_e4m3, f8_e5m2, f4_e2m1: nibble offset)
/// or e8m0 buffer as its exact `f32` (NaN codes: [`crate::minifloat::NAN_BITS`]).
///
/// # Panics
/// If `dtype` is none of those, or the element is outside `buf`.
#[inline]
pub fn load_code_f32(dtype: DType, buf: &[u8], o: usize) -> f32 {
    let code = if dtype.is_4bit() {
        nibble(buf, o)
    } else {
        buf[o]
    };
    match dtype.decode_table() {
        Some(t) => t[code as usize],
        None => panic!("load_code_f32 on dtype {dtype}"),
    }
}

/// The `N` bytes of element `o` of a buffer of `N`-byte elements.
#[inline(always)]
fn le_array<const N: usize>(buf: &[u8], o: usize) -> [u8; N] {
    buf[o * N..o * N + N].try_into().expect("N-byte slice")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn names_round_trip() {
        for d in DType::ALL {
            assert_eq!(d.name().parse::<DType>().unwrap(), d);
        }
        assert_eq!(
            "i8".parse::<DType>(),
            Err(Error::UnknownDType { got: "i8".into() })
        );
    }

    #[test]
    fn nibbles_low_first() {
        let buf = [0x21u8, 0xf3];
        assert_eq!(
            (0..4).map(|o| nibble(&buf, o)).collect::<Vec<_>>(),
            [1, 2, 3, 15]
        );
        assert_eq!(s4_value(0xf), -1);
        assert_eq!(s4_value(0x8), -8);
        assert_eq!(s4_value(0x7), 7);
        assert_eq!(pack_4bit(&[1, -1, 7]), vec![0xf1, 0x07]);
    }

    #[test]
    fn byte_counts() {
        assert_eq!(DType::U4.bytes_for(7), Some(4));
        assert_eq!(DType::S4.bytes_for(0), Some(0));
        assert_eq!(DType::BF16.bytes_for(3), Some(6));
        assert_eq!(DType::F64.bytes_for(usize::MAX), None);
        assert_eq!(DType::F4E2M1.bytes_for(7), Some(4));
        assert_eq!(DType::F8E4M3.bytes_for(7), Some(7));
        assert_eq!(DType::E8M0.bytes_for(3), Some(3));
    }
}
