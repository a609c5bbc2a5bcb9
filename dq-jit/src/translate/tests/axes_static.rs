//! The axes op (s32 src and f64 dst among them) and the static op (zero points
//! held by the plan, s64 ones included).

use dq_runtime::{AxesDequantize, DType, Dequantize, Op, STANDARD, TensorDesc};

use super::{Case, Rng, check, jits_for};
use crate::Jit;

/// The axes op: s8, u8 and s32 src (s32: scalar code only) to every dst, f64
/// included, over every axes set, dense and transposed.
#[test]
fn axes_op_every_dtype() {
    let mut r = Rng::new(3);
    let shape = [3, 4, 21];
    for src in [DType::S8, DType::U8, DType::S32] {
        for dst in [DType::F16, DType::BF16, DType::F32, DType::F64] {
            let jits = jits_for(dst, &STANDARD);
            for axes in [&[][..], &[0], &[2], &[0, 2], &[1, 2], &[0, 1, 2]] {
                let ss: Vec<usize> = axes.iter().map(|&a| shape[a]).collect();
                let c = Case {
                    op: AxesDequantize::new(axes.iter().map(|&a| a as i64).collect()).into(),
                    src: TensorDesc::new(src, &shape),
                    scales: Some(TensorDesc::new(dst, &ss)),
                    zps: Some(TensorDesc::new(src, &ss)),
                    dst: TensorDesc::new(dst, &shape),
                };
                for jit in &jits {
                    check(jit, &c, &mut r, 2);
                }
                check(&jits[0], &c.transposed(true, true), &mut r, 1);
            }
        }
    }
}

/// The static op's zero points (s32, or s64: 128-bit integer code), at the ends
/// of i32 and i64 and on both sides of the vector path's limit 2^22; special scales.
#[test]
fn static_op_extreme_zero_points() {
    let mut r = Rng::new(4);
    let jit = Jit::new(&STANDARD, 16);
    let zps_sets: [[i64; 3]; 7] = [
        [0, 0, 0],
        [i32::MIN as i64, i32::MAX as i64, 5],
        [i64::MIN, i64::MAX, -1],
        [i64::MAX - 100, i64::MIN + 100, 1 << 40],
        [(1 << 24) + 1, -(1 << 24) - 1, 1 << 24],
        [(1 << 22) + 1, -(1 << 22) - 1, 1 << 22],
        [(1 << 22) - 1, -(1 << 22), (1 << 24) - 1],
    ];
    let scales = [0.5f32, f32::NAN, -1e-40];
    for src in [DType::S8, DType::U8] {
        for zps in zps_sets {
            for shape in [&[3usize, 40][..], &[3, 1, 17]] {
                let per_channel = Dequantize::new(scales.to_vec())
                    .per_channel(0)
                    .zps(zps.to_vec());
                let per_tensor = Dequantize::new(vec![-0.75]).zps(vec![zps[1]]);
                let plain = Dequantize::new(vec![f32::INFINITY]);
                for op in [per_channel.into(), per_tensor.into(), Op::from(plain)] {
                    let c = Case {
                        op,
                        src: TensorDesc::new(src, shape),
                        scales: None,
                        zps: None,
                        dst: TensorDesc::new(DType::F32, shape),
                    };
                    check(&jit, &c, &mut r, 2);
                    check(&jit, &c.transposed(true, false), &mut r, 1);
                }
            }
        }
    }
}
