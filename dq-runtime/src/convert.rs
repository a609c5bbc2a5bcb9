//! Rounding the f32/f64 result into the dst dtype (SPEC §5, step 5), and f16
//! widened to f32: the scalar conversions every backend's vector code equals.

use half::f16;

use crate::dtype::DType;

/// An f32 with its quiet bit set if it is a NaN.
#[inline(always)]
pub fn quiet_f32(y: f32) -> f32 {
    if y.is_nan() {
        f32::from_bits(y.to_bits() | 0x0040_0000)
    } else {
        y
    }
}

/// An f64 with its quiet bit set if it is a NaN.
#[inline(always)]
pub fn quiet_f64(y: f64) -> f64 {
    if y.is_nan() {
        f64::from_bits(y.to_bits() | 0x0008_0000_0000_0000)
    } else {
        y
    }
}

/// f32 to bf16 bits: round-to-nearest-even, subnormals kept, NaN quieted.
///
/// The integer formula the vector kernels use; tested against `half` exhaustively.
#[inline(always)]
pub const fn f32_to_bf16_bits(y: f32) -> u16 {
    let x = y.to_bits();
    if (x & 0x7fff_ffff) > 0x7f80_0000 {
        return ((x >> 16) | 0x0040) as u16;
    }
    let lsb = (x >> 16) & 1;
    (x.wrapping_add(0x7fff + lsb) >> 16) as u16
}

/// f32 to f16 bits: round-to-nearest-even, subnormals kept, NaN quieted (as
/// F16C's `vcvtps2ph` rounds).
#[inline(always)]
pub fn f32_to_f16_bits(y: f32) -> u16 {
    f16::from_f32(y).to_bits()
}

/// f16 bits to f32, exactly; a NaN keeps its payload and its signalling bit
/// (gguf-py's `.astype(np.float32)`; [`quiet_f32`] of the result is F16C's and
/// `half`'s widening). Branch-free, so loops of it vectorize.
#[inline(always)]
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h & 0x8000) << 16;
    let em = u32::from(h & 0x7FFF);
    let normal = (em << 13) + ((127 - 15) << 23);
    let special = 0x7F80_0000 | ((em & 0x03FF) << 13);
    // Subnormal (and zero): em * 2^-24, exact in f32.
    let sub = (em as f32 * f32::from_bits(0x3380_0000)).to_bits();
    let bits = if em >= 0x7C00 {
        special
    } else if em >= 0x0400 {
        normal
    } else {
        sub
    };
    f32::from_bits(sign | bits)
}

/// Writes `y` (already the f32 result) as element `o` of a dst buffer of `dtype`.
///
/// # Panics
/// If `dtype` is not f32, f16 or bf16, or `o` is outside `buf`.
#[inline]
pub fn store_f32(dtype: DType, buf: &mut [u8], o: usize, y: f32) {
    match dtype {
        DType::F32 => buf[o * 4..o * 4 + 4].copy_from_slice(&quiet_f32(y).to_le_bytes()),
        DType::F16 => buf[o * 2..o * 2 + 2].copy_from_slice(&f32_to_f16_bits(y).to_le_bytes()),
        DType::BF16 => buf[o * 2..o * 2 + 2].copy_from_slice(&f32_to_bf16_bits(y).to_le_bytes()),
        _ => panic!("store_f32 into {dtype}"),
    }
}

/// Writes `y` as element `o` of an f64 dst buffer.
#[inline]
pub fn store_f64(buf: &mut [u8], o: usize, y: f64) {
    buf[o * 8..o * 8 + 8].copy_from_slice(&quiet_f64(y).to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::bf16;

    #[test]
    fn bf16_integer_formula_matches_half_near_every_result() {
        // Every bf16 result pattern: the value itself, its neighbours and the ties.
        for hi in 0..=u16::MAX as u32 {
            for lo in [0u32, 1, 0x7fff, 0x8000, 0x8001, 0xffff] {
                let y = f32::from_bits(hi << 16 | lo);
                assert_eq!(
                    f32_to_bf16_bits(y),
                    bf16::from_f32(y).to_bits(),
                    "{:#x}",
                    y.to_bits()
                );
            }
        }
    }

    #[test]
    fn f16_widening_keeps_every_value() {
        for h in 0..=u16::MAX {
            let want = f16::from_bits(h);
            let got = f16_to_f32(h);
            if want.is_nan() {
                let payload = u32::from(h & 0x3FF) << 13;
                let sign = u32::from(h & 0x8000) << 16;
                assert_eq!(got.to_bits(), sign | 0x7F80_0000 | payload, "{h:#06x}");
            } else {
                assert_eq!(got.to_bits(), want.to_f32().to_bits(), "{h:#06x}");
            }
        }
    }

    #[test]
    fn nan_is_quieted() {
        let snan = f32::from_bits(0x7f80_0001);
        assert_eq!(quiet_f32(snan).to_bits(), 0x7fc0_0001);
        assert_eq!(f32_to_bf16_bits(f32::from_bits(0xff80_0001)), 0xffc0);
    }
}
