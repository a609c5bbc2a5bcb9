//! The `generated` backend: the spec's formula `(q - z) * s` (SPEC §5),
//! declared with `#[dequant_kernel]` for every combination the three ops allow;
//! with a float src (SPEC §10) `q` is its value and `z` is 0, so it is `q * s`.

use crate::dequant_kernel;

#[dequant_kernel(
    // DynamicDequantize, scales of the dst dtype or e8m0 (SPEC §10).
    src = [s8, u8, s4, u4], zps = [none, s4, u4, s8, u8, s32], dst = [f32, f16, bf16],
        scales = [dst, e8m0];
    src = [f8_e4m3, f8_e5m2, f4_e2m1], zps = [none], dst = [f32, f16, bf16],
        scales = [dst, e8m0];
    // Static Dequantize: zero points beyond i32 are held as s64.
    src = [s8, u8], zps = [s64], dst = [f32];
    // Axes form: zero points of the src dtype, f64 dst, s32 src.
    src = [s8], zps = [s8], dst = [f64];
    src = [u8], zps = [u8], dst = [f64];
    src = [s32], zps = [s32], dst = [f16, bf16, f32, f64]
)]
/// The spec's standard kernel, for every (src, zps, dst, scales) combination.
pub fn standard(q: _, z: int, s: float) {
    (q - z) * s
}
