//! F32, F16 and BF16 tensors: not block declarations but direct conversions
//! (element-wise, vectorizing loops), in gguf-py's bits, then rounded to the
//! output element.

use super::{BlockOut, Decode};
use crate::convert::f16_to_f32;

/// F32: the bits as stored.
pub struct F32;
/// F16: gguf-py's widening (a NaN keeps its payload and signalling bit).
pub struct F16;
/// BF16: the bits shifted into the high half.
pub struct Bf16;

/// Longest piece converted at a time (a stack buffer of f32s).
const PIECE: usize = super::MAX_RUN;

/// `out[i] = widen(bytes' i-th N-byte element)`, rounded to `O`.
#[inline(always)]
fn convert<O: BlockOut, const V: u8, const N: usize>(
    bytes: &[u8],
    out: &mut [O],
    widen: impl Fn([u8; N]) -> f32,
) {
    let mut vals = [0f32; PIECE];
    for (o, b) in out.chunks_mut(PIECE).zip(bytes.chunks(PIECE * N)) {
        let vals = &mut vals[..o.len()];
        for (y, b) in vals.iter_mut().zip(b.as_chunks::<N>().0) {
            *y = widen(*b);
        }
        O::put::<V>(o, vals, false);
    }
}

impl Decode for F32 {
    #[inline(always)]
    fn decode<O: BlockOut, const V: u8>(bytes: &[u8], out: &mut [O]) {
        convert::<O, V, 4>(bytes, out, f32::from_le_bytes);
    }
}

impl Decode for F16 {
    #[inline(always)]
    fn decode<O: BlockOut, const V: u8>(bytes: &[u8], out: &mut [O]) {
        convert::<O, V, 2>(bytes, out, |b| f16_to_f32(u16::from_le_bytes(b)));
    }
}

impl Decode for Bf16 {
    #[inline(always)]
    fn decode<O: BlockOut, const V: u8>(bytes: &[u8], out: &mut [O]) {
        convert::<O, V, 2>(bytes, out, |b| {
            f32::from_bits(u32::from(u16::from_le_bytes(b)) << 16)
        });
    }
}
