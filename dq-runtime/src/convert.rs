//! Rounding the f32/f64 result into the dst dtype (SPEC §5, step 5).

use half::{bf16, f16};

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

/// Writes `y` (already the f32 result) as element `o` of a dst buffer of `dtype`.
///
/// # Panics
/// If `dtype` is not f32, f16 or bf16, or `o` is outside `buf`.
#[inline]
pub fn store_f32(dtype: DType, buf: &mut [u8], o: usize, y: f32) {
    match dtype {
        DType::F32 => buf[o * 4..o * 4 + 4].copy_from_slice(&quiet_f32(y).to_le_bytes()),
        DType::F16 => buf[o * 2..o * 2 + 2].copy_from_slice(&f16::from_f32(y).to_le_bytes()),
        DType::BF16 => buf[o * 2..o * 2 + 2].copy_from_slice(&bf16::from_f32(y).to_le_bytes()),
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
    fn nan_is_quieted() {
        let snan = f32::from_bits(0x7f80_0001);
        assert_eq!(quiet_f32(snan).to_bits(), 0x7fc0_0001);
        assert_eq!(f32_to_bf16_bits(f32::from_bits(0xff80_0001)), 0xffc0);
    }
}
