//! The output elements the block kernels write: f32 (the contract value, bits as
//! computed), f16 and bf16 (its round-to-nearest-even, NaN quieted, as `half`
//! rounds). A 16-bit output is rounded from the run's f32 values while they are in
//! registers: no f32 scratch buffer, half the bytes stored.

use half::{bf16, f16};

use super::{BlockKernel, Fns, form};
use crate::convert::{f32_to_bf16_bits, f32_to_f16_bits};

/// The vectors a kernel body rounds with (its `V` parameter), one per entry point.
pub mod vectors {
    /// Scalar code (any CPU).
    pub const PORTABLE: u8 = 0;
    /// AVX2 and F16C: 8 lanes.
    pub const AVX2: u8 = 1;
    /// AVX-512 F/BW/VL/DQ: 16 lanes (and AVX512-BF16's conversion where present).
    pub const AVX512: u8 = 2;
}

/// An element a block kernel writes: f32, f16 or bf16 (sealed, as
/// [`Out`](crate::linear::Out) is).
pub trait BlockOut: crate::linear::Out + 'static {
    /// `out = vals` rounded to this type (equal lengths, at most
    /// [`MAX_RUN`](super::MAX_RUN)), by non-temporal 16-byte stores when `nt` (the
    /// caller checked that `out` starts 16-byte aligned and is whole 16-byte
    /// vectors). `V`: the vectors the caller may use ([`vectors`]; the CPU has
    /// them).
    fn put<const V: u8>(out: &mut [Self], vals: &[f32], nt: bool);

    /// This element's compiled forms of kernel `k`.
    #[doc(hidden)]
    fn forms(k: &BlockKernel) -> &[Fns<Self>; form::COUNT];
}

impl BlockOut for f32 {
    #[inline(always)]
    fn put<const V: u8>(out: &mut [f32], vals: &[f32], nt: bool) {
        if nt {
            stream(bytemuck::cast_slice_mut(out), bytemuck::cast_slice(vals));
        } else {
            out.copy_from_slice(vals);
        }
    }

    fn forms(k: &BlockKernel) -> &[Fns<f32>; form::COUNT] {
        &k.f32
    }
}

impl BlockOut for bf16 {
    #[inline(always)]
    fn put<const V: u8>(out: &mut [bf16], vals: &[f32], nt: bool) {
        let mut bits = [0u16; super::MAX_RUN];
        let bits = &mut bits[..vals.len()];
        let done = round16::<V>(bits, vals, false);
        for (b, &y) in bits[done..].iter_mut().zip(&vals[done..]) {
            *b = f32_to_bf16_bits(y);
        }
        put_bits(bytemuck::cast_slice_mut(out), bits, nt);
    }

    fn forms(k: &BlockKernel) -> &[Fns<bf16>; form::COUNT] {
        &k.bf16
    }
}

impl BlockOut for f16 {
    #[inline(always)]
    fn put<const V: u8>(out: &mut [f16], vals: &[f32], nt: bool) {
        let mut bits = [0u16; super::MAX_RUN];
        let bits = &mut bits[..vals.len()];
        let done = round16::<V>(bits, vals, true);
        for (b, &y) in bits[done..].iter_mut().zip(&vals[done..]) {
            *b = f32_to_f16_bits(y);
        }
        put_bits(bytemuck::cast_slice_mut(out), bits, nt);
    }

    fn forms(k: &BlockKernel) -> &[Fns<f16>; form::COUNT] {
        &k.f16
    }
}

/// Rounds the whole vectors of `vals` into `bits` with the vectors of `V`: to f16
/// (`f16`) or bf16, the same bits as [`f32_to_f16_bits`] and
/// [`f32_to_bf16_bits`]; returns how many it did (the rest is the caller's).
/// Explicit vectors: LLVM left the scalar bf16 rounding (a NaN branch)
/// unvectorized inside the block driver, and the whole run with it.
#[inline(always)]
fn round16<const V: u8>(bits: &mut [u16], vals: &[f32], f16: bool) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::arch::Simd;
        use crate::arch::x86_64::{Avx2, Avx512};
        let n = vals.len();
        if V == vectors::AVX512 {
            // SAFETY: `V` is AVX512 only in the AVX-512 entry points, which run
            // after detection found AVX-512 F/BW/VL/DQ, AVX2 and F16C.
            let v = unsafe { Avx512::new_unchecked() };
            let whole = n - n % 16;
            for (b, y) in bits[..whole].chunks_mut(32).zip(vals.chunks(32)) {
                // SAFETY: `y` is 16 or 32 readable f32s and `b` as many writable
                // u16s (`whole` is a multiple of 16).
                unsafe {
                    let lo = v.load_f32(y.as_ptr().cast());
                    let (p, two) = (b.as_mut_ptr().cast::<u8>(), y.len() == 32);
                    let hi = if two {
                        v.load_f32(y.as_ptr().add(16).cast())
                    } else {
                        lo
                    };
                    match (f16, two) {
                        (true, _) => {
                            v.store_f16(p, lo);
                            if two {
                                v.store_f16(p.add(32), hi);
                            }
                        }
                        // AVX512-BF16's conversion where the CPU has it.
                        (false, true) => v.store_bf16x2(p, lo, hi),
                        (false, false) => {
                            use core::arch::x86_64::{_mm256_storeu_si256, _mm512_castsi512_si256};
                            // Both halves of the pair are `lo`: keep the low one.
                            let t = v.tab16_bf16(lo, lo);
                            _mm256_storeu_si256(p.cast(), _mm512_castsi512_si256(t));
                        }
                    }
                }
            }
            // The AVX2 code for a run of 8 (grid rows, e.g. IQ2_XXS).
            return whole + round16::<{ vectors::AVX2 }>(&mut bits[whole..], &vals[whole..], f16);
        }
        if V == vectors::AVX2 {
            // SAFETY: `V` is AVX2 only in the AVX2 entry points and in the AVX-512
            // code above, which run after detection found AVX2 and F16C.
            let v = unsafe { Avx2::new_unchecked() };
            let whole = n - n % 8;
            for (b, y) in bits[..whole].chunks_exact_mut(8).zip(vals.chunks_exact(8)) {
                // SAFETY: `y` is 8 readable f32s and `b` 8 writable u16s.
                unsafe {
                    let y = v.load_f32(y.as_ptr().cast());
                    if f16 {
                        v.store_f16(b.as_mut_ptr().cast(), y);
                    } else {
                        v.store_bf16(b.as_mut_ptr().cast(), y);
                    }
                }
            }
            return whole;
        }
    }
    let _ = (bits, vals, f16);
    0
}

/// `out = bits`, by non-temporal stores when `nt`.
#[inline(always)]
fn put_bits(out: &mut [u16], bits: &[u16], nt: bool) {
    if nt {
        stream(bytemuck::cast_slice_mut(out), bytemuck::cast_slice(bits));
    } else {
        out.copy_from_slice(bits);
    }
}

/// `out = src` by non-temporal 16-byte stores (the caller checked that `out`
/// starts 16-byte aligned and both are whole 16-byte vectors of equal length).
#[inline(always)]
fn stream(out: &mut [u8], src: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for (o, s) in out.chunks_exact_mut(16).zip(src.chunks_exact(16)) {
        use core::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        // SAFETY: `o` is 16 writable bytes at a 16-byte aligned address (the
        // caller: `out` starts aligned and is whole 16-byte vectors); `s` is 16
        // readable bytes; SSE2 is baseline on x86-64.
        unsafe {
            let v = _mm_loadu_si128(s.as_ptr().cast::<__m128i>());
            _mm_stream_si128(o.as_mut_ptr().cast::<__m128i>(), v);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    out.copy_from_slice(src);
}
