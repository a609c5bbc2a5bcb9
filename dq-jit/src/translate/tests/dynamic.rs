//! The dynamic op: every src, zero-point and dst dtype and granularity, the 4-bit
//! paths (tables, peels, tails), and f16/bf16 rounding.

use dq_runtime::{DType, DynamicDequantize, STANDARD};

use super::{Case, DYN_DST, DYN_SRC, DYN_ZPS, Rng, SRC_4BIT, check, jits_for};
use crate::Jit;

/// Per-tensor, per-channel (every axis; the last also with one zero point) and
/// per-group cases of `shape` (rank 2 or more), groups on its last two dims: 32
/// along rows (a remainder unless 32 divides the row), 2 x 3 blocks, and single
/// elements.
fn granularities(dtypes: (DType, Option<DType>, DType), shape: &[usize]) -> Vec<Case> {
    let last = shape.len() - 1;
    let channel = |axis: usize| {
        let op = DynamicDequantize::per_channel(axis as i64);
        Case::dynamic(op, dtypes, shape, &[shape[axis]])
    };
    let mut v = vec![Case::per_tensor(dtypes, shape)];
    v.extend((0..=last).map(channel));
    if dtypes.1.is_some() {
        v.push(channel(last).zp_broadcast());
    }
    for g in [[1, 32], [2, 3], [1, 1]] {
        let mut groups = vec![1; last - 1];
        groups.extend(g);
        v.push(Case::per_group(dtypes, shape, &groups));
    }
    v
}

/// Every dynamic src x zero point x dst, every granularity: dense rows of 70
/// (vector loops with tails, per-element scales, segments), then in turn src,
/// dst or both transposed, over two or three loops.
#[test]
fn dynamic_op_every_dtype_and_granularity() {
    let mut r = Rng::new(1);
    let (mut n, mut k) = (0, 0);
    for src in DYN_SRC {
        for zps in DYN_ZPS {
            for dst in DYN_DST {
                let jits = jits_for(dst, &STANDARD);
                for c in granularities((src, zps, dst), &[5, 70]) {
                    for jit in &jits {
                        check(jit, &c, &mut r, 1);
                        n += 1;
                    }
                }
                let layout = [(true, true), (true, false), (false, true)][k % 3];
                let shape: &[usize] = if k % 2 == 0 { &[37, 6] } else { &[2, 3, 37] };
                for c in granularities((src, zps, dst), shape) {
                    check(&jits[0], &c.transposed(layout.0, layout.1), &mut r, 1);
                    n += 1;
                }
                k += 1;
            }
        }
    }
    assert!(n > 1000, "{n} cases");
}

/// 4-bit src: run lengths around the 16-element vector step and the 32-element
/// table step, odd lengths (rows starting on odd nibbles), groups of 16 (no table),
/// 32, 48 (a 16-element table step), 64 and 128 with remainders, groups spanning
/// rows, padded rows (odd nibble starts) and even row strides under odd rows;
/// with the host's lookups (16-bit dst, AVX-512 selected) and without.
#[test]
fn four_bit_tables_peels_and_tails() {
    let mut r = Rng::new(2);
    for src in SRC_4BIT {
        for zps in DYN_ZPS {
            for dst in DYN_DST {
                let mut jits = jits_for(dst, &STANDARD);
                // Cranelift's own lookups, where the host's would be called.
                jits.push(Jit::new(&STANDARD, 16).with_host_lookups(false));
                let dt = (src, zps, dst);
                let mut cases = Vec::new();
                for len in [
                    1, 2, 15, 16, 17, 31, 32, 33, 47, 48, 63, 64, 65, 80, 97, 130,
                ] {
                    cases.push(Case::per_tensor(dt, &[len]));
                }
                for cols in [31, 33, 65] {
                    let op = DynamicDequantize::per_channel(0);
                    cases.push(Case::dynamic(op, dt, &[3, cols], &[3]));
                }
                for g in [16, 32, 48, 64, 128] {
                    for cols in [g, 2 * g + 1, 3 * g + 17] {
                        cases.push(Case::per_group(dt, &[3, cols], &[1, g]));
                    }
                    cases.push(Case::per_group(dt, &[3, 2 * g + 1], &[1, g]).zp_broadcast());
                    cases.push(Case::per_group(dt, &[4, 2 * g + 3], &[2, g]));
                }
                for (shape, pad) in [([5, 7], 8), ([3, 33], 34), ([4, 33], 1), ([3, 64], 1)] {
                    cases.push(Case::per_tensor(dt, &shape).padded_src(pad));
                    cases.push(Case::per_group(dt, &shape, &[1, 32]).padded_src(pad));
                }
                for c in &cases {
                    for jit in &jits {
                        check(jit, c, &mut r, 2);
                    }
                }
            }
        }
    }
}

/// f16 and bf16 rounding over many results: a scale per element (each a random
/// bit pattern half the time), so results cover normals, subnormals, overflow,
/// ties and NaN payloads; f16 with F16C and with the kernels' own rounding.
#[test]
fn rounding_over_many_bit_patterns() {
    let mut r = Rng::new(6);
    for dst in [DType::F16, DType::BF16] {
        let jits = jits_for(dst, &STANDARD);
        for src in [DType::S8, DType::U4] {
            let dt = (src, Some(DType::U8), dst);
            let c = Case::dynamic(DynamicDequantize::per_channel(1), dt, &[16, 512], &[512]);
            for jit in &jits {
                check(jit, &c, &mut r, 8);
            }
        }
    }
}

/// The table above reaches the code it claims to (on x86-64, where 4-bit tables
/// are compiled in): 16-lane vector code, 4-bit tables, 128-bit integer code, and
/// none of it for s32 src.
#[test]
#[cfg(target_arch = "x86_64")]
fn the_cases_reach_every_path() {
    use dq_runtime::{AxesDequantize, Dequantize, TensorDesc};
    if !std::arch::is_x86_feature_detected!("ssse3") {
        eprintln!("no SSSE3: 4-bit tables are not compiled on this host");
        return;
    }
    // Cranelift's own lookups (the host's are checked below).
    let jit = Jit::new(&STANDARD, 4).with_host_lookups(false);
    let clif = |c: Case| jit.clif(&c.plan()).unwrap_or_else(|e| panic!("{e}"));
    let vector = clif(Case::per_tensor((DType::S8, None, DType::F32), &[70]));
    assert!(vector.contains("f32x4") && !vector.contains("explicit_slot"));
    // A table's 128-byte stack slot, for its single elements.
    let table = clif(Case::per_group(
        (DType::U4, None, DType::BF16),
        &[3, 97],
        &[1, 32],
    ));
    assert!(table.contains("x86_pshufb") && table.contains("explicit_slot 128"));
    assert!(!table.contains("call_indirect"));
    // f16 tables: rounded by the host's F16C (a call) where it has them, else by
    // the kernel's own code.
    let f16 = |jit: &Jit| {
        let c = Case::per_group((DType::U4, None, DType::F16), &[3, 97], &[1, 32]);
        jit.clif(&c.plan()).unwrap_or_else(|e| panic!("{e}"))
    };
    let host = dq_runtime::arch::f16_convert();
    assert_eq!(f16(&jit).contains("call_indirect"), host);
    let own = Jit::new(&STANDARD, 4)
        .with_f16_conversion(false)
        .with_host_lookups(false);
    assert!(!f16(&own).contains("call_indirect"));
    // Lookups: the host's (a call) where AVX-512 is selected.
    let avx512 = dq_runtime::arch::selected() == dq_runtime::arch::Isa::Avx512;
    for dst in [DType::BF16, DType::F32] {
        let c = Case::per_group((DType::U4, None, dst), &[3, 97], &[1, 32]);
        let host = Jit::new(&STANDARD, 4).clif(&c.plan()).unwrap();
        assert_eq!(host.contains("call_indirect"), avx512, "{dst:?}");
    }
    let scalar = clif(Case {
        op: AxesDequantize::new(vec![1]).into(),
        src: TensorDesc::new(DType::S32, &[4, 50]),
        scales: Some(TensorDesc::new(DType::F32, &[50])),
        zps: Some(TensorDesc::new(DType::S32, &[50])),
        dst: TensorDesc::new(DType::F32, &[4, 50]),
    });
    assert!(!scalar.contains("f32x4") && !scalar.contains("i128"));
    let wide = clif(Case {
        op: Dequantize::new(vec![1.0]).zps(vec![i64::MAX]).into(),
        src: TensorDesc::new(DType::S8, &[40]),
        scales: None,
        zps: None,
        dst: TensorDesc::new(DType::F32, &[40]),
    });
    assert!(wide.contains("i128") && wide.contains("f32x4"));
}

/// f16 scales that change every few elements of the inner loop are widened to
/// f32 per call (`Spec::f32_scales`): a scale per column, short column groups
/// under tall row groups, three loops, and a transposed src; `check` runs every
/// sub-range, each of which widens only the scales its elements read.
#[test]
fn f16_scales_widened_per_call() {
    let mut r = Rng::new(11);
    let mut n = 0;
    for src in DYN_SRC {
        for zps in [None, Some(DType::U8)] {
            let dt = (src, zps, DType::F16);
            let column = DynamicDequantize::per_channel(1);
            let mut cases = vec![
                Case::dynamic(column.clone(), dt, &[40, 70], &[70]),
                Case::dynamic(column, dt, &[40, 70], &[70]).transposed(true, false),
                Case::per_group(dt, &[40, 70], &[16, 1]),
                Case::per_group(dt, &[41, 69], &[8, 3]),
                Case::per_group(dt, &[3, 20, 37], &[1, 10, 1]),
            ];
            if src.is_4bit() {
                // 4-bit table segments of up to 64 elements, one or several a row.
                cases.push(Case::per_group(dt, &[9, 256], &[1, 32]));
                cases.push(Case::per_group(dt, &[7, 200], &[1, 64]));
                cases.push(Case::per_group(dt, &[5, 48], &[1, 48]));
            }
            for c in cases {
                for jit in &jits_for(DType::F16, &STANDARD) {
                    let spec = jit.spec(&c.plan()).unwrap_or_else(|e| panic!("{e}"));
                    assert!(spec.f32_scales, "{c:?}");
                    check(jit, &c, &mut r, 2);
                    n += 1;
                }
            }
        }
    }
    assert!(n >= 40, "{n} cases");
    // 4-bit groups over 64 elements keep their f16 scales.
    let c = Case::per_group((DType::U4, None, DType::F16), &[8, 256], &[1, 128]);
    let spec = Jit::new(&STANDARD, 4).spec(&c.plan());
    assert!(!spec.unwrap_or_else(|e| panic!("{e}")).f32_scales);
    // More elements than a piece (`scales::PIECE`): each piece widens its own.
    let dt = (DType::S4, None, DType::F16);
    let big = Case::per_group(dt, &[1030, 1100], &[128, 1]);
    let jit = Jit::new(&STANDARD, 4);
    assert!(
        jit.spec(&big.plan())
            .unwrap_or_else(|e| panic!("{e}"))
            .f32_scales
    );
    check(&jit, &big, &mut r, 1);
}
