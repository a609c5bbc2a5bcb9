//! Output elements of the format decoders (f32, f16, bf16) and the thread split
//! shared by [`Gguf::dequantize`](super::gguf::Gguf::dequantize) and
//! [`QuantLinear::dequantize`](super::hf::QuantLinear::dequantize): the runtime's
//! executor ([`dq_runtime::exec::fill_parallel`]), so a tensor too small to pay
//! for a thread's wake-up runs on the caller's thread alone.

use std::ops::Range;

use dq_runtime::policy::{self, StoreStrategy};
use dq_runtime::{DType, exec};
use half::{bf16, f16};

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
}

/// An element a decoder writes: f32 (the contract value itself), or f16/bf16 (its
/// round-to-nearest-even).
pub trait Element:
    Copy
    + Default
    + Send
    + Sync
    + bytemuck::Pod
    + dq_runtime::linear::Out
    + dq_runtime::block::BlockOut
    + sealed::Sealed
{
    /// The dq dtype of this element.
    const DTYPE: DType;

    /// `y` rounded to this type, nearest-even (f32: `y`, bits unchanged).
    fn from_f32(y: f32) -> Self;

    /// `out` as f32s when `Self` is f32 (decoders then write in place).
    fn as_f32_mut(out: &mut [Self]) -> Option<&mut [f32]>;

    /// `out[i] = from_f32(y[i])` for equal lengths, vectorized where the CPU
    /// allows (the same bits); by non-temporal stores when `stream`.
    fn from_f32s(out: &mut [Self], y: &[f32], stream: bool);
}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
    fn from_f32(y: f32) -> Self {
        y
    }
    fn as_f32_mut(out: &mut [Self]) -> Option<&mut [f32]> {
        Some(out)
    }
    fn from_f32s(out: &mut [Self], y: &[f32], _: bool) {
        out.copy_from_slice(y);
    }
}

impl Element for f16 {
    const DTYPE: DType = DType::F16;
    fn from_f32(y: f32) -> Self {
        f16::from_f32(y)
    }
    fn as_f32_mut(_: &mut [Self]) -> Option<&mut [f32]> {
        None
    }
    fn from_f32s(out: &mut [Self], y: &[f32], stream: bool) {
        let out = bytemuck::cast_slice_mut(out);
        if stream {
            dq_runtime::arch::narrow_stream(out, y, false);
        } else {
            dq_runtime::arch::narrow_f16(out, y);
        }
    }
}

impl Element for bf16 {
    const DTYPE: DType = DType::BF16;
    fn from_f32(y: f32) -> Self {
        bf16::from_f32(y)
    }
    fn as_f32_mut(_: &mut [Self]) -> Option<&mut [f32]> {
        None
    }
    fn from_f32s(out: &mut [Self], y: &[f32], stream: bool) {
        let out = bytemuck::cast_slice_mut(out);
        if stream {
            dq_runtime::arch::narrow_stream(out, y, true);
        } else {
            dq_runtime::arch::narrow_bf16(out, y);
        }
    }
}

/// f32 elements decoded at a time before a 16-bit output converts them.
const PIECE: usize = 1 << 12;

/// Decodes `units` units of `per_unit` elements each into `out` on up to `threads`
/// threads (0 is taken as 1). `decode(units, buf)` writes the f32 values of a range
/// of units into `buf` (its element count); each element is decoded once, by one
/// thread, so the bits do not depend on the thread count.
pub(crate) fn split<T: Element>(
    out: &mut [T],
    per_unit: usize,
    threads: usize,
    decode: &(dyn Fn(Range<usize>, &mut [f32]) + Sync),
) {
    let fill = |first: usize, part: &mut [T]| run(part, first, per_unit, decode);
    exec::fill_parallel(out, per_unit, threads, &fill);
}

/// Like [`split`], for a decoder that writes `T` itself: `decode(units, out)` fills
/// the `T`s of a range of units.
pub(crate) fn split_direct<T: Element>(
    out: &mut [T],
    per_unit: usize,
    threads: usize,
    decode: &(dyn Fn(Range<usize>, &mut [T]) + Sync),
) {
    let fill = |first: usize, part: &mut [T]| decode(first..first + part.len() / per_unit, part);
    exec::fill_parallel(out, per_unit, threads, &fill);
}

/// Makes this thread store plainly until the guard drops, whatever the strategy
/// for the output (`DQ_STORE` or the call's tuning) says: for decoding into an f32
/// scratch buffer that is read back at once (non-temporal stores would send it to
/// memory and back).
pub(crate) fn scratch() -> policy::Entered {
    policy::Tuning::current()
        .with_store(StoreStrategy::Plain)
        .enter()
}

/// Decodes the units of `out` (the first is unit `first`) on this thread: in place
/// for f32, through a small f32 buffer otherwise, its conversions stored
/// non-temporally where the store strategy for `out` says so (as the f32
/// decoders' own stores do).
fn run<T: Element>(
    out: &mut [T],
    first: usize,
    per_unit: usize,
    decode: &(dyn Fn(Range<usize>, &mut [f32]) + Sync),
) {
    let units = out.len() / per_unit;
    if let Some(f) = T::as_f32_mut(out) {
        return decode(first..first + units, f);
    }
    let stream = policy::store_for(size_of_val(out)) == StoreStrategy::NonTemporal;
    let step = (PIECE / per_unit).max(1);
    let mut buf = vec![0f32; step.min(units) * per_unit];
    let _plain = scratch();
    for (i, chunk) in out.chunks_mut(step * per_unit).enumerate() {
        let start = first + i * step;
        let n = chunk.len() / per_unit;
        let buf = &mut buf[..chunk.len()];
        decode(start..start + n, buf);
        T::from_f32s(chunk, buf, stream);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unit `u`'s elements are `u * 1000 + j`: every element lands where it belongs,
    /// for any thread count, split or not (forced: these outputs are too small to
    /// split on their own), and 16-bit outputs are the rounded values.
    #[test]
    fn every_unit_is_decoded_into_its_place() {
        decode_every_unit();
        dq_runtime::policy::Tuning::new()
            .with_split()
            .scope(decode_every_unit);
    }

    fn decode_every_unit() {
        let decode = |units: Range<usize>, buf: &mut [f32]| {
            let per = buf.len() / units.len();
            for (i, u) in units.enumerate() {
                for j in 0..per {
                    buf[i * per + j] = (u * 1000 + j) as f32 + 0.25;
                }
            }
        };
        for threads in [0, 1, 2, 3, 7, 100] {
            let mut out = vec![0f32; 7 * 5];
            split(&mut out, 5, threads, &decode);
            let want: Vec<f32> = (0..7)
                .flat_map(|u| (0..5).map(move |j| (u * 1000 + j) as f32 + 0.25))
                .collect();
            assert_eq!(out, want, "{threads} threads");
            let mut out16 = vec![f16::ZERO; 7 * 5];
            split(&mut out16, 5, threads, &decode);
            let want16: Vec<f16> = want.iter().map(|&y| f16::from_f32(y)).collect();
            assert_eq!(out16, want16, "{threads} threads, f16");
        }
    }

    /// 16-bit outputs by every store strategy (non-temporal ones through the
    /// streamed conversion) are `half`'s roundings of every kind of value,
    /// at an odd offset too.
    #[test]
    fn sixteen_bit_outputs_round_as_half_under_every_store() {
        let specials = [
            0.0f32,
            -0.0,
            1.0,
            f32::INFINITY,
            f32::NAN,
            -f32::NAN,
            1e-40,
            65520.0,
        ];
        let value = |i: usize| match i % 11 {
            0..8 => specials[i % 11],
            _ => f32::from_bits((i as u32).wrapping_mul(0x9e37_79b9)),
        };
        let decode = |r: Range<usize>, buf: &mut [f32]| {
            for (i, u) in r.enumerate() {
                buf[i] = value(u);
            }
        };
        let n = 3 * PIECE + 7;
        for store in StoreStrategy::ALL {
            let t = dq_runtime::policy::Tuning::new().with_store(store);
            let mut bf = vec![bf16::ZERO; n + 1];
            let mut h = vec![f16::ZERO; n + 1];
            t.scope(|| {
                split(&mut bf[1..], 1, 2, &decode);
                split(&mut h[1..], 1, 1, &decode);
            });
            for i in 0..n {
                let y = value(i);
                assert_eq!(
                    bf[1 + i].to_bits(),
                    bf16::from_f32(y).to_bits(),
                    "{store:?} {i}"
                );
                assert_eq!(
                    h[1 + i].to_bits(),
                    f16::from_f32(y).to_bits(),
                    "{store:?} {i}"
                );
            }
        }
    }

    #[test]
    fn pieces_cover_long_outputs() {
        let units = PIECE / 3 + 5;
        let decode = |r: Range<usize>, buf: &mut [f32]| {
            for (i, u) in r.enumerate() {
                buf[3 * i..3 * i + 3].fill(u as f32);
            }
        };
        let mut out = vec![bf16::ZERO; units * 3];
        split(&mut out, 3, 2, &decode);
        for (i, y) in out.iter().enumerate() {
            assert_eq!(*y, bf16::from_f32((i / 3) as f32), "element {i}");
        }
    }
}
