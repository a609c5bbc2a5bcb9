//! Output elements of the linear driver: f32 (the value, NaNs quieted), f16 and
//! bf16 (its round-to-nearest-even), eight at a time.

use half::{bf16, f16};

use crate::convert::{f32_to_bf16_bits, f32_to_f16_bits, quiet_f32};

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
}

/// An element the linear driver writes: f32, f16 or bf16.
pub trait Out: Copy + Send + Sync + sealed::Sealed {
    /// This type as a [`DType`](crate::DType): F32, F16 or BF16.
    const OUT: crate::DType;

    /// `y` rounded to this type.
    fn of(y: f32) -> Self;

    /// `out` as 16-bit patterns (f16, bf16), `None` for f32.
    fn as_bits16(_out: &mut [Self]) -> Option<&mut [u16]> {
        None
    }

    /// The bit pattern of a 16-bit output (0 for f32, which never asks).
    fn bits16(self) -> u16 {
        0
    }

    /// `out[i] = f32(codes[i] - z) * s`, rounded. `F16C`: the caller runs with AVX2
    /// and F16C enabled (f16 then converts with `vcvtps2ph`).
    #[inline(always)]
    fn run<const F16C: bool>(codes: &[u8], z: i32, s: f32, out: &mut [Self]) {
        for (o, &q) in out.iter_mut().zip(codes) {
            *o = Self::of((i32::from(q) - z) as f32 * s);
        }
    }
}

impl Out for f32 {
    const OUT: crate::DType = crate::DType::F32;

    #[inline(always)]
    fn of(y: f32) -> Self {
        quiet_f32(y)
    }
}

impl Out for bf16 {
    const OUT: crate::DType = crate::DType::BF16;

    #[inline(always)]
    fn of(y: f32) -> Self {
        bf16::from_bits(f32_to_bf16_bits(y))
    }

    #[inline(always)]
    fn as_bits16(out: &mut [Self]) -> Option<&mut [u16]> {
        Some(bytemuck::cast_slice_mut(out))
    }

    #[inline(always)]
    fn bits16(self) -> u16 {
        self.to_bits()
    }
}

impl Out for f16 {
    const OUT: crate::DType = crate::DType::F16;

    #[inline(always)]
    fn of(y: f32) -> Self {
        f16::from_bits(f32_to_f16_bits(y))
    }

    #[inline(always)]
    fn as_bits16(out: &mut [Self]) -> Option<&mut [u16]> {
        Some(bytemuck::cast_slice_mut(out))
    }

    #[inline(always)]
    fn bits16(self) -> u16 {
        self.to_bits()
    }

    #[inline(always)]
    fn run<const F16C: bool>(codes: &[u8], z: i32, s: f32, out: &mut [Self]) {
        let n = out.len().min(codes.len());
        let (codes, out) = (&codes[..n], &mut out[..n]);
        #[cfg(target_arch = "x86_64")]
        let (codes, out) = if F16C {
            use crate::arch::Simd;
            // SAFETY: `F16C` is only set by the driver's AVX2/AVX-512 entry points,
            // which run after detection found AVX2 and F16C.
            let v = unsafe { crate::arch::x86_64::Avx2::new_unchecked() };
            let whole = n - n % 8;
            for (c, o) in codes[..whole]
                .chunks_exact(8)
                .zip(out[..whole].chunks_exact_mut(8))
            {
                let y: [f32; 8] = std::array::from_fn(|t| (i32::from(c[t]) - z) as f32 * s);
                // SAFETY: `y` is 8 f32s and `o` 8 f16s (16 bytes).
                unsafe { v.store_f16(o.as_mut_ptr().cast(), v.load_f32(y.as_ptr().cast())) }
            }
            (&codes[whole..], &mut out[whole..])
        } else {
            (codes, out)
        };
        for (o, &q) in out.iter_mut().zip(codes) {
            *o = Self::of((i32::from(q) - z) as f32 * s);
        }
    }
}
