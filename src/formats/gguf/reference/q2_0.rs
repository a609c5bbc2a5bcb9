//! The reference decoder of Q2_0 (ggml type 42), from ggml's C: gguf-py 0.19.0
//! does not know the type.

use super::f16_at;

/// Q2_0 (`d` f16, 16 bytes of 2-bit codes), ggml's `dequantize_row_q2_0`
/// (ggml-org/llama.cpp pull request 24448):
/// ```text
/// const float d = GGML_FP16_TO_FP32(x[i].d);
/// const int q = (x[i].qs[j / 4] >> ((j % 4) * 2)) & 0x03;
/// y[i*qk + j] = ((int)q - 1) * d;
/// ```
/// One f32 product of the integer `q - 1` and `d`: a NaN `d` is the result,
/// quieted, whatever the integer (as x86-64 multiplies; spelled out so that no
/// product by -1 becomes a negation, which would flip the NaN's sign).
pub(super) fn q2_0(b: &[u8; 18], y: &mut [f32; 64]) {
    let d = f16_at(b, 0);
    for (j, y) in y.iter_mut().enumerate() {
        let q = i32::from((b[2 + j / 4] >> ((j % 4) * 2)) & 3);
        *y = if d.is_nan() {
            f32::from_bits(d.to_bits() | 0x0040_0000)
        } else {
            (q - 1) as f32 * d
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_minus_one_to_two_times_d_low_crumb_first() {
        // d = 0.5; byte 2 = 0b11_10_01_00: elements 0..4 are codes 0, 1, 2, 3.
        let mut b = [0u8; 18];
        b[..2].copy_from_slice(&0x3800u16.to_le_bytes());
        b[2] = 0b1110_0100;
        b[17] = 0b1000_0000; // element 63: code 2
        let mut y = [f32::NAN; 64];
        q2_0(&b, &mut y);
        assert_eq!(y[..4], [-0.5, 0.0, 0.5, 1.0]);
        assert_eq!(y[4], -0.5);
        assert_eq!(y[63], 0.5);
    }
}
