//! Float src (SPEC §10) on the vector and table paths: every code decoded in vector
//! lanes against `dq_runtime::minifloat`, and every granularity, dst and scale
//! dtype (the dst's or e8m0) against the reference.

use dq_runtime::minifloat::{f4_e2m1_to_f32, f8_e4m3_to_f32, f8_e5m2_to_f32};
use dq_runtime::{DType, DynamicDequantize, STANDARD, TensorDesc};

use super::{Case, DYN_DST, Data, Rng, check, jits_for};
use crate::Jit;

/// The float src dtypes.
const FLOAT_SRC: [DType; 3] = [DType::F8E4M3, DType::F8E5M2, DType::F4E2M1];

/// Which path the kernel of `c` took, from its IR: vector code (F32X4 lanes) and
/// byte shuffles (the 8-bit decode's and the 4-bit tables'); the scalar path has
/// neither.
fn paths(jit: &Jit, c: &Case) -> (bool, bool) {
    let ir = jit.clif(&c.plan()).expect("IR");
    (ir.contains("f32x4"), ir.contains("x86_pshufb"))
}

/// `c` with e8m0 scales of its scales' shape.
fn e8m0(mut c: Case) -> Case {
    c.scales = c.scales.map(|d| TensorDesc::new(DType::E8M0, &d.shape));
    c
}

/// Runs `c` (f32 dst, one scale of 1: exactly the decoded values) on `codes`
/// over `range`, returning the dst's f32 bits.
fn decoded(
    jit: &Jit,
    c: &Case,
    src: Vec<u8>,
    scale: Vec<u8>,
    range: core::ops::Range<usize>,
) -> Vec<u32> {
    let plan = c.plan();
    let kernel = jit.kernel(&plan).expect("kernel");
    let data = Data {
        src,
        scales: scale,
        zps: Vec::new(),
    };
    let out = data.run(c, &plan, |job| kernel.run(job, range));
    out.chunks(4)
        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
        .collect()
}

/// Every f8 code, at every position of a 16-lane step (the codes rotated by 0..16)
/// and in the scalar tail (263 = 16 steps + 7), decoded by the vector path with a
/// scale of 1 (f32 and e8m0 127): the bits of `dq_runtime::minifloat`'s decode
/// (NaN codes give `NAN_BITS`).
#[test]
fn every_f8_code_through_the_vector_path() {
    let jit = Jit::new(&STANDARD, 4);
    let n = 263;
    for (src, decode) in [
        (DType::F8E4M3, f8_e4m3_to_f32 as fn(u8) -> f32),
        (DType::F8E5M2, f8_e5m2_to_f32),
    ] {
        let f32_scale = Case::per_tensor((src, None, DType::F32), &[n]);
        for (c, one) in [
            (
                e8m0(Case::per_tensor((src, None, DType::F32), &[n])),
                vec![127u8],
            ),
            (f32_scale, 1f32.to_le_bytes().to_vec()),
        ] {
            assert_eq!(paths(&jit, &c), (true, true), "{c:?}: the vector path");
            for rot in 0..16 {
                let codes: Vec<u8> = (0..n).map(|i| (i + rot) as u8).collect();
                for start in [0, 3] {
                    let got = decoded(&jit, &c, codes.clone(), one.clone(), start..n);
                    for i in start..n {
                        let want = decode(codes[i]).to_bits();
                        assert_eq!(got[i], want, "{src:?} code {:#04x} at {i}", codes[i]);
                    }
                }
            }
        }
    }
}

/// Every f4_e2m1 code (two a byte) at every position of a step, through the
/// table path (segments of 32 or more) and the vector path (segments of 16, too
/// short for a table), with a scale of 1 and f32 dst: the decoded values.
#[test]
fn every_f4_code_through_the_table_and_vector_paths() {
    let jit = Jit::new(&STANDARD, 4);
    let n = 2 * 263;
    let dtypes = (DType::F4E2M1, None, DType::F32);
    for (group, table) in [(32, true), (16, false)] {
        let c = Case::per_group(dtypes, &[n], &[group]);
        assert_eq!(paths(&jit, &c), (true, table), "{c:?}");
        let scales: Vec<u8> = (0..n.div_ceil(group))
            .flat_map(|_| 1f32.to_le_bytes())
            .collect();
        for rot in 0..16 {
            let codes: Vec<u8> = (0..n).map(|i| ((i + rot) % 16) as u8).collect();
            let src: Vec<u8> = codes.chunks(2).map(|p| p[0] | (p[1] << 4)).collect();
            for start in [0, 3] {
                let got = decoded(&jit, &c, src.clone(), scales.clone(), start..n);
                for i in start..n {
                    let want = f4_e2m1_to_f32(codes[i]).to_bits();
                    assert_eq!(got[i], want, "group {group}: code {:#x} at {i}", codes[i]);
                }
            }
        }
    }
}

/// Every float src x dst x scale dtype (the dst's, e8m0), per tensor, per channel
/// (both axes), per group (1 x 32 and 1 x 16, with remainders, and single
/// elements), rows of 70 and 37: bit for bit with the reference on random codes
/// and scales (NaN, infinite, subnormal), and always on the vector path (e8m0
/// scales per element included: decoded in lanes).
#[test]
fn float_src_every_dst_and_granularity() {
    let mut r = Rng::new(16);
    let mut n = 0;
    for src in FLOAT_SRC {
        for dst in DYN_DST {
            let jits = jits_for(dst, &STANDARD);
            for shape in [[5, 70], [3, 37]] {
                let d = (src, None, dst);
                for k in 0..6 {
                    for e8 in [true, false] {
                        let c = granularity(d, &shape, k);
                        let c = if e8 { e8m0(c) } else { c };
                        for jit in &jits {
                            assert!(paths(jit, &c).0, "{c:?}: the vector path");
                            check(jit, &c, &mut r, 2);
                            n += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(n >= 3 * 3 * 2 * 12, "{n} cases");
}

/// Case `k` of [`float_src_every_dst_and_granularity`]: per tensor, per channel
/// along rows and along columns, per group of 1 x 32, 1 x 16 and 1 x 1.
fn granularity(d: (DType, Option<DType>, DType), shape: &[usize], k: usize) -> Case {
    let per_channel = |axis: usize| {
        let op = DynamicDequantize::per_channel(axis as i64);
        Case::dynamic(op, d, shape, &[shape[axis]])
    };
    match k {
        0 => Case::per_tensor(d, shape),
        1 => per_channel(0),
        2 => per_channel(1),
        3 => Case::per_group(d, shape, &[1, 32]),
        4 => Case::per_group(d, shape, &[1, 16]),
        _ => Case::per_group(d, shape, &[1, 1]),
    }
}

/// Every e8m0 code as a per-element scale (group 1, decoded in vector lanes:
/// 0 is `2^-127`, 255 NaN), rotated so each meets every lane of a step, for
/// integer, 4-bit and float src and every dst: bit for bit with the reference
/// over the whole call and every length 1..=80 from a random start.
#[test]
fn every_e8m0_code_per_element_on_the_vector_path() {
    let mut r = Rng::new(8);
    let n = 263;
    let reference = dq_runtime::Reference { formula: &STANDARD };
    for src in [
        DType::S8,
        DType::U4,
        DType::F8E4M3,
        DType::F8E5M2,
        DType::F4E2M1,
    ] {
        for dst in DYN_DST {
            let c = e8m0(Case::per_group((src, None, dst), &[n], &[1]));
            for jit in jits_for(dst, &STANDARD) {
                assert!(paths(&jit, &c).0, "{c:?}: the vector path");
                let plan = c.plan();
                let kernel = jit.kernel(&plan).expect("kernel");
                for rot in [0, 5, 130] {
                    let mut data = Data::random(&c, &mut r);
                    data.scales = (0..n).map(|i| (i + rot) as u8).collect();
                    let mut ranges: Vec<core::ops::Range<usize>> = Vec::with_capacity(81);
                    ranges.push(0..n);
                    for k in 1..=80 {
                        let a = r.below((n - k) as u64 + 1) as usize;
                        ranges.push(a..a + k);
                    }
                    for range in ranges {
                        let want =
                            data.run(&c, &plan, |job| job.run_range(&reference, range.clone()));
                        let got = data.run(&c, &plan, |job| kernel.run(job, range.clone()));
                        assert_eq!(got, want, "{c:?} rotation {rot}, range {range:?}");
                    }
                }
            }
        }
    }
}
