//! Exhaustive check of dq's f32 -> f16 / bf16 step against `half`: for every 16-bit
//! result pattern, the f32 value at that pattern, its f32 neighbours, and the
//! rounding tie towards the next pattern with its neighbours.

use dq::DType;
use dq::convert::{f32_to_bf16_bits, quiet_f32, store_f32};
use half::{bf16, f16};

/// The f32 inputs that probe result pattern `h` whose exact value is `v` and whose
/// next pattern away from zero has value `next`.
fn probes(v: f32, next: f32) -> Vec<f32> {
    let mut out = Vec::with_capacity(7);
    let b = v.to_bits();
    out.push(v);
    out.push(f32::from_bits(b.wrapping_add(1)));
    if b & 0x7fff_ffff != 0 {
        out.push(f32::from_bits(b - 1));
    }
    if next.is_finite() && v.is_finite() {
        // The midpoint of two 16-bit values is exact in f32.
        let tie = ((v as f64 + next as f64) / 2.0) as f32;
        out.push(tie);
        out.push(f32::from_bits(tie.to_bits() + 1));
        out.push(f32::from_bits(tie.to_bits() - 1));
    }
    out
}

fn store(dtype: DType, y: f32) -> u16 {
    let mut buf = [0u8; 2];
    store_f32(dtype, &mut buf, 0, y);
    u16::from_le_bytes(buf)
}

#[test]
fn f16_store_matches_half_for_every_result_pattern() {
    let mut checked = 0u64;
    for h in 0..=u16::MAX {
        let v = f16::from_bits(h).to_f32();
        let next = match h & 0x7fff {
            // Past the largest finite value, the next step would be 2^16.
            0x7bff => 65536.0f32.copysign(v),
            m if m < 0x7bff => f16::from_bits(h + 1).to_f32(),
            _ => f32::NAN,
        };
        for y in probes(v, next) {
            let want = f16::from_f32(y).to_bits();
            let got = store(DType::F16, y);
            assert_eq!(got, want, "f32 {:#010x} -> f16", y.to_bits());
            // An independent path: one rounding from the exact f64.
            assert_eq!(
                got,
                f16::from_f64(y as f64).to_bits(),
                "f64 path {:#010x}",
                y.to_bits()
            );
            if y.is_nan() {
                assert!(f16::from_bits(got).is_nan() && got & 0x0200 != 0);
            }
            checked += 1;
        }
    }
    assert!(checked >= 380_000, "{checked} probes");
}

#[test]
fn bf16_store_and_integer_formula_match_half_for_every_result_pattern() {
    let mut checked = 0u64;
    for h in 0..=u16::MAX {
        let v = f32::from_bits((h as u32) << 16);
        let next = if (h & 0x7fff) < 0x7f7f {
            f32::from_bits(((h as u32) + 1) << 16)
        } else if h & 0x7fff == 0x7f7f {
            // Past the largest finite bf16, the next step is 2^128 (not an f32): use the
            // f32 tie pattern directly.
            f32::INFINITY
        } else {
            f32::NAN
        };
        let mut ys = probes(v, next);
        if h & 0x7fff == 0x7f7f {
            // Tie at the top: 0x7f7f8000 rounds to inf; 0x7f7f7fff stays finite.
            let t = ((h as u32) << 16) | 0x8000;
            ys.extend([
                f32::from_bits(t),
                f32::from_bits(t - 1),
                f32::from_bits(t + 1),
            ]);
        }
        // (No second path through `bf16::from_f64` here: half 2.7's f64 -> bf16
        // misrounds f32-subnormal inputs, e.g. 0x00208001 gives 0x0020, not 0x0021.)
        for y in ys {
            let want = bf16::from_f32(y).to_bits();
            assert_eq!(store(DType::BF16, y), want, "store {:#010x}", y.to_bits());
            assert_eq!(f32_to_bf16_bits(y), want, "formula {:#010x}", y.to_bits());
            if y.is_nan() {
                assert!(bf16::from_bits(want).is_nan() && want & 0x0040 != 0);
            }
            checked += 1;
        }
    }
    assert!(checked >= 380_000, "{checked} probes");
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
