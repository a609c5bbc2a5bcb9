//! dq's f32 -> f16 / bf16 step (SPEC §5, step 5) against an independent
//! oracle: round-to-nearest-even written here on the f32 bits with integer arithmetic
//! (not `half`, which `store_f32` calls). Covered: every 16-bit result pattern with
//! the f32 values around it and around the tie towards the next pattern, every f32
//! of the exponents where subnormals begin and end and where results overflow to
//! inf, and every NaN payload.

use dq::DType;
use dq::convert::{f32_to_bf16_bits, quiet_f32, store_f32};

/// A 16-bit float format: mantissa bits, and the exponent bias.
#[derive(Clone, Copy)]
struct Format {
    man: u32,
    bias: i32,
}

const F16: Format = Format { man: 10, bias: 15 };
const BF16: Format = Format { man: 7, bias: 127 };

/// `x` (f32 bits) rounded to nearest, ties to even, into `fmt`: subnormals kept,
/// overflow to inf, NaN quiet with the top payload bits kept.
fn rne(fmt: Format, x: u32) -> u16 {
    let sign = ((x >> 16) & 0x8000) as u16;
    let exp = (x >> 23) & 0xff;
    let man = x & 0x7f_ffff;
    let inf = (((1u32 << (15 - fmt.man)) - 1) << fmt.man) as u16;
    if exp == 0xff {
        if man == 0 {
            return sign | inf;
        }
        let quiet = 1u16 << (fmt.man - 1);
        return sign | inf | quiet | (man >> (23 - fmt.man)) as u16;
    }
    // |x| = m * 2^e exactly.
    let (m, e) = if exp == 0 {
        (man as u64, -149)
    } else {
        ((man | 0x80_0000) as u64, exp as i32 - 150)
    };
    if m == 0 {
        return sign;
    }
    // Its binary exponent, and the quantum (the result's ulp) at that exponent.
    let top = 63 - m.leading_zeros() as i32 + e;
    let min_normal = 1 - fmt.bias;
    let q = (top - fmt.man as i32).max(min_normal - fmt.man as i32);
    // n = m * 2^(e - q), rounded to nearest, ties to even (e < q for every f32 input).
    let s = (q - e) as u32;
    assert!(
        s > 0,
        "x {x:#x}: the result has more precision than the input"
    );
    let n = if s >= 64 {
        0
    } else {
        let (n, rem, half) = (m >> s, m & ((1 << s) - 1), 1u64 << (s - 1));
        n + u64::from(rem > half || (rem == half && n & 1 == 1))
    };
    // Encodings are contiguous: the subnormal n is its own encoding; a normal n in
    // [2^man, 2^(man+1)] adds its biased exponent (a carry to 2^(man+1) lands on
    // the next binade, and past the largest finite value on inf).
    let bits = if top < min_normal {
        n
    } else {
        (((top + fmt.bias - 1) as u64) << fmt.man) + n
    };
    sign | bits.min(inf as u64) as u16
}

fn store(dtype: DType, y: f32) -> u16 {
    let mut buf = [0u8; 2];
    store_f32(dtype, &mut buf, 0, y);
    u16::from_le_bytes(buf)
}

/// Checks dq's conversions of the f32 `x` (bits) into `dtype` against the oracle.
fn check(dtype: DType, x: u32) {
    let y = f32::from_bits(x);
    let (want, got) = match dtype {
        DType::F16 => (rne(F16, x), store(DType::F16, y)),
        _ => {
            let want = rne(BF16, x);
            assert_eq!(f32_to_bf16_bits(y), want, "formula {x:#010x} -> bf16");
            (want, store(DType::BF16, y))
        }
    };
    assert_eq!(got, want, "store {x:#010x} -> {dtype}");
}

/// The f32 value (bits) of the finite 16-bit pattern `h` in `fmt`.
fn value_bits(fmt: Format, h: u16) -> u32 {
    if fmt.man == 7 {
        return (h as u32) << 16; // bf16 is the top half of an f32
    }
    let sign = ((h & 0x8000) as u32) << 16;
    let (e, m) = ((h as u32 & 0x7fff) >> 10, h as u32 & 0x3ff);
    let mag = if e == 0 {
        // A subnormal, m * 2^-24: an f32 normal (or zero).
        f32::from_bits(((127 - 24) as u32) << 23) * m as f32
    } else {
        f32::from_bits((((e as i32 - 15 + 127) as u32) << 23) | (m << 13))
    };
    sign | mag.to_bits()
}

/// For every finite 16-bit pattern: the f32 value at it, and at the tie towards
/// the next pattern away from zero, each with its 4 f32 neighbours on both sides.
fn every_pattern_and_tie(dtype: DType, fmt: Format) -> u64 {
    let inf = ((1u32 << (15 - fmt.man)) - 1) << fmt.man;
    let mut checked = 0;
    for h in 0..=u16::MAX {
        if (h as u32 & 0x7fff) >= inf {
            continue; // inf and NaN: below
        }
        let v = value_bits(fmt, h);
        let ulp16 = 1u32 << (23 - fmt.man);
        // The tie towards the next pattern away from zero (past the largest finite
        // value, towards 2^(emax+1): the overflow tie).
        let tie = if fmt.man == 10 && (h & 0x7c00) == 0 {
            // f16 subnormals lie in several f32 binades: halfway by value (exact).
            let next = f32::from_bits(value_bits(fmt, h + 1) & 0x7fff_ffff);
            let mag = f32::from_bits(v & 0x7fff_ffff);
            (((mag as f64 + next as f64) / 2.0) as f32).to_bits() | (v & 0x8000_0000)
        } else {
            // Otherwise the next pattern is `ulp16` further in the f32 bits too.
            v + ulp16 / 2
        };
        for c in [v, tie] {
            let c = c as i64;
            for d in -4i64..=4 {
                let x = c + d;
                // Stay within this sign's magnitudes (below zero is the other sign).
                if (c & 0x7fff_ffff) + d >= 0 && (0..=u32::MAX as i64).contains(&x) {
                    check(dtype, x as u32);
                    checked += 1;
                }
            }
        }
    }
    checked
}

/// Every f32 with biased exponent in `exps`, both signs.
fn every_f32_of_exponents(dtype: DType, exps: impl IntoIterator<Item = u32>) -> u64 {
    let mut checked = 0;
    for e in exps {
        for sign in [0, 0x8000_0000u32] {
            for m in 0..1u32 << 23 {
                check(dtype, sign | e << 23 | m);
            }
            checked += 1 << 23;
        }
    }
    checked
}

#[test]
fn oracle_matches_hand_computed_values() {
    for (x, h) in [
        (1.0f32, 0x3c00u16),
        (-2.0, 0xc000),
        (65504.0, 0x7bff),        // largest finite f16
        (65519.996, 0x7bff),      // just below the overflow tie
        (65520.0, 0x7c00),        // the tie rounds to even: inf
        (6.103_515_6e-5, 0x0400), // 2^-14, smallest normal
        (5.960_464_5e-8, 0x0001), // 2^-24, smallest subnormal
        (2.980_232_2e-8, 0x0000), // 2^-25: the tie rounds to even, zero
        (2.980_232_6e-8, 0x0001), // just above it
        (8.940_697e-8, 0x0002),   // 1.5 * 2^-24: tie to even, 2
        (1.000_488_3, 0x3c00),    // 1 + 2^-11: tie to even
        (1.001_464_8, 0x3c02),    // 1 + 3 * 2^-11: tie to even (up)
        (f32::INFINITY, 0x7c00),
        (-0.0, 0x8000),
    ] {
        assert_eq!(rne(F16, x.to_bits()), h, "{x} -> f16");
    }
    for (x, b) in [
        (1.0f32, 0x3f80u16),
        (f32::from_bits(0x3f80_8000), 0x3f80), // tie to even (down)
        (f32::from_bits(0x3f81_8000), 0x3f82), // tie to even (up)
        (f32::from_bits(0x3f80_8001), 0x3f81),
        (f32::from_bits(0x7f7f_7fff), 0x7f7f), // below the overflow tie
        (f32::from_bits(0x7f7f_8000), 0x7f80), // the tie: inf
        (f32::from_bits(0x0000_8000), 0x0000), // subnormal tie to even
        (f32::from_bits(0x0001_8000), 0x0002),
        (f32::from_bits(0x007f_ffff), 0x0080), // largest subnormal up to min normal
        (f32::from_bits(0x7f80_0001), 0x7fc0), // signalling NaN: quiet
        (f32::from_bits(0xffa5_0000), 0xffe5), // payload kept, quiet bit set
    ] {
        assert_eq!(rne(BF16, x.to_bits()), b, "{:#x} -> bf16", x.to_bits());
    }
    assert_eq!(
        rne(F16, 0x7f80_2001),
        0x7e01,
        "signalling NaN to f16: quiet"
    );
    assert_eq!(
        rne(F16, 0xffd5_5555),
        0xfeaa,
        "f16 NaN payload: top 10 bits"
    );
}

#[test]
fn f16_store_rounds_every_result_pattern_and_tie() {
    // 63488 finite patterns, 18 probes each, less the 8 below zero.
    assert_eq!(every_pattern_and_tie(DType::F16, F16), 63_488 * 18 - 8);
}

#[test]
fn bf16_store_and_formula_round_every_result_pattern_and_tie() {
    // 65280 finite patterns, 18 probes each, less the 8 below zero.
    assert_eq!(every_pattern_and_tie(DType::BF16, BF16), 65_280 * 18 - 8);
}

/// Exhaustive where f16 results change regime: f32 values that round to zero or to
/// the smallest subnormal (2^-26 .. 2^-24), the subnormal / normal edge (2^-15 ..
/// 2^-14), 1.0 and the overflow to inf (2^15 .. 2^16).
#[test]
fn f16_store_is_exact_over_every_f32_of_the_edge_exponents() {
    let n = every_f32_of_exponents(DType::F16, [0, 1, 100, 101, 102, 103, 111, 112, 113, 127])
        + every_f32_of_exponents(DType::F16, [142, 143, 144, 254]);
    assert_eq!(n, 14 * (2 << 23));
}

/// Exhaustive where bf16 results change regime: f32 subnormals and the smallest
/// normals, 1.0 and the largest finite values (overflow to inf).
#[test]
fn bf16_store_is_exact_over_every_f32_of_the_edge_exponents() {
    let n = every_f32_of_exponents(DType::BF16, [0, 1, 2, 127, 253, 254]);
    assert_eq!(n, 6 * (2 << 23));
}

/// Every infinity and NaN of f32 (both signs, every payload) into f16 and bf16.
#[test]
fn every_inf_and_nan_payload_converts_exactly() {
    for dtype in [DType::F16, DType::BF16] {
        assert_eq!(every_f32_of_exponents(dtype, [255]), 2 << 23);
    }
}

#[test]
fn f32_store_quiets_nan_and_keeps_everything_else() {
    for b in [
        0u32,
        0x8000_0000,
        1,
        0x8000_0001,
        0x7f7f_ffff,
        0x7f80_0000,
        0xff80_0000,
        0x3f80_0000,
    ] {
        let mut buf = [0u8; 4];
        store_f32(DType::F32, &mut buf, 0, f32::from_bits(b));
        assert_eq!(u32::from_le_bytes(buf), b);
    }
    for (nan, quiet) in [
        (0x7f80_0001u32, 0x7fc0_0001u32),
        (0xff80_0002, 0xffc0_0002),
        (0x7fc0_0000, 0x7fc0_0000),
    ] {
        let mut buf = [0u8; 4];
        store_f32(DType::F32, &mut buf, 0, f32::from_bits(nan));
        assert_eq!(u32::from_le_bytes(buf), quiet);
        assert_eq!(quiet_f32(f32::from_bits(nan)).to_bits(), quiet);
    }
}
