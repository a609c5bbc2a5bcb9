//! SPEC §10 float sources in the differential and guard-page tests: random float
//! src cases (f8_e4m3, f8_e5m2, f4_e2m1; dst-typed or e8m0 scales; every
//! granularity; odd lengths and strided dst) give the reference's bits on every
//! backend, pinned ISA and thread split; and every kernel stays inside buffers
//! fenced by guard pages.

use crate::support;
use dq::case::{Case, OwnedTensor};
use dq::{DType, DynamicDequantize, Op, TensorDesc};
use proptest::prelude::*;
use support::{Rng, Variant, all_variants, path_unavailable, proptest_cases};

const SRCS: [DType; 3] = [DType::F8E4M3, DType::F8E5M2, DType::F4E2M1];
const DSTS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// Scale bytes of dtype `t`: spread finite values, zeros, infinities and NaNs of
/// any sign and payload (which meet NaN src codes); e8m0: any byte.
fn scale_bytes(rng: &mut Rng, t: DType, n: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|_| {
            let v = match rng.below(12) {
                0 => 0.0,
                1 => f32::INFINITY,
                2 => f32::from_bits(0x7f80_0001 | rng.next_u64() as u32),
                3 => -1e-39,
                _ => ((rng.below(2001) as f32) - 1000.0) * 2f32.powi(rng.below(40) as i32 - 25),
            };
            match t {
                DType::E8M0 => vec![rng.next_u64() as u8],
                DType::F32 => v.to_le_bytes().to_vec(),
                DType::F16 => half::f16::from_f32(v).to_le_bytes().to_vec(),
                _ => half::bf16::from_f32(v).to_le_bytes().to_vec(),
            }
        })
        .collect()
}

/// A random float-src case: rank 1..=3, granularity, scales type, dst layout.
fn random_case(seed: u64) -> Case {
    let mut rng = Rng::new(seed);
    let src_t = rng.pick(&SRCS);
    let dst_t = rng.pick(&DSTS);
    let scales_t = if rng.one_in(2) { DType::E8M0 } else { dst_t };
    let rank = 1 + rng.below(3) as usize;
    let shape: Vec<usize> = (0..rank).map(|_| rng.below(70) as usize).collect();
    let (op, scale_shape): (Op, Vec<usize>) = match rng.below(3) {
        0 => (DynamicDequantize::per_tensor().into(), vec![1]),
        1 => {
            let a = rng.below(rank as u64) as usize;
            (
                DynamicDequantize::per_channel(a as i64).into(),
                vec![shape[a]],
            )
        }
        _ => {
            let g: Vec<usize> = shape
                .iter()
                .map(|&d| 1 + rng.below(d.max(1) as u64 + 2) as usize)
                .collect();
            let ss = shape.iter().zip(&g).map(|(&d, &g)| d.div_ceil(g)).collect();
            let g = g.into_iter().map(|x| x as i64).collect();
            (DynamicDequantize::per_group(g).into(), ss)
        }
    };
    let n: usize = shape.iter().product();
    let sn: usize = scale_shape.iter().product();
    let src = OwnedTensor::new(
        TensorDesc::new(src_t, &shape),
        rng.bytes(src_t.bytes_for(n).unwrap()),
    );
    let scales = OwnedTensor::new(
        TensorDesc::new(scales_t, &scale_shape),
        scale_bytes(&mut rng, scales_t, sn),
    );
    let mut dst = TensorDesc::new(dst_t, &shape);
    if rank >= 2 && rng.one_in(3) {
        // The last two dims transposed.
        let mut st = TensorDesc::dense_strides(&shape);
        let (a, b) = (shape[rank - 2].max(1), shape[rank - 1].max(1));
        st[rank - 1] = a;
        st[rank - 2] = 1;
        if rank == 3 {
            st[0] = a * b;
        }
        dst.strides = Some(st);
    }
    let bytes = dst.required_bytes(dq::Role::Dst).unwrap();
    Case {
        op,
        src,
        scales: Some(scales),
        zps: None,
        dst: OwnedTensor::new(dst, vec![0x5a; bytes]),
    }
}

/// Every variant equals the reference on `case`, on 1 and 3 threads.
fn check(case: &Case, variants: &[Variant]) -> Result<(), TestCaseError> {
    let plan = case
        .plan()
        .map_err(|e| TestCaseError::fail(format!("{e}: {case:?}")))?;
    let want = case.run(support::reference()).unwrap();
    for v in variants {
        if let Err(e) = v.kernel.supports(&plan) {
            prop_assert_eq!(v.name, "jit", "{}", e);
            path_unavailable(&format!("jit: float src ({e})"));
            continue;
        }
        for threads in [1, 3] {
            let got = case.run_parallel(v.kernel, threads).unwrap();
            prop_assert!(got == want, "{} on {} threads: {:?}", v.name, threads, case);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(proptest_cases(256)))]

    #[test]
    fn float_src_backends_match_the_reference(seed in any::<u64>()) {
        check(&random_case(seed), &all_variants())?;
    }
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod guarded {
    use super::*;
    use dq::{Tensor, TensorMut};
    use support::guard::{Guard, GuardBuf};

    /// `kernel` on `case` with src, scales and dst fenced by `guard`, whole and
    /// split in two; the dst bytes of each run.
    fn run_guarded(kernel: &dyn dq::kernel::Kernel, case: &Case, guard: Guard) -> Vec<Vec<u8>> {
        let plan = case.plan().unwrap();
        let n = plan.numel();
        let src_buf = GuardBuf::new(&case.src.data, guard);
        let sc = case.scales.as_ref().unwrap();
        let scales_buf = GuardBuf::new(&sc.data, guard);
        let mut outs = Vec::new();
        for ranges in [[0..n, n..n], [0..n / 3, n / 3..n]] {
            let mut dst_buf = GuardBuf::new(&case.dst.data, guard);
            let src = Tensor {
                desc: case.src.desc.clone(),
                data: src_buf.as_slice(),
            };
            let scales = Tensor {
                desc: sc.desc.clone(),
                data: scales_buf.as_slice(),
            };
            let mut dst = TensorMut {
                desc: case.dst.desc.clone(),
                data: dst_buf.as_mut_slice(),
            };
            {
                let mut job = plan.bind(&src, Some(&scales), None, &mut dst).unwrap();
                for r in ranges {
                    job.run_range(kernel, r).unwrap();
                }
            }
            outs.push(dst_buf.as_slice().to_vec());
        }
        outs
    }

    /// Exact-size buffers at every length around the vector and table widths, every
    /// float src, dst and scales type, per tensor and per group of 32: every kernel
    /// stays inside them (a stray access is a SIGSEGV) and gives the reference's bits.
    #[test]
    fn float_src_kernels_stay_inside_guarded_buffers() {
        let variants = all_variants();
        let mut runs = 0;
        for n in [1usize, 2, 3, 15, 16, 17, 31, 33, 64, 127, 129, 300] {
            for src_t in SRCS {
                for dst_t in DSTS {
                    for scales_t in [dst_t, DType::E8M0] {
                        for group in [None, Some(32usize)] {
                            let mut rng = Rng::new(n as u64 * 31 + runs);
                            let (op, ss): (Op, Vec<usize>) = match group {
                                None => (DynamicDequantize::per_tensor().into(), vec![1]),
                                Some(g) => (
                                    DynamicDequantize::per_group(vec![g as i64]).into(),
                                    vec![n.div_ceil(g)],
                                ),
                            };
                            let sn: usize = ss.iter().product();
                            let case = Case {
                                op,
                                src: OwnedTensor::new(
                                    TensorDesc::new(src_t, &[n]),
                                    rng.bytes(src_t.bytes_for(n).unwrap()),
                                ),
                                scales: Some(OwnedTensor::new(
                                    TensorDesc::new(scales_t, &ss),
                                    scale_bytes(&mut rng, scales_t, sn),
                                )),
                                zps: None,
                                dst: OwnedTensor::new(
                                    TensorDesc::new(dst_t, &[n]),
                                    vec![0; n * dst_t.bits() / 8],
                                ),
                            };
                            let want = case.run(support::reference()).unwrap();
                            for v in &variants {
                                if v.kernel.supports(&case.plan().unwrap()).is_err() {
                                    assert_eq!(v.name, "jit");
                                    path_unavailable("jit: float src (guard pages)");
                                    continue;
                                }
                                for guard in [Guard::After, Guard::Before] {
                                    for got in run_guarded(v.kernel, &case, guard) {
                                        assert_eq!(
                                            got, want,
                                            "{} {src_t} -> {dst_t} scales {scales_t} n {n} {group:?} {guard:?}",
                                            v.name
                                        );
                                    }
                                }
                                runs += 1;
                            }
                        }
                    }
                }
            }
        }
        assert!(runs > 0);
    }
}
