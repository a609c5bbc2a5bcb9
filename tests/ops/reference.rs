//! The scalar reference against hand-computed values (SPEC §5). Expected values
//! are written as the f32 (or f64) expressions the spec prescribes, or as bit patterns
//! worked out by hand in the comments.

use dq::kernel::Reference;
use dq::{
    AxesDequantize, DType, Dequantize, DynamicDequantize, Op, Options, Plan, Tensor, TensorDesc,
    TensorMut,
};
use half::{bf16, f16};

/// Runs the reference (one thread, whole range) and returns the dst bytes.
fn reference(
    op: impl Into<Op>,
    src: &Tensor<'_>,
    scales: Option<&Tensor<'_>>,
    zps: Option<&Tensor<'_>>,
    dst: TensorDesc,
) -> Vec<u8> {
    let op = op.into();
    let mut out = vec![0u8; dst.required_bytes(dq::Role::Dst).unwrap()];
    let plan = Plan::new(
        &op,
        &src.desc,
        scales.map(|t| &t.desc),
        zps.map(|t| &t.desc),
        &dst,
    )
    .unwrap();
    let mut d = TensorMut {
        desc: dst,
        data: &mut out,
    };
    plan.bind(src, scales, zps, &mut d)
        .unwrap()
        .run(&Reference::default())
        .unwrap();
    out
}

fn f32s(b: &[u8]) -> Vec<u32> {
    b.chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn u16s(b: &[u8]) -> Vec<u16> {
    b.chunks(2)
        .map(|c| u16::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn f32_dst(shape: &[usize]) -> TensorDesc {
    TensorDesc::new(DType::F32, shape)
}

#[test]
fn u8_per_tensor_zero_point_10_scale_0_1() {
    let src = Tensor::from_slice(&[0u8, 10, 20, 30], &[4]);
    let want = bits(&[-10f32 * 0.1, 0.0, 10f32 * 0.1, 20f32 * 0.1]);
    // As f32 arithmetic gives: -1, 0, 1, 2 (0.1f32 * 10 rounds to exactly 1.0).
    assert_eq!(want, bits(&[-1.0, 0.0, 1.0, 2.0]));
    let scales = Tensor::from_slice(&[0.1f32], &[1]);
    let zps = Tensor::from_slice(&[10u8], &[1]);
    let got = reference(
        DynamicDequantize::per_tensor(),
        &src,
        Some(&scales),
        Some(&zps),
        f32_dst(&[4]),
    );
    assert_eq!(f32s(&got), want);
    // The static op with the same numbers as attributes.
    let op = Dequantize::new(vec![0.1]).zps(vec![10]);
    assert_eq!(f32s(&reference(op, &src, None, None, f32_dst(&[4]))), want);
}

#[test]
fn s8_per_channel_shape_1x2x2_axis_1() {
    let src = Tensor::from_slice(&[10i8, -20, 30, -40], &[1, 2, 2]);
    let scales = Tensor::from_slice(&[0.1f32, 0.2], &[2]);
    let want = bits(&[10f32 * 0.1, -20f32 * 0.1, 30f32 * 0.2, -40f32 * 0.2]);
    let got = reference(
        DynamicDequantize::per_channel(1),
        &src,
        Some(&scales),
        None,
        f32_dst(&[1, 2, 2]),
    );
    assert_eq!(f32s(&got), want);
    // Axis -2 is the same dimension; the static op agrees.
    let got = reference(
        DynamicDequantize::per_channel(-2),
        &src,
        Some(&scales),
        None,
        f32_dst(&[1, 2, 2]),
    );
    assert_eq!(f32s(&got), want);
    let op = Dequantize::new(vec![0.1, 0.2]).per_channel(1);
    assert_eq!(
        f32s(&reference(op, &src, None, None, f32_dst(&[1, 2, 2]))),
        want
    );
}

#[test]
fn per_group_with_remainder_groups() {
    // [2, 5] with groups [1, 2]: scales [2, ceil(5/2) = 3]; the last group of a row
    // holds one element.
    let src = Tensor::from_slice(&[1u8, 2, 3, 4, 5, 6, 7, 8, 9, 10], &[2, 5]);
    let scales = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 10.0, 20.0, 30.0], &[2, 3]);
    let zps = Tensor::from_slice(&[0u8, 1, 2, 3, 4, 5], &[2, 3]);
    let got = reference(
        DynamicDequantize::per_group(vec![1, 2]),
        &src,
        Some(&scales),
        Some(&zps),
        f32_dst(&[2, 5]),
    );
    let want = [
        1.0 * 1.0,
        2.0 * 1.0,
        (3.0 - 1.0) * 2.0,
        (4.0 - 1.0) * 2.0,
        (5.0 - 2.0) * 3.0,
        (6.0 - 3.0) * 10.0,
        (7.0 - 3.0) * 10.0,
        (8.0 - 4.0) * 20.0,
        (9.0 - 4.0) * 20.0,
        (10.0 - 5.0) * 30.0f32,
    ];
    assert_eq!(f32s(&got), bits(&want));
    // Groups along dim 0 with a remainder: [3, 2] groups [2, 1] -> scales [2, 2].
    let src = Tensor::from_slice(&[1i8, 1, 1, 1, 1, 1], &[3, 2]);
    let scales = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    let got = reference(
        DynamicDequantize::per_group(vec![2, 1]),
        &src,
        Some(&scales),
        None,
        f32_dst(&[3, 2]),
    );
    assert_eq!(f32s(&got), bits(&[1.0, 2.0, 1.0, 2.0, 3.0, 4.0]));
}

#[test]
fn four_bit_odd_counts_ignore_the_padding_nibble() {
    // Bytes 0x87, 0xaf: nibbles 7, 8, f and padding a (never data).
    let packed = [0x87u8, 0xaf];
    let s4 = Tensor::from_bytes(DType::S4, &[3], &packed);
    let u4 = Tensor::from_bytes(DType::U4, &[3], &packed);
    let scales = Tensor::from_slice(&[0.5f32], &[1]);
    let got = reference(
        DynamicDequantize::per_tensor(),
        &s4,
        Some(&scales),
        None,
        f32_dst(&[3]),
    );
    assert_eq!(f32s(&got), bits(&[3.5, -4.0, -0.5]));
    let got = reference(
        DynamicDequantize::per_tensor(),
        &u4,
        Some(&scales),
        None,
        f32_dst(&[3]),
    );
    assert_eq!(f32s(&got), bits(&[3.5, 4.0, 7.5]));
    // Per-channel 4-bit zero points, also odd with a non-zero padding nibble:
    // 0x21, 0xf3 -> zps 1, 2, 3 (padding f).
    let zps = Tensor::from_bytes(DType::S4, &[3], &[0x21, 0xf3]);
    let scales = Tensor::from_slice(&[1.0f32, 1.0, 1.0], &[3]);
    let got = reference(
        DynamicDequantize::per_channel(0),
        &s4,
        Some(&scales),
        Some(&zps),
        f32_dst(&[3]),
    );
    assert_eq!(f32s(&got), bits(&[6.0, -10.0, -4.0]));
    // A single 4-bit zero point in a 1-byte buffer whose high nibble is padding.
    let zp = Tensor::from_bytes(DType::U4, &[1], &[0xe2]);
    let got = reference(
        DynamicDequantize::per_tensor(),
        &u4,
        Some(&Tensor::from_slice(&[1.0f32], &[1])),
        Some(&zp),
        f32_dst(&[3]),
    );
    assert_eq!(f32s(&got), bits(&[5.0, 6.0, 13.0]));
}

#[test]
fn s32_zero_points_near_the_i32_limits_subtract_exactly() {
    // Dynamic: u8 255 - i32::MIN = 2^31 + 255, rounded once to f32: 2^31 + 256.
    let src = Tensor::from_slice(&[255u8, 0], &[2]);
    let scales = Tensor::from_slice(&[1.0f32, 1.0], &[2]);
    let zps = Tensor::from_slice(&[i32::MIN, i32::MAX], &[2]);
    let got = reference(
        DynamicDequantize::per_channel(0),
        &src,
        Some(&scales),
        Some(&zps),
        f32_dst(&[2]),
    );
    assert_eq!(f32s(&got), bits(&[2147483904.0, -2147483648.0]));
    // Axes form, s32 src: MAX - MIN = 2^32 - 1 leaves i32; no wrap-around (which would give -1).
    let src = Tensor::from_slice(&[i32::MAX, i32::MIN, 0], &[3]);
    let scales = Tensor::from_slice(&[1.0f32; 3], &[3]);
    let zps = Tensor::from_slice(&[i32::MIN, i32::MAX, i32::MIN], &[3]);
    let got = reference(
        AxesDequantize::new(vec![0]),
        &src,
        Some(&scales),
        Some(&zps),
        f32_dst(&[3]),
    );
    assert_eq!(
        f32s(&got),
        bits(&[4294967296.0, -4294967296.0, 2147483648.0])
    );
    // In f64 the difference is exact.
    let scales = Tensor::from_slice(&[1.0f64; 3], &[3]);
    let got = reference(
        AxesDequantize::new(vec![0]),
        &src,
        Some(&scales),
        Some(&zps),
        TensorDesc::new(DType::F64, &[3]),
    );
    let got: Vec<f64> = got
        .chunks(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, [4294967295.0, -4294967295.0, 2147483648.0]);
}

#[test]
fn static_s64_zero_points_beyond_i32() {
    let src = Tensor::from_slice(&[0u8, 255], &[2]);
    // 0 - 3e9 is exact in f32 (3e9 = 0xb2d05e00 has 23 significant bits).
    let op = Dequantize::new(vec![1.0, -1.0])
        .per_channel(0)
        .zps(vec![3_000_000_000, i64::MIN]);
    let got = reference(op, &src, None, None, f32_dst(&[2]));
    // 255 - i64::MIN = 2^63 + 255 (beyond i64 too), rounded to 2^63, times -1.
    assert_eq!(f32s(&got), bits(&[-3.0e9, -9.223372e18]));
    assert_eq!(f32::from_bits(f32s(&got)[1]), -(2f32.powi(63)));
    let op = Dequantize::new(vec![1.0]).zps(vec![i64::MAX]);
    let got = reference(op, &src, None, None, f32_dst(&[2]));
    assert_eq!(f32s(&got), bits(&[-(2f32.powi(63)), -(2f32.powi(63))]));
}

fn f16_scale(bits: u16) -> Vec<f16> {
    vec![f16::from_bits(bits)]
}

#[test]
fn f16_rounding_ties_go_to_even() {
    // s = 1 + 2^-10 (0x3c01). 3 * s = 3 + 1.5 * 2^-9: halfway between 0x4201 and
    // 0x4202 -> 0x4202 (even). s = 1 + 3 * 2^-10 (0x3c03): 3 * s = 3 + 4.5 * 2^-9,
    // halfway between 0x4204 and 0x4205 -> 0x4204 (even, down).
    for (s, want) in [(0x3c01u16, 0x4202u16), (0x3c03, 0x4204)] {
        let scales = f16_scale(s);
        let scales = Tensor::from_slice(&scales, &[1]);
        let src = Tensor::from_slice(&[3u8, 253], &[2]);
        let zps = Tensor::from_slice(&[0u8], &[1]);
        let got = reference(
            DynamicDequantize::per_tensor(),
            &src,
            Some(&scales),
            Some(&zps),
            TensorDesc::new(DType::F16, &[2]),
        );
        assert_eq!(u16s(&got)[0], want, "scale {s:#x}");
    }
}

#[test]
fn bf16_rounding_ties_go_to_even() {
    // s = 1 + 2^-7 (0x3f81). 3 * s = 0x40418000 in f32: halfway -> 0x4042 (even, up).
    // s = 1 + 3 * 2^-7 (0x3f83): 3 * s = 3 + 4.5 * 2^-6 -> 0x4044 (even, down).
    for (s, want) in [(0x3f81u16, 0x4042u16), (0x3f83, 0x4044)] {
        let scales = vec![bf16::from_bits(s)];
        let scales = Tensor::from_slice(&scales, &[1]);
        let src = Tensor::from_slice(&[3i8], &[1]);
        let got = reference(
            DynamicDequantize::per_tensor(),
            &src,
            Some(&scales),
            None,
            TensorDesc::new(DType::BF16, &[1]),
        );
        assert_eq!(u16s(&got), [want], "scale {s:#x}");
    }
}

#[test]
fn overflow_to_infinity() {
    // f16: 195 * 336 = 65520 is exactly halfway between 65504 (max, odd) and 2^16:
    // it rounds to +inf; 127 * 65504 overflows by far; -128 * 65504 gives -inf.
    let scales = vec![f16::from_f32(336.0)];
    let src = Tensor::from_slice(&[195u8], &[1]);
    let got = reference(
        DynamicDequantize::per_tensor(),
        &src,
        Some(&Tensor::from_slice(&scales, &[1])),
        None,
        TensorDesc::new(DType::F16, &[1]),
    );
    assert_eq!(u16s(&got), [0x7c00]);
    let scales = vec![f16::MAX];
    let src = Tensor::from_slice(&[127i8, -128], &[2]);
    let got = reference(
        DynamicDequantize::per_tensor(),
        &src,
        Some(&Tensor::from_slice(&scales, &[1])),
        None,
        TensorDesc::new(DType::F16, &[2]),
    );
    assert_eq!(u16s(&got), [0x7c00, 0xfc00]);
    // bf16: 2 * bf16::MAX overflows f32 already.
    let scales = vec![bf16::MAX];
    let src = Tensor::from_slice(&[2i8, -2], &[2]);
    let got = reference(
        DynamicDequantize::per_tensor(),
        &src,
        Some(&Tensor::from_slice(&scales, &[1])),
        None,
        TensorDesc::new(DType::BF16, &[2]),
    );
    assert_eq!(u16s(&got), [0x7f80, 0xff80]);
}

#[test]
fn subnormal_results_are_kept() {
    // f16: 3 * 2^-24 = 0x0003, -1 * 2^-24 = 0x8001.
    let scales = vec![f16::from_bits(1)];
    let src = Tensor::from_slice(&[3i8, -1], &[2]);
    let got = reference(
        DynamicDequantize::per_tensor(),
        &src,
        Some(&Tensor::from_slice(&scales, &[1])),
        None,
        TensorDesc::new(DType::F16, &[2]),
    );
    assert_eq!(u16s(&got), [0x0003, 0x8001]);
    // bf16: 3 * 2^-133 = 0x0003 (an f32 subnormal too).
    let scales = vec![bf16::from_bits(1)];
    let got = reference(
        DynamicDequantize::per_tensor(),
        &src,
        Some(&Tensor::from_slice(&scales, &[1])),
        None,
        TensorDesc::new(DType::BF16, &[2]),
    );
    assert_eq!(u16s(&got), [0x0003, 0x8001]);
    // f32: -5 * 2^-149.
    let scales = [f32::from_bits(1)];
    let src = Tensor::from_slice(&[-5i8], &[1]);
    let got = reference(
        DynamicDequantize::per_tensor(),
        &src,
        Some(&Tensor::from_slice(&scales, &[1])),
        None,
        f32_dst(&[1]),
    );
    assert_eq!(f32s(&got), [0x8000_0005]);
}

#[test]
fn nan_scales_propagate_quiet() {
    // A signalling NaN scale: the f32 multiply quiets it (0x7f800001 -> 0x7fc00001).
    let scales = [f32::from_bits(0x7f80_0001)];
    let src = Tensor::from_slice(&[3u8], &[1]);
    let got = reference(
        DynamicDequantize::per_tensor(),
        &src,
        Some(&Tensor::from_slice(&scales, &[1])),
        None,
        f32_dst(&[1]),
    );
    let y = f32s(&got)[0];
    assert!(f32::from_bits(y).is_nan() && y & 0x0040_0000 != 0, "{y:#x}");
    #[cfg(target_arch = "x86_64")]
    assert_eq!(y, 0x7fc0_0001);
    // f16 and bf16: NaN stays NaN with the quiet bit set.
    let scales = vec![f16::from_bits(0x7c01)];
    let got = reference(
        DynamicDequantize::per_tensor(),
        &src,
        Some(&Tensor::from_slice(&scales, &[1])),
        None,
        TensorDesc::new(DType::F16, &[1]),
    );
    let h = u16s(&got)[0];
    assert!(f16::from_bits(h).is_nan() && h & 0x0200 != 0, "{h:#x}");
    // x86-64: the scale widens to 0x7fc02000 (payload kept, quiet), the multiply
    // keeps that NaN, and step 5 keeps the top 10 payload bits with the quiet bit.
    #[cfg(target_arch = "x86_64")]
    assert_eq!(h, 0x7e01, "{h:#x}");
    let scales = vec![bf16::from_bits(0xff81)];
    let got = reference(
        DynamicDequantize::per_tensor(),
        &src,
        Some(&Tensor::from_slice(&scales, &[1])),
        None,
        TensorDesc::new(DType::BF16, &[1]),
    );
    let b = u16s(&got)[0];
    assert!(
        bf16::from_bits(b).is_nan() && b & 0x0040 != 0 && b & 0x8000 != 0,
        "{b:#x}"
    );
    // x86-64: 0xff810000 times 3 is 0xffc10000 (quieted, sign and payload kept).
    #[cfg(target_arch = "x86_64")]
    assert_eq!(b, 0xffc1, "{b:#x}");
    // inf * 0 (q == z): on x86-64 the negative default NaN.
    let scales = [f32::INFINITY];
    let zps = Tensor::from_slice(&[3u8], &[1]);
    let got = reference(
        DynamicDequantize::per_tensor(),
        &src,
        Some(&Tensor::from_slice(&scales, &[1])),
        Some(&zps),
        f32_dst(&[1]),
    );
    assert!(f32::from_bits(f32s(&got)[0]).is_nan());
    #[cfg(target_arch = "x86_64")]
    assert_eq!(f32s(&got), [0xffc0_0000]);
}

#[test]
fn negative_zero_results() {
    // q == z with a negative scale gives -0 in every dst type.
    let src = Tensor::from_slice(&[7u8, 0], &[2]);
    let zps = Tensor::from_slice(&[7u8, 0], &[2]);
    let s32 = [-1.0f32, -0.5];
    let got = reference(
        DynamicDequantize::per_channel(0),
        &src,
        Some(&Tensor::from_slice(&s32, &[2])),
        Some(&zps),
        f32_dst(&[2]),
    );
    assert_eq!(f32s(&got), [0x8000_0000, 0x8000_0000]);
    let s16 = [f16::from_f32(-1.0), f16::from_f32(-0.5)];
    let got = reference(
        DynamicDequantize::per_channel(0),
        &src,
        Some(&Tensor::from_slice(&s16, &[2])),
        Some(&zps),
        TensorDesc::new(DType::F16, &[2]),
    );
    assert_eq!(u16s(&got), [0x8000, 0x8000]);
    let sb = [bf16::from_f32(-1.0), bf16::from_f32(-0.5)];
    let got = reference(
        DynamicDequantize::per_channel(0),
        &src,
        Some(&Tensor::from_slice(&sb, &[2])),
        Some(&zps),
        TensorDesc::new(DType::BF16, &[2]),
    );
    assert_eq!(u16s(&got), [0x8000, 0x8000]);
    // A positive scale gives +0.
    let got = reference(
        DynamicDequantize::per_channel(0),
        &src,
        Some(&Tensor::from_slice(&[1.0f32, 2.0], &[2])),
        Some(&zps),
        f32_dst(&[2]),
    );
    assert_eq!(f32s(&got), [0, 0]);
}

#[test]
fn strided_src_transposed_last_two_dims() {
    // Physical [3, 2] row-major M = [[1, 2], [3, 4], [5, 6]]; the view [2, 3] with
    // strides [1, 2] is its transpose: [[1, 3, 5], [2, 4, 6]].
    let data = [1i8, 2, 3, 4, 5, 6];
    let src = Tensor::from_slice(&data, &[2, 3]).with_strides(&[1, 2]);
    let scales = Tensor::from_slice(&[1.0f32, 10.0], &[2]);
    let got = reference(
        DynamicDequantize::per_channel(0),
        &src,
        Some(&scales),
        None,
        f32_dst(&[2, 3]),
    );
    assert_eq!(f32s(&got), bits(&[1.0, 3.0, 5.0, 20.0, 40.0, 60.0]));
    // 4-bit: the nibble follows the physical offset. u4 [3, 2] = 1..6 packed.
    let packed = dq::dtype::pack_4bit(&[1, 2, 3, 4, 5, 6]);
    let src = Tensor::from_bytes(DType::U4, &[2, 3], &packed).with_strides(&[1, 2]);
    let got = reference(
        DynamicDequantize::per_channel(0),
        &src,
        Some(&scales),
        None,
        f32_dst(&[2, 3]),
    );
    assert_eq!(f32s(&got), bits(&[1.0, 3.0, 5.0, 20.0, 40.0, 60.0]));
    // Batched: [2, 2, 2] with the last two dims transposed.
    let data: Vec<i8> = (0..8).collect();
    let src = Tensor::from_slice(&data, &[2, 2, 2]).with_strides(&[4, 1, 2]);
    let one = Tensor::from_slice(&[1.0f32], &[1]);
    let got = reference(
        DynamicDequantize::per_tensor(),
        &src,
        Some(&one),
        None,
        f32_dst(&[2, 2, 2]),
    );
    assert_eq!(f32s(&got), bits(&[0.0, 2.0, 1.0, 3.0, 4.0, 6.0, 5.0, 7.0]));
}

#[test]
fn strided_dst_writes_only_its_elements() {
    // dst [2, 3] with strides [1, 2]: the buffer holds the transpose.
    let src = Tensor::from_slice(&[1i8, 2, 3, 4, 5, 6], &[2, 3]);
    let one = Tensor::from_slice(&[1.0f32], &[1]);
    let dst = f32_dst(&[2, 3]).with_strides(&[1, 2]);
    let got = reference(DynamicDequantize::per_tensor(), &src, Some(&one), None, dst);
    assert_eq!(f32s(&got), bits(&[1.0, 4.0, 2.0, 5.0, 3.0, 6.0]));
    // Gaps: strides [4, 1] leave elements 3 and 7 of the buffer alone.
    let plan = Plan::new(
        &DynamicDequantize::per_tensor().into(),
        &src.desc,
        Some(&one.desc),
        None,
        &f32_dst(&[2, 3]).with_strides(&[4, 1]),
    )
    .unwrap();
    let mut out = [f32::from_bits(0xdead_beef); 7];
    let mut d = TensorMut::from_slice(&mut out, &[2, 3]).with_strides(&[4, 1]);
    plan.bind(&src, Some(&one), None, &mut d)
        .unwrap()
        .run(&Reference::default())
        .unwrap();
    assert_eq!(
        bits(&out),
        [
            1.0f32.to_bits(),
            2.0f32.to_bits(),
            3.0f32.to_bits(),
            0xdead_beef,
            4.0f32.to_bits(),
            5.0f32.to_bits(),
            6.0f32.to_bits()
        ]
    );
}

#[test]
fn rank_zero_scalar() {
    let src = Tensor::from_slice(&[-3i8], &[]);
    let scales = Tensor::from_slice(&[0.5f32], &[]);
    let got = reference(
        DynamicDequantize::per_tensor(),
        &src,
        Some(&scales),
        None,
        f32_dst(&[]),
    );
    assert_eq!(f32s(&got), bits(&[-1.5]));
    let zps = Tensor::from_slice(&[-3i8], &[]);
    let s64 = Tensor::from_slice(&[0.5f64], &[]);
    let got = reference(
        AxesDequantize::new(vec![]),
        &src,
        Some(&s64),
        Some(&zps),
        TensorDesc::new(DType::F64, &[]),
    );
    assert_eq!(got, 0.0f64.to_le_bytes());
}

#[test]
fn zero_sized_dims_do_nothing() {
    for shape in [[0usize, 4], [3, 0]] {
        let src = Tensor::from_bytes(DType::U4, &shape, &[]);
        let scales = vec![1.0f32; shape[1]];
        let scales = Tensor::from_slice(&scales, &[shape[1]]);
        let plan = Plan::new(
            &DynamicDequantize::per_channel(1).into(),
            &src.desc,
            Some(&scales.desc),
            None,
            &f32_dst(&shape),
        )
        .unwrap();
        assert_eq!(plan.numel(), 0);
        let mut out: [u8; 0] = [];
        let mut d = TensorMut::from_bytes(DType::F32, &shape, &mut out);
        let mut job = plan.bind(&src, Some(&scales), None, &mut d).unwrap();
        job.run_parallel(&Reference::default(), 2).unwrap();
    }
    // Extra buffer space stays untouched.
    let src = Tensor::from_slice(&[0i8; 0], &[2, 0, 3]);
    let one = Tensor::from_slice(&[1.0f32], &[1]);
    let mut out = [0x5au8; 8];
    let mut d = TensorMut::from_bytes(DType::F32, &[2, 0, 3], &mut out);
    dq::dequantize(
        &DynamicDequantize::per_tensor().into(),
        &src,
        Some(&one),
        None,
        &mut d,
        &Options::default(),
    )
    .unwrap();
    assert_eq!(out, [0x5a; 8]);
}

#[test]
fn f64_dst_axes_form() {
    let src = Tensor::from_slice(&[10i32, 20, 30, -1, -2, -3], &[2, 3]);
    let scales = Tensor::from_slice(&[0.1f64, 0.2, 0.3], &[3]);
    let zps = Tensor::from_slice(&[1i32, 2, 3], &[3]);
    let got = reference(
        AxesDequantize::new(vec![1]),
        &src,
        Some(&scales),
        Some(&zps),
        TensorDesc::new(DType::F64, &[2, 3]),
    );
    let got: Vec<u64> = got
        .chunks(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let want: Vec<u64> = [
        9.0 * 0.1,
        18.0 * 0.2,
        27.0 * 0.3,
        -2.0 * 0.1,
        -4.0 * 0.2,
        -6.0 * 0.3f64,
    ]
    .iter()
    .map(|x| x.to_bits())
    .collect();
    assert_eq!(got, want);
    // f64 is not f32: 27 * 0.3 in f64 differs from the f32 product widened.
    assert_ne!(27.0 * 0.3f64, (27.0f32 * 0.3f32) as f64);
    // axes [0, 1] with u8: one scale per element.
    let src = Tensor::from_slice(&[5u8, 6], &[1, 2]);
    let scales = Tensor::from_slice(&[0.5f64, 0.25], &[1, 2]);
    let zps = Tensor::from_slice(&[1u8, 2], &[1, 2]);
    let got = reference(
        AxesDequantize::new(vec![1, 0]),
        &src,
        Some(&scales),
        Some(&zps),
        TensorDesc::new(DType::F64, &[1, 2]),
    );
    assert_eq!(got, [2.0f64.to_le_bytes(), 1.0f64.to_le_bytes()].concat());
}

#[test]
fn threads_and_sub_ranges_are_bit_identical() {
    // u4 -> bf16 per_group [1, 32] with remainder groups, big enough to be split.
    let (rows, cols) = (67usize, 1003usize);
    let n = rows * cols;
    let mut x = 0x1234_5678u32;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    };
    let src_bytes: Vec<u8> = (0..n.div_ceil(2)).map(|_| next() as u8).collect();
    let gcols = cols.div_ceil(32);
    let scales: Vec<bf16> = (0..rows * gcols)
        .map(|_| bf16::from_f32((next() % 1000) as f32 / 997.0 - 0.5))
        .collect();
    let zps_bytes: Vec<u8> = (0..(rows * gcols).div_ceil(2))
        .map(|_| next() as u8)
        .collect();
    let src = Tensor::from_bytes(DType::U4, &[rows, cols], &src_bytes);
    let st = Tensor::from_slice(&scales, &[rows, gcols]);
    let zt = Tensor::from_bytes(DType::U4, &[rows, gcols], &zps_bytes);
    let dst = TensorDesc::new(DType::BF16, &[rows, cols]);
    let op: Op = DynamicDequantize::per_group(vec![1, 32]).into();
    let plan = Plan::new(&op, &src.desc, Some(&st.desc), Some(&zt.desc), &dst).unwrap();
    let r = Reference::default();
    let run = |how: &dyn Fn(&mut dq::Job<'_>)| {
        let mut out = vec![0u8; n * 2];
        let mut d = TensorMut::from_bytes(DType::BF16, &[rows, cols], &mut out);
        how(&mut plan.bind(&src, Some(&st), Some(&zt), &mut d).unwrap());
        out
    };
    let one = run(&|j| j.run_parallel(&r, 1).unwrap());
    let two = run(&|j| j.run_parallel(&r, 2).unwrap());
    let three = run(&|j| j.run_parallel(&r, 3).unwrap());
    let pieces = run(&|j| {
        for range in [0..1, 1..12345, 12345..12346, 12346..40001, 40001..n] {
            j.run_range(&r, range).unwrap();
        }
    });
    let backwards = run(&|j| {
        for range in [40001..n, 12346..40001, 12345..12346, 1..12345, 0..1] {
            j.run_range(&r, range).unwrap();
        }
    });
    assert_eq!(one, two);
    assert_eq!(one, three);
    assert_eq!(one, pieces);
    assert_eq!(one, backwards);
    // Spot-check one element by hand: row 5, col 100 uses group 100 / 32 = 3.
    let (i, j) = (5usize, 100usize);
    let o = i * cols + j;
    let q = dq::dtype::nibble(&src_bytes, o) as i64;
    let z = dq::dtype::nibble(&zps_bytes, i * gcols + 3) as i64;
    let y = (q - z) as f32 * scales[i * gcols + 3].to_f32();
    assert_eq!(
        u16::from_le_bytes([one[2 * o], one[2 * o + 1]]),
        bf16::from_f32(y).to_bits()
    );
}
