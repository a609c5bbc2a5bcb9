//! F32, F16 and BF16 tensors: not block declarations but direct conversions
//! (element-wise, vectorizing loops), in gguf-py's bits.

use super::Decode;
use crate::convert::f16_to_f32;

/// F32: the bits as stored.
pub struct F32;
/// F16: gguf-py's widening (a NaN keeps its payload and signalling bit).
pub struct F16;
/// BF16: the bits shifted into the high half.
pub struct Bf16;

impl Decode for F32 {
    #[inline(always)]
    fn decode(bytes: &[u8], out: &mut [f32]) {
        for (y, b) in out.iter_mut().zip(bytes.as_chunks::<4>().0) {
            *y = f32::from_le_bytes(*b);
        }
    }
}

impl Decode for F16 {
    #[inline(always)]
    fn decode(bytes: &[u8], out: &mut [f32]) {
        for (y, b) in out.iter_mut().zip(bytes.as_chunks::<2>().0) {
            *y = f16_to_f32(u16::from_le_bytes(*b));
        }
    }
}

impl Decode for Bf16 {
    #[inline(always)]
    fn decode(bytes: &[u8], out: &mut [f32]) {
        for (y, b) in out.iter_mut().zip(bytes.as_chunks::<2>().0) {
            *y = f32::from_bits(u32::from(u16::from_le_bytes(*b)) << 16);
        }
    }
}
