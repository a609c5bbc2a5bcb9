//! Bounds: src, scales, zps and dst each sit flush against a `PROT_NONE` page (last
//! byte right before it, and in a second pass first byte right after it), for every
//! kernel variant, lengths 0..=130 (odd 4-bit counts included) and every granularity.
//! An out-of-bounds read or write kills the test process with SIGSEGV; results are
//! also compared with the reference, bit for bit.
//!
//! `guard_pages_catch_a_one_byte_overrun` proves the harness can fail: it re-runs this
//! binary with a kernel that touches one byte past (or before) a buffer and expects
//! the child to die by SIGSEGV.
use crate::support;

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
#[test]
fn guard_pages_need_linux_x86_64() {
    support::path_unavailable("guard-page tests (need linux on x86_64: mmap/mprotect)");
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod linux {
    use std::ops::Range;

    use dq::case::OwnedTensor;
    use dq::kernel::Kernel;
    use dq::rules::{AXES, DYNAMIC, STATIC};
    use dq::{
        AxesDequantize, DType, Dequantize, DynamicDequantize, Job, Op, Plan, Role, Tensor,
        TensorDesc, TensorMut,
    };

    use super::support::cases::{Case, CaseExt, assert_bits, float_bytes, int_bytes};
    use super::support::guard::{Guard, GuardBuf};
    use super::support::paths::{force_chunks, ran, store_switch};
    use super::support::{
        Rng, Variant, all_variants, backend_variants, path_unavailable, reference,
    };
    use dq::policy::{self, StoreStrategy};

    /// A dense descriptor, or the transposed view of a `[d1, d0]` buffer.
    fn desc(dtype: DType, shape: &[usize], transposed: bool) -> TensorDesc {
        let d = TensorDesc::new(dtype, shape);
        match (transposed, shape) {
            (true, &[d0, _]) => d.with_strides(&[1, d0]),
            _ => d,
        }
    }

    /// One configuration of the matrix (`transposed`: src, `dst_transposed`: dst, as
    /// the transposed view of a `[d1, d0]` buffer when 2-D).
    #[derive(Clone, Debug)]
    struct Config {
        op: Op,
        src_t: DType,
        zps_t: Option<DType>,
        dst_t: DType,
        shape: Vec<usize>,
        scale_shape: Vec<usize>,
        zps_shape: Vec<usize>,
        transposed: bool,
        dst_transposed: bool,
    }

    /// Builds the case for `cfg` with exact-size buffers and random data.
    fn case(cfg: &Config, rng: &mut Rng) -> Case {
        let src = desc(cfg.src_t, &cfg.shape, cfg.transposed);
        let dst = desc(cfg.dst_t, &cfg.shape, cfg.dst_transposed);
        let need = |d: &TensorDesc| d.required_bytes(Role::Src).unwrap();
        let src_bytes = int_bytes(rng, cfg.src_t, need(&src));
        let dst_bytes = rng.bytes(need(&dst));
        let (scales, zps) = if matches!(cfg.op, Op::Dequantize(_)) {
            (None, None)
        } else {
            let sd = TensorDesc::new(cfg.dst_t, &cfg.scale_shape);
            let sb = float_bytes(rng, cfg.dst_t, need(&sd), 1);
            let zps = cfg.zps_t.map(|t| {
                let zd = TensorDesc::new(t, &cfg.zps_shape);
                let zb = int_bytes(rng, t, need(&zd));
                OwnedTensor::new(zd, zb)
            });
            (Some(OwnedTensor::new(sd, sb)), zps)
        };
        Case {
            op: cfg.op.clone(),
            src: OwnedTensor::new(src, src_bytes),
            scales,
            zps,
            dst: OwnedTensor::new(dst, dst_bytes),
        }
    }

    /// Runs `kernel` on `case` with every buffer fenced by `guard`, whole and split.
    pub(super) fn run_guarded(kernel: &dyn Kernel, case: &Case, guard: Guard) -> Vec<Vec<u8>> {
        let n = case.numel();
        // Whole, then split in two at n / 3.
        [[0..n, n..n], [0..n / 3, n / 3..n]]
            .into_iter()
            .map(|ranges| {
                guarded(case, guard, |job| {
                    for r in ranges {
                        job.run_range(kernel, r).expect("run_range");
                    }
                })
            })
            .collect()
    }

    /// Binds `case` with every buffer fenced by `guard`, runs `f` on the job, and
    /// returns dst.
    fn guarded(case: &Case, guard: Guard, f: impl FnOnce(&mut Job<'_>)) -> Vec<u8> {
        let plan = case.plan().expect("valid case");
        let src_buf = GuardBuf::new(&case.src.data, guard);
        let scales_buf = case.scales.as_ref().map(|t| GuardBuf::new(&t.data, guard));
        let zps_buf = case.zps.as_ref().map(|t| GuardBuf::new(&t.data, guard));
        let mut dst_buf = GuardBuf::new(&case.dst.data, guard);
        let src = Tensor {
            desc: case.src.desc.clone(),
            data: src_buf.as_slice(),
        };
        let scales = case.scales.as_ref().map(|t| Tensor {
            desc: t.desc.clone(),
            data: scales_buf.as_ref().unwrap().as_slice(),
        });
        let zps = case.zps.as_ref().map(|t| Tensor {
            desc: t.desc.clone(),
            data: zps_buf.as_ref().unwrap().as_slice(),
        });
        let mut dst = TensorMut {
            desc: case.dst.desc.clone(),
            data: dst_buf.as_mut_slice(),
        };
        {
            let mut job = plan
                .bind(&src, scales.as_ref(), zps.as_ref(), &mut dst)
                .expect("exact-size buffers bind");
            f(&mut job);
        }
        dst_buf.as_slice().to_vec()
    }

    /// Lengths that get the full src x zps x dst matrix.
    const FULL_MATRIX_LENGTHS: [usize; 7] = [0, 1, 3, 16, 33, 127, 129];

    /// Every configuration for a length `n`.
    fn configs(n: usize) -> Vec<Config> {
        let mut v = Vec::new();
        let srcs = DYNAMIC.src.list();
        let zpss = DYNAMIC.zps_choices(DType::S8);
        let dyn_dsts = DYNAMIC.dst.list();
        // 1-D: per tensor, per channel, per group with a remainder, broadcast zp.
        let grans: Vec<(Op, Vec<usize>, bool)> = vec![
            (DynamicDequantize::per_tensor().into(), vec![1], false),
            (DynamicDequantize::per_channel(0).into(), vec![n], false),
            (
                DynamicDequantize::per_group(vec![32]).into(),
                vec![n.div_ceil(32)],
                false,
            ),
            (
                DynamicDequantize::per_group(vec![5]).into(),
                vec![n.div_ceil(5)],
                true,
            ),
        ];
        // Every zps dtype on a few lengths, one (rotating with n) on the others.
        let zpss: Vec<Option<DType>> = if FULL_MATRIX_LENGTHS.contains(&n) {
            zpss.to_vec()
        } else {
            vec![zpss[n % zpss.len()]]
        };
        for &src_t in srcs {
            for &zps_t in &zpss {
                if src_t.is_float_src() && zps_t.is_some() {
                    continue; // a float src takes no zero points (SPEC §10)
                }
                for &dst_t in dyn_dsts {
                    for (op, ss, bcast) in &grans {
                        v.push(Config {
                            op: op.clone(),
                            src_t,
                            zps_t,
                            dst_t,
                            shape: vec![n],
                            scale_shape: ss.clone(),
                            zps_shape: if *bcast { vec![1] } else { ss.clone() },
                            transposed: false,
                            dst_transposed: false,
                        });
                    }
                }
            }
        }
        // 2-D [2, n]: groups along rows, per channel on the last axis, transposed src.
        for &src_t in srcs {
            for &dst_t in dyn_dsts {
                let shape = vec![2, n];
                let gs = vec![2, n.div_ceil(7)];
                let two: [(Op, Vec<usize>, bool); 3] = [
                    (
                        DynamicDequantize::per_group(vec![1, 7]).into(),
                        gs.clone(),
                        false,
                    ),
                    (DynamicDequantize::per_channel(-1).into(), vec![n], true),
                    (
                        DynamicDequantize::per_group(vec![2, 3]).into(),
                        vec![1, n.div_ceil(3)],
                        true,
                    ),
                ];
                for (op, ss, transposed) in two {
                    v.push(Config {
                        op,
                        src_t,
                        zps_t: if src_t.is_float_src() {
                            None
                        } else if src_t.is_4bit() {
                            Some(DType::U4)
                        } else {
                            Some(DType::S32)
                        },
                        dst_t,
                        shape: shape.clone(),
                        zps_shape: ss.clone(),
                        scale_shape: ss,
                        transposed,
                        dst_transposed: false,
                    });
                }
            }
        }
        // Axes form.
        for &src_t in AXES.src.list() {
            for &dst_t in AXES.dst.list() {
                for (axes, ss) in [(vec![], vec![]), (vec![0], vec![n])] {
                    v.push(Config {
                        op: AxesDequantize::new(axes).into(),
                        src_t,
                        zps_t: Some(src_t),
                        dst_t,
                        shape: vec![n],
                        zps_shape: ss.clone(),
                        scale_shape: ss,
                        transposed: false,
                        dst_transposed: false,
                    });
                }
            }
        }
        // Static op (its scales and zps live in the plan).
        for &src_t in STATIC.src.list() {
            for (per_channel, zps) in [(false, false), (true, true), (false, true)] {
                if zps && src_t.is_float_src() {
                    continue; // a float src takes no zero points (SPEC §10)
                }
                let k = if per_channel { n } else { 1 };
                let mut o = Dequantize::new((0..k).map(|i| 0.5 + i as f32).collect());
                if per_channel {
                    o = o.per_channel(0);
                }
                if zps {
                    o = o.zps((0..k as i64).map(|i| i64::MAX - i).collect());
                }
                v.push(Config {
                    op: o.into(),
                    src_t,
                    zps_t: None,
                    dst_t: DType::F32,
                    shape: vec![n],
                    scale_shape: vec![],
                    zps_shape: vec![],
                    transposed: false,
                    dst_transposed: false,
                });
            }
        }
        v
    }

    /// Runs the whole matrix for `variants` over `lengths`.
    pub(super) fn sweep(variants: &[Variant], lengths: impl Iterator<Item = usize>) -> usize {
        let mut rng = Rng::new(0x6a09_e667_f3bc_c908);
        let mut runs = 0;
        for n in lengths {
            for cfg in configs(n) {
                let case = case(&cfg, &mut rng);
                let want = case.run(reference()).expect("run");
                let plan: Plan = case.plan().expect("valid case");
                for v in variants {
                    if let Err(e) = v.kernel.supports(&plan) {
                        panic!("{} refuses a valid plan: {e}\n{case:?}", v.name);
                    }
                    for guard in [Guard::After, Guard::Before] {
                        for got in run_guarded(v.kernel, &case, guard) {
                            assert_bits(&case, &got, &want, &format!("{} {guard:?}", v.name));
                            runs += 1;
                        }
                    }
                }
            }
        }
        runs
    }

    #[test]
    fn every_kernel_stays_inside_guarded_buffers() {
        let variants = all_variants();
        // Two threads, odd and even lengths (kernels and caches are shared).
        let runs: usize = std::thread::scope(|s| {
            let hs: Vec<_> = (0..2)
                .map(|t| {
                    let variants = &variants;
                    s.spawn(move || sweep(variants, (t..=130).step_by(2)))
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        eprintln!(
            "guard pages: {runs} guarded runs over {} kernel variants",
            variants.len()
        );
        assert!(runs > 0);
    }

    /// Outputs larger than the last-level cache (the sizes where backends switch to
    /// non-temporal / streaming stores), with odd tails, against the guard pages.
    #[test]
    fn large_streaming_outputs_stay_inside_guarded_buffers() {
        let mut rng = Rng::new(0xbb67_ae85_84ca_a73b);
        let n8 = 10_000_003; // s8 -> f32: 40 MB of dst
        let n4 = 20_000_001; // u4 -> bf16, group 128: 40 MB of dst, odd nibble count
        let configs = [
            Config {
                op: DynamicDequantize::per_tensor().into(),
                src_t: DType::S8,
                zps_t: Some(DType::S8),
                dst_t: DType::F32,
                shape: vec![n8],
                scale_shape: vec![1],
                zps_shape: vec![1],
                transposed: false,
                dst_transposed: false,
            },
            Config {
                op: DynamicDequantize::per_group(vec![128]).into(),
                src_t: DType::U4,
                zps_t: Some(DType::U4),
                dst_t: DType::BF16,
                shape: vec![n4],
                scale_shape: vec![n4.div_ceil(128)],
                zps_shape: vec![n4.div_ceil(128)],
                transposed: false,
                dst_transposed: false,
            },
        ];
        for cfg in &configs {
            let case = case(cfg, &mut rng);
            let want = case.run(reference()).expect("run");
            let (variants, guards) = match backend_variants() {
                v if v.is_empty() => {
                    path_unavailable("large guarded outputs on a fast backend (none built)");
                    (all_variants(), &[Guard::After][..])
                }
                v => (v, &[Guard::After, Guard::Before][..]),
            };
            for v in &variants {
                for &guard in guards {
                    for got in run_guarded(v.kernel, &case, guard) {
                        assert_bits(&case, &got, &want, &format!("{} {guard:?}", v.name));
                    }
                }
            }
        }
    }

    /// Outputs above this many bytes count as large in the store-strategy test (its
    /// `Tuning`), so its cases take every strategy's path
    /// at a size a debug build runs quickly.
    const LARGE_ABOVE: usize = 4096;

    /// Cases for every store strategy: dense dst of each dtype, wide enough that the
    /// JIT streams each guarded range (at least `dq_jit::STREAM_MIN_BYTES`), odd
    /// tails and nibble counts; and strided dst (transposed view), src dense or not.
    fn store_configs() -> Vec<Config> {
        let one_d = |op: Op, src_t, zps_t, dst_t, n: usize, ss: Vec<usize>| Config {
            op,
            src_t,
            zps_t,
            dst_t,
            shape: vec![n],
            zps_shape: ss.clone(),
            scale_shape: ss,
            transposed: false,
            dst_transposed: false,
        };
        let (n32, n16) = (50_021, 100_003);
        let (rows, cols) = (317, 159);
        let strided = |src_t, transposed| Config {
            op: DynamicDequantize::per_channel(-1).into(),
            src_t,
            zps_t: Some(DType::S32),
            dst_t: DType::F32,
            shape: vec![rows, cols],
            scale_shape: vec![cols],
            zps_shape: vec![cols],
            transposed,
            dst_transposed: true,
        };
        vec![
            one_d(
                DynamicDequantize::per_tensor().into(),
                DType::S8,
                Some(DType::S8),
                DType::F32,
                n32,
                vec![1],
            ),
            one_d(
                DynamicDequantize::per_group(vec![128]).into(),
                DType::U4,
                Some(DType::U4),
                DType::BF16,
                n16,
                vec![n16.div_ceil(128)],
            ),
            one_d(
                DynamicDequantize::per_channel(0).into(),
                DType::S4,
                None,
                DType::F16,
                n16,
                vec![n16],
            ),
            // Rows of 1001 (many vectors, a scale each) in one dense run: the
            // tiles' group starts fall mid-line, where the generated kernels
            // spend an overlapping vector to store the rest on whole lines.
            Config {
                op: DynamicDequantize::per_channel(0).into(),
                src_t: DType::S8,
                zps_t: Some(DType::S8),
                dst_t: DType::F32,
                shape: vec![53, 1001],
                scale_shape: vec![53],
                zps_shape: vec![53],
                transposed: false,
                dst_transposed: false,
            },
            strided(DType::U8, false),
            strided(DType::S8, true),
        ]
    }

    /// Every store strategy (plain; prefetch; non-temporal: the generated kernels'
    /// tile-and-stream path and the JIT's streamed blocks) of every fast kernel
    /// variant, against the guard pages on both sides, dense and strided dst: whole,
    /// split at n / 3, and on 3 threads in odd-length chunks.
    #[test]
    fn every_store_strategy_stays_inside_guarded_buffers() {
        let variants = backend_variants();
        if variants.is_empty() {
            path_unavailable("store strategies of a fast backend (none built)");
        }
        #[cfg(feature = "jit")]
        let jit = dq::jit::standard();
        let mut rng = Rng::new(0x3c6e_f372_fe94_f82b);
        for store in StoreStrategy::ALL {
            let _switch = store_switch(store, Some(LARGE_ABOVE));
            for cfg in store_configs() {
                let case = case(&cfg, &mut rng);
                let plan = case.plan().expect("valid case");
                let n = case.numel();
                let lowering = plan.lowering();
                // The kernels take `store` for this output (they ask `store_for`).
                assert_eq!(policy::store_for(lowering.output_bytes()), store, "{cfg:?}");
                assert_eq!(lowering.dst_dense, !cfg.dst_transposed, "{cfg:?}");
                let chunk = (n / 3) | 1;
                #[cfg(feature = "jit")]
                if store == StoreStrategy::NonTemporal && lowering.dst_dense {
                    // Every range below streams in the JIT.
                    let k = jit.kernel(&plan).expect("jit compiles");
                    for len in [n, n / 3, n - n / 3, chunk] {
                        assert!(k.streams(len), "{cfg:?}: {len} elements do not stream");
                    }
                }
                let want = case.run(reference()).expect("run");
                let _chunks = force_chunks(chunk);
                for v in &variants {
                    for guard in [Guard::After, Guard::Before] {
                        let what = format!("{} {} {guard:?}", v.name, store.name());
                        for got in run_guarded(v.kernel, &case, guard) {
                            assert_bits(&case, &got, &want, &what);
                        }
                        let got = guarded(&case, guard, |job| {
                            job.run_parallel(v.kernel, 3).expect("run_parallel")
                        });
                        assert_bits(&case, &got, &want, &format!("{what} 3 threads"));
                    }
                }
            }
            for v in &variants {
                ran(&format!("guard pages: {} store={}", v.name, store.name()));
            }
        }
    }

    /// A kernel that touches one byte outside a buffer, then does the right thing.
    pub(super) struct Overrun(pub &'static str);

    impl Kernel for Overrun {
        fn backend(&self) -> dq::Backend {
            dq::Backend::Reference
        }
        fn name(&self) -> &'static str {
            "overrun-probe"
        }
        fn supports(&self, _plan: &Plan) -> dq::Result<()> {
            Ok(())
        }
        unsafe fn run(&self, job: &Job<'_>, range: Range<usize>) {
            let src = job.src();
            match self.0 {
                // SAFETY: deliberately NOT sound: a probe that only runs in a child
                // process which is expected to die on the guard page.
                "src-after" => unsafe {
                    std::ptr::read_volatile(src.as_ptr().add(src.len()));
                },
                // SAFETY: as above.
                "src-before" => unsafe {
                    std::ptr::read_volatile(src.as_ptr().sub(1));
                },
                // SAFETY: as above.
                "dst-after" => unsafe {
                    std::ptr::write_volatile(job.dst_ptr().add(job.dst_len()), 0);
                },
                _ => {}
            }
            // SAFETY: this call's contract, passed on unchanged.
            unsafe { reference().run(job, range) };
        }
    }
}

/// Child half of the self-check: runs the harness with an overrunning kernel. Only
/// does anything when `DQ_GUARD_PROBE` is set (it is expected to crash).
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
#[ignore = "run by guard_pages_catch_a_one_byte_overrun in a child process"]
fn probe_overrun_child() {
    use support::cases::{CaseExt, case_strategy};
    use support::guard::Guard;
    let Ok(mode) = std::env::var("DQ_GUARD_PROBE") else {
        // Straight to stderr (libtest does not capture it): run by hand, this did nothing.
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "probe_overrun_child: did nothing; set DQ_GUARD_PROBE to run (it crashes on purpose)"
        );
        return;
    };
    let mode: &'static str = Box::leak(mode.into_boxed_str());
    let guard = if mode.ends_with("before") {
        Guard::Before
    } else {
        Guard::After
    };
    let kernel: &'static linux::Overrun = Box::leak(Box::new(linux::Overrun(mode)));
    // A plain non-empty case with exact-size buffers.
    use proptest::strategy::{Strategy, ValueTree};
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strat = case_strategy(Some(dq::OpKind::Dynamic));
    loop {
        let mut case = strat.new_tree(&mut runner).unwrap().current();
        if case.numel() == 0 {
            continue;
        }
        let need = case.src.desc.required_bytes(dq::Role::Src).unwrap();
        case.src.data.truncate(need);
        let need = case.dst.desc.required_bytes(dq::Role::Dst).unwrap();
        case.dst.data.truncate(need);
        linux::run_guarded(kernel, &case, guard);
        break;
    }
    println!("PROBE SURVIVED");
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn guard_pages_catch_a_one_byte_overrun() {
    use std::os::unix::process::ExitStatusExt;
    let name = support::test_name(module_path!(), "probe_overrun_child");
    for mode in ["src-after", "src-before", "dst-after", "none"] {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", &name, "--ignored", "--nocapture"])
            .args(["--test-threads", "1"])
            .env("DQ_GUARD_PROBE", mode)
            .output()
            .unwrap();
        let survived = String::from_utf8_lossy(&out.stdout).contains("PROBE SURVIVED");
        if mode == "none" {
            assert!(out.status.success() && survived, "control probe: {out:?}");
        } else {
            assert_eq!(
                out.status.signal(),
                Some(libc::SIGSEGV),
                "{mode}: a one-byte overrun was not caught: {out:?}"
            );
        }
    }
}
