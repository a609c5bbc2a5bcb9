//! Exact decoding of the SPEC §10 minifloats (f8_e4m3, f8_e5m2, f4_e2m1) and of
//! e8m0 scales into f32, by bit manipulation, and the 256-entry tables built from
//! it that the vector kernels look codes up in.
//!
//! Every value of the three src types and of e8m0 is an f32 exactly (e8m0 `0` is
//! `2^-127`, an f32 subnormal). Every NaN code decodes to [`NAN_BITS`], the
//! positive default quiet NaN, whatever its sign, and every backend gives that
//! NaN as the result of a NaN src whatever the scale (SPEC §10): the NaN a
//! product of two NaNs keeps depends on the operand order the compiler picks, so
//! the backends select it rather than leave it to the multiply.

/// The f32 bits every NaN code decodes to.
pub const NAN_BITS: u32 = 0x7fc0_0000;

/// How a format spends its top exponent.
#[derive(Clone, Copy)]
enum Top {
    /// No special values (f4_e2m1).
    Finite,
    /// Only the all-ones code (per sign) is NaN (f8_e4m3fn).
    OnesNan,
    /// IEEE: mantissa 0 is infinity, the rest NaN (f8_e5m2).
    Ieee,
}

/// Decodes a sign/exponent/mantissa code with `e` exponent bits, `m` mantissa
/// bits and exponent bias `bias`.
const fn decode(code: u32, e: u32, m: u32, bias: i32, top: Top) -> f32 {
    let sign = (code >> (e + m)) & 1;
    let exp = (code >> m) & ((1 << e) - 1);
    let man = code & ((1 << m) - 1);
    let ones = exp == (1 << e) - 1;
    let nan = match top {
        Top::Finite => false,
        Top::OnesNan => ones && man == (1 << m) - 1,
        Top::Ieee => ones && man != 0,
    };
    if nan {
        return f32::from_bits(NAN_BITS);
    }
    let bits = if ones && matches!(top, Top::Ieee) {
        0x7f80_0000
    } else if exp == 0 && man == 0 {
        0
    } else if exp == 0 {
        // Subnormal man * 2^(1 - bias - m): normalise on its leading bit `p`.
        let p = 31 - man.leading_zeros();
        let e32 = (p as i32 + 1 - bias - m as i32 + 127) as u32;
        (e32 << 23) | ((man ^ (1 << p)) << (23 - p))
    } else {
        let e32 = (exp as i32 - bias + 127) as u32;
        (e32 << 23) | (man << (23 - m))
    };
    f32::from_bits((sign << 31) | bits)
}

/// The value of an f8_e4m3 (e4m3fn) code.
pub const fn f8_e4m3_to_f32(code: u8) -> f32 {
    decode(code as u32, 4, 3, 7, Top::OnesNan)
}

/// The value of an f8_e5m2 code.
pub const fn f8_e5m2_to_f32(code: u8) -> f32 {
    decode(code as u32, 5, 2, 15, Top::Ieee)
}

/// The value of an f4_e2m1 nibble (the high bits of `code` are ignored).
pub const fn f4_e2m1_to_f32(code: u8) -> f32 {
    decode((code & 0x0f) as u32, 2, 1, 1, Top::Finite)
}

/// The value of an e8m0 scale: `2^(e - 127)` (`0` is the subnormal `2^-127`),
/// `0xff` NaN.
pub const fn e8m0_to_f32(e: u8) -> f32 {
    match e {
        0xff => f32::from_bits(NAN_BITS),
        0 => f32::from_bits(0x0040_0000),
        e => f32::from_bits((e as u32) << 23),
    }
}

/// The decoder `$f` at every code 0..=255 (const fns cannot call fn pointers).
macro_rules! table {
    ($f:ident) => {{
        let mut t = [0.0; 256];
        let mut i = 0;
        while i < 256 {
            t[i] = $f(i as u8);
            i += 1;
        }
        t
    }};
}

/// [`f8_e4m3_to_f32`] of every code.
pub static F8_E4M3_TABLE: [f32; 256] = table!(f8_e4m3_to_f32);
/// [`f8_e5m2_to_f32`] of every code.
pub static F8_E5M2_TABLE: [f32; 256] = table!(f8_e5m2_to_f32);
/// [`f4_e2m1_to_f32`] of every nibble, then zeros.
pub static F4_E2M1_TABLE: [f32; 256] = {
    let mut t = [0.0; 256];
    let mut i = 0;
    while i < 16 {
        t[i] = f4_e2m1_to_f32(i as u8);
        i += 1;
    }
    t
};
/// [`e8m0_to_f32`] of every code.
pub static E8M0_TABLE: [f32; 256] = table!(e8m0_to_f32);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e2m1_values() {
        let want = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
        for (n, w) in want.iter().enumerate() {
            assert_eq!(f4_e2m1_to_f32(n as u8).to_bits(), (*w as f32).to_bits());
            assert_eq!(
                f4_e2m1_to_f32(n as u8 | 8).to_bits(),
                (-*w as f32).to_bits()
            );
        }
    }

    #[test]
    fn e4m3_landmarks() {
        assert_eq!(f8_e4m3_to_f32(0x7e), 448.0);
        assert_eq!(f8_e4m3_to_f32(0x01), 2f32.powi(-9));
        assert_eq!(f8_e4m3_to_f32(0x07), 7.0 * 2f32.powi(-9));
        assert_eq!(f8_e4m3_to_f32(0x08), 2f32.powi(-6));
        assert_eq!(f8_e4m3_to_f32(0x38), 1.0);
        assert_eq!(f8_e4m3_to_f32(0xb8), -1.0);
        assert_eq!(f8_e4m3_to_f32(0x80).to_bits(), 0x8000_0000);
        assert_eq!(f8_e4m3_to_f32(0x7f).to_bits(), NAN_BITS);
        assert_eq!(f8_e4m3_to_f32(0xff).to_bits(), NAN_BITS);
        assert_eq!(f8_e4m3_to_f32(0x78), 256.0);
        assert_eq!(F8_E4M3_TABLE.iter().filter(|x| x.is_nan()).count(), 2);
    }

    #[test]
    fn e5m2_is_the_top_byte_of_f16() {
        for c in 0..=255u8 {
            let h = half::f16::from_bits((c as u16) << 8).to_f32();
            let d = f8_e5m2_to_f32(c);
            if h.is_nan() {
                assert_eq!(d.to_bits(), NAN_BITS, "{c:#x}");
            } else {
                assert_eq!(d.to_bits(), h.to_bits(), "{c:#x}");
            }
        }
        assert_eq!(f8_e5m2_to_f32(0x7b), 57344.0);
        assert_eq!(f8_e5m2_to_f32(0xfc), f32::NEG_INFINITY);
    }

    #[test]
    fn e8m0_powers_of_two() {
        assert_eq!(e8m0_to_f32(127), 1.0);
        assert_eq!(e8m0_to_f32(128), 2.0);
        assert_eq!(e8m0_to_f32(254), 2f32.powi(127));
        assert_eq!(e8m0_to_f32(1), 2f32.powi(-126));
        assert_eq!(e8m0_to_f32(0).to_bits(), 0x0040_0000);
        assert_eq!(e8m0_to_f32(0) * 2.0, 2f32.powi(-126));
        assert_eq!(e8m0_to_f32(255).to_bits(), NAN_BITS);
    }
}
