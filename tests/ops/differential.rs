//! Differential fuzzing: every backend `dq::backends()` offers must give the same dst
//! bytes as the scalar reference — bit for bit, NaN payloads included (same machine),
//! and bytes outside the dst view untouched — on random valid cases (see
//! `support::cases`) and under random thread counts and sub-range splits; with
//! `run_parallel` forced to cut small chunks at 1, 2, 3 and 7 threads; and on cases
//! large enough that `run_parallel` splits them by itself.
//!
//! Cases per property: `DQ_PROPTEST_CASES` (default 750; `scripts/fuzz-campaign.sh`
//! runs many more).
use crate::support;
use dq::OpKind;
use proptest::prelude::*;
use support::cases::{Case, CaseExt, assert_bits, case_strategy, split_ranges};
use support::paths::{default_chunks, force_chunks, ran};
use support::{Rng, Variant, backend_variants, proptest_cases, reference};

/// How a case is executed.
#[derive(Clone, Debug)]
enum Exec {
    /// `Job::run` on the caller's thread.
    Whole,
    /// Parts of the job (`JobPart`) cut at these points, run on concurrent threads.
    Split(Vec<u32>),
    /// `Job::run_parallel` with this many threads.
    Parallel(usize),
}

fn exec_strategy() -> impl Strategy<Value = Exec> {
    prop_oneof![
        1 => Just(Exec::Whole),
        3 => prop::collection::vec(any::<u32>(), 1..6).prop_map(Exec::Split),
        1 => (1usize..5).prop_map(Exec::Parallel),
    ]
}

fn execute(case: &Case, kernel: &dyn dq::kernel::Kernel, exec: &Exec) -> Vec<u8> {
    match exec {
        Exec::Whole => case.run(kernel).expect("run"),
        Exec::Split(cuts) => case.run_split(kernel, &split_ranges(case.numel(), cuts)),
        Exec::Parallel(t) => case.run_parallel(kernel, *t).expect("run_parallel"),
    }
}

/// The reference run whole, then every variant run with `exec`, must agree.
fn check(case: &Case, exec: &Exec) {
    check_variants(case, exec, &backend_variants());
}

fn check_variants(case: &Case, exec: &Exec, variants: &[Variant]) {
    let want = case.run(reference()).expect("run");
    // The reference itself under the split (checks the executor and range contract).
    assert_bits(
        case,
        &execute(case, reference(), exec),
        &want,
        &format!("reference {exec:?}"),
    );
    let plan = case.plan().expect("generated cases are valid");
    for v in variants {
        if let Err(e) = v.kernel.supports(&plan) {
            // Backends must accept every valid plan of the standard formula.
            panic!("{} refuses a valid plan: {e}\n{case:?}", v.name);
        }
        let got = execute(case, v.kernel, exec);
        assert_bits(case, &got, &want, &format!("{} {exec:?}", v.name));
    }
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: proptest_cases(750),
        max_shrink_iters: 2000,
        ..ProptestConfig::default()
    }
}

/// The thread counts every split test runs at.
const THREADS: [usize; 4] = [1, 2, 3, 7];

/// `Job::run_parallel` on `threads` threads with chunks forced to `chunk` elements
/// (so even small cases split, at boundaries of any alignment): every variant, and
/// the reference itself, equal the reference run whole.
fn check_forced_chunks(case: &Case, threads: usize, chunk: usize) {
    let want = case.run(reference()).expect("run");
    let _chunks = force_chunks(chunk);
    let what = |name: &str| format!("{name}: {threads} threads, chunks of {chunk}");
    let got = case
        .run_parallel(reference(), threads)
        .expect("run_parallel");
    assert_bits(case, &got, &want, &what("reference"));
    for v in backend_variants() {
        let got = case.run_parallel(v.kernel, threads).expect("run_parallel");
        assert_bits(case, &got, &want, &what(v.name));
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn forced_small_chunks_match_reference(
        case in case_strategy(None),
        threads in prop::sample::select(THREADS.to_vec()),
        chunk in prop_oneof![1usize..=16, 17usize..=300],
    ) {
        check_forced_chunks(&case, threads, chunk);
    }

    #[test]
    fn static_dequantize_matches_reference(case in case_strategy(Some(OpKind::Dequantize)), exec in exec_strategy()) {
        check(&case, &exec);
    }

    #[test]
    fn dynamic_dequantize_matches_reference(case in case_strategy(Some(OpKind::Dynamic)), exec in exec_strategy()) {
        check(&case, &exec);
    }

    #[test]
    fn axes_dequantize_matches_reference(case in case_strategy(Some(OpKind::Axes)), exec in exec_strategy()) {
        check(&case, &exec);
    }

    #[test]
    fn any_op_matches_reference(case in case_strategy(None), exec in exec_strategy()) {
        check(&case, &exec);
    }
}

/// The strategies reach what they are meant to: zero-sized and scalar shapes, every
/// rank, strided views, per-group remainders (a generator that silently stopped
/// covering these would make the properties above vacuous).
#[test]
fn generator_covers_the_edges() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strat = case_strategy(None);
    let (mut empty, mut scalar, mut strided, mut ranks, mut remainder) = (0, 0, 0, [0; 7], 0);
    let mut nan_scale = 0;
    for _ in 0..2000 {
        let c = strat.new_tree(&mut runner).unwrap().current();
        let shape = &c.src.desc.shape;
        ranks[shape.len()] += 1;
        empty += (c.numel() == 0) as usize;
        scalar += shape.is_empty() as usize;
        strided += (!c.src.desc.is_dense() || !c.dst.desc.is_dense()) as usize;
        if let dq::Op::Dynamic(dq::DynamicDequantize {
            group_shape: Some(g),
            ..
        }) = &c.op
        {
            remainder += shape.iter().zip(g).any(|(&d, &g)| d % g as usize != 0) as usize;
        }
        if let Some(s) = c.scales.as_ref().filter(|s| s.desc.dtype == dq::DType::F16) {
            nan_scale += s
                .data
                .chunks(2)
                .any(|x| half::f16::from_le_bytes([x[0], x[1]]).is_nan())
                as usize;
        }
    }
    assert!(empty > 20, "zero-sized cases: {empty}");
    assert!(scalar > 20, "scalar cases: {scalar}");
    assert!(strided > 300, "strided cases: {strided}");
    assert!(ranks.iter().all(|&n| n > 100), "ranks: {ranks:?}");
    assert!(remainder > 50, "group remainders: {remainder}");
    assert!(nan_scale > 20, "f16 NaN scales: {nan_scale}");
}

/// Cases large enough that `run_parallel` splits them by itself (several executor
/// chunks): 4-bit per group with an odd element count, 8-bit per channel into a
/// transposed (strided) dst, s32 zero points into f16, and the axes form into f64.
fn large_cases() -> Vec<Case> {
    use dq::case::OwnedTensor;
    use dq::{AxesDequantize, DType, DynamicDequantize, TensorDesc};
    use support::cases::{float_bytes, int_bytes};
    let mut rng = Rng::new(0x510e_527f_ade6_82d1);
    let mut make =
        |op: dq::Op, src: TensorDesc, ss: &[usize], zps: Option<DType>, dst: TensorDesc| {
            let need = |d: &TensorDesc| d.required_bytes(dq::Role::Src).unwrap();
            let sd = TensorDesc::new(dst.dtype, ss);
            let scales = float_bytes(&mut rng, dst.dtype, need(&sd), 2);
            let zps = zps.map(|t| {
                let zd = TensorDesc::new(t, ss);
                let zb = int_bytes(&mut rng, t, need(&zd));
                OwnedTensor::new(zd, zb)
            });
            Case {
                op,
                src: OwnedTensor::new(src.clone(), int_bytes(&mut rng, src.dtype, need(&src))),
                scales: Some(OwnedTensor::new(sd, scales)),
                zps,
                dst: OwnedTensor::new(dst.clone(), rng.bytes(need(&dst))),
            }
        };
    let n = 150_001;
    let (rows, cols) = (391, 257);
    let transposed = TensorDesc::new(DType::F32, &[rows, cols]).with_strides(&[1, rows]);
    vec![
        make(
            DynamicDequantize::per_group(vec![64]).into(),
            TensorDesc::new(DType::U4, &[n]),
            &[n.div_ceil(64)],
            Some(DType::U8),
            TensorDesc::new(DType::BF16, &[n]),
        ),
        make(
            DynamicDequantize::per_channel(-1).into(),
            TensorDesc::new(DType::S8, &[rows, cols]),
            &[cols],
            Some(DType::S8),
            transposed,
        ),
        make(
            DynamicDequantize::per_channel(0).into(),
            TensorDesc::new(DType::U8, &[rows, cols]),
            &[rows],
            Some(DType::S32),
            TensorDesc::new(DType::F16, &[rows, cols]),
        ),
        make(
            AxesDequantize::new(vec![1]).into(),
            TensorDesc::new(DType::S32, &[rows, cols]),
            &[cols],
            Some(DType::S32),
            TensorDesc::new(DType::F64, &[rows, cols]),
        ),
    ]
}

/// Large cases on every variant: `run_parallel` at 1, 2, 3 and 7 threads with the
/// executor's own chunks, then random sub-ranges (job parts on their own threads).
#[test]
fn large_cases_split_at_1_2_3_7_threads_and_random_ranges() {
    let mut rng = Rng::new(77);
    let _natural = default_chunks();
    // With the measured split (the probe, then as many threads as pay; timed
    // however small the case, where a fast kernel's 150k elements would otherwise
    // make one call), then split over every thread whatever the measurement says.
    for forced in [false, true] {
        let tuning = dq::policy::Tuning::new();
        let tuning = if forced {
            tuning.with_split()
        } else {
            tuning.with_probe()
        };
        let _tuning = tuning.enter();
        for case in large_cases() {
            let n = case.numel();
            assert!(dq::exec::split(n, 2).len() > 1, "{n} elements do not split");
            let want = case.run(reference()).expect("run");
            for v in backend_variants() {
                for threads in THREADS {
                    let got = case.run_parallel(v.kernel, threads).expect("run_parallel");
                    let what = format!("{} {threads} threads, forced {forced}", v.name);
                    assert_bits(&case, &got, &want, &what);
                }
                for _ in 0..3 {
                    let cuts: Vec<u32> = (0..1 + rng.below(7))
                        .map(|_| rng.next_u64() as u32)
                        .collect();
                    let got = case.run_split(v.kernel, &split_ranges(n, &cuts));
                    assert_bits(&case, &got, &want, &format!("{} cut at {cuts:?}", v.name));
                }
            }
        }
    }
    for v in backend_variants() {
        ran(&format!(
            "parallel splits at 1, 2, 3, 7 threads: {}",
            v.name
        ));
    }
}

/// A kernel that skips the last element of every range it is given.
struct SkipsLast;

impl dq::kernel::Kernel for SkipsLast {
    fn backend(&self) -> dq::Backend {
        dq::Backend::Reference
    }
    fn name(&self) -> &'static str {
        "skips-last"
    }
    fn supports(&self, _plan: &dq::Plan) -> dq::Result<()> {
        Ok(())
    }
    unsafe fn run(&self, job: &dq::Job<'_>, range: std::ops::Range<usize>) {
        // SAFETY: a sub-range of this call's range, under this call's contract.
        unsafe { reference().run(job, range.start..range.end - 1) };
    }
}

/// The property can fail: a kernel that leaves one element unwritten is caught.
#[test]
fn a_wrong_kernel_is_caught() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    static BROKEN: SkipsLast = SkipsLast;
    let broken = [Variant {
        name: "skips-last",
        kernel: &BROKEN,
    }];
    let mut runner = TestRunner::deterministic();
    let strat = case_strategy(Some(OpKind::Dynamic));
    let mut caught = 0;
    for _ in 0..50 {
        let case = strat.new_tree(&mut runner).unwrap().current();
        if case.numel() == 0 {
            continue;
        }
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            check_variants(&case, &Exec::Whole, &broken)
        }));
        assert!(r.is_err(), "missed a skipped element:\n{case:?}");
        caught += 1;
    }
    assert!(caught > 30, "only {caught} non-empty cases");
}
