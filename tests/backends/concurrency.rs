//! Many threads at once: identical and different plans through `dq::dequantize` (every
//! backend choice, so the JIT's shared cache when it is built in), through
//! `Job::run_parallel` on shared inputs, and through a job's parts (`JobPart`) on the
//! caller's own threads, checked bit for bit against the reference.
//!
//! `DQ_CONCURRENCY_SMALL=1` shrinks the workload (for `scripts/valgrind-concurrency.sh`).
use std::sync::Barrier;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::support;
use dq::case::OwnedTensor;
use dq::{Backend, OpKind, Options, Plan, TensorMut};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;
use support::cases::{Case, CaseExt, assert_bits, case_strategy, split_ranges};
use support::{Rng, all_variants, path_unavailable, reference};

fn small() -> bool {
    std::env::var_os("DQ_CONCURRENCY_SMALL").is_some()
}

/// `n` random valid cases, plus one large enough for `run_parallel` to split.
fn workload(n: usize) -> Vec<(Case, Vec<u8>)> {
    let mut runner = TestRunner::deterministic();
    let strat = case_strategy(None);
    let mut cases: Vec<Case> = (0..n)
        .map(|_| strat.new_tree(&mut runner).unwrap().current())
        .collect();
    cases.push(large_case(if small() { 70_000 } else { 300_000 }));
    cases
        .into_iter()
        .map(|c| {
            let want = c.run(reference()).unwrap();
            (c, want)
        })
        .collect()
}

/// A per-group u4 -> bf16 case of `n` elements (above the executor's chunk size).
fn large_case(n: usize) -> Case {
    let mut rng = Rng::new(42);
    let groups = n.div_ceil(64);
    Case {
        op: dq::DynamicDequantize::per_group(vec![64]).into(),
        src: OwnedTensor::new(
            dq::TensorDesc::new(dq::DType::U4, &[n]),
            rng.bytes(n.div_ceil(2)),
        ),
        scales: Some(OwnedTensor::new(
            dq::TensorDesc::new(dq::DType::BF16, &[groups]),
            support::cases::float_bytes(&mut rng, dq::DType::BF16, groups * 2, 1),
        )),
        zps: Some(OwnedTensor::new(
            dq::TensorDesc::new(dq::DType::U8, &[groups]),
            rng.bytes(groups),
        )),
        dst: OwnedTensor::new(dq::TensorDesc::new(dq::DType::BF16, &[n]), vec![0; n * 2]),
    }
}

/// Runs `case` through `dq::dequantize` with `opts`; `None` when the backend is not
/// in this build (reported by `path_unavailable`).
fn via_api(case: &Case, opts: &Options) -> Option<Vec<u8>> {
    let mut out = case.dst.data.clone();
    let src = case.src.view();
    let scales = case.scales.as_ref().map(OwnedTensor::view);
    let zps = case.zps.as_ref().map(OwnedTensor::view);
    let mut dst = TensorMut {
        desc: case.dst.desc.clone(),
        data: &mut out,
    };
    match dq::dequantize(
        &case.op,
        &src,
        scales.as_ref(),
        zps.as_ref(),
        &mut dst,
        opts,
    ) {
        Ok(()) => Some(out),
        // A backend this build lacks; one it has must run every valid case.
        Err(dq::Error::BackendUnavailable { .. })
            if opts.backend() != Backend::Auto && dq::backends().get(opts.backend()).is_none() =>
        {
            path_unavailable(&format!("backend {} (not in this build)", opts.backend()));
            None
        }
        Err(e) => panic!("dequantize with {} failed: {e}\n{case:?}", opts.backend()),
    }
}

/// Every thread walks the whole workload from its own starting point (so identical
/// and different plans run at the same time), with every backend choice.
#[test]
fn threads_share_plans_and_backends() {
    let (threads, n, rounds) = if small() { (4, 12, 1) } else { (8, 60, 2) };
    let work = workload(n);
    let barrier = Barrier::new(threads);
    let ran = AtomicUsize::new(0);
    let absent = AtomicUsize::new(0);
    let backends = support::built_backends();
    std::thread::scope(|s| {
        for t in 0..threads {
            let (work, barrier, ran, absent) = (&work, &barrier, &ran, &absent);
            let backends = &backends;
            s.spawn(move || {
                barrier.wait();
                for round in 0..rounds {
                    for i in 0..work.len() {
                        let (case, want) = &work[(i + t * 7 + round) % work.len()];
                        let backend = backends[(i + t) % backends.len()];
                        let opts = Options::new()
                            .with_backend(backend)
                            .with_threads(1 + (i + t) % 3);
                        match via_api(case, &opts) {
                            Some(got) => {
                                assert_bits(case, &got, want, &format!("{backend} thread {t}"));
                                ran.fetch_add(1, Ordering::Relaxed);
                            }
                            None => {
                                absent.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                }
            });
        }
    });
    // Every run ran, but those of a backend this build lacks (reported above).
    let absent = absent.into_inner();
    let built = backends
        .iter()
        .all(|&b| b == Backend::Auto || dq::backends().get(b).is_some());
    assert!(!built || absent == 0, "{absent} runs found no backend");
    assert_eq!(ran.into_inner() + absent, threads * rounds * work.len());
}

/// One plan and one set of inputs shared by every thread; each thread runs its own
/// dst through `Job::run_parallel` (1, 2, 3 or 7 threads) with every kernel variant.
#[test]
fn one_plan_many_run_parallel_calls() {
    let case = large_case(if small() { 70_000 } else { 200_000 });
    let want = case.run(reference()).unwrap();
    let plan: Plan = case.plan().unwrap();
    let threads = if small() { 3 } else { 6 };
    let barrier = Barrier::new(threads);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (case, want, plan, barrier) = (&case, &want, &plan, &barrier);
            s.spawn(move || {
                barrier.wait();
                for v in all_variants() {
                    let mut got = case.dst.data.clone();
                    let threads = [1, 2, 3, 7][t % 4];
                    case.with_job(plan, &mut got, |job| job.run_parallel(v.kernel, threads))
                        .unwrap()
                        .unwrap();
                    assert_bits(case, &got, want, &format!("{} thread {t}", v.name));
                }
            });
        }
    });
}

/// A job split into parts (`Job::parts`, and `split_at` at random cut points), each
/// part on its own scoped thread, gives the single-thread bits on every kernel.
#[test]
fn job_parts_on_own_threads_match_one_thread() {
    let case = large_case(if small() { 70_000 } else { 200_000 });
    let want = case.run(reference()).unwrap();
    let plan = case.plan().unwrap();
    let mut rng = Rng::new(11);
    for v in all_variants() {
        assert_bits(&case, &case.run(v.kernel).unwrap(), &want, v.name);
        for n in [1, 2, 3, 8, 64] {
            let mut got = case.dst.data.clone();
            let covered = case
                .with_job(&plan, &mut got, |job| {
                    let parts: Vec<_> = job.parts(n).unwrap().collect();
                    let covered: usize = parts.iter().map(|p| p.range().len()).sum();
                    std::thread::scope(|s| {
                        for mut p in parts {
                            s.spawn(move || p.run(v.kernel).unwrap());
                        }
                    });
                    covered
                })
                .unwrap();
            assert_eq!(covered, case.numel());
            assert_bits(&case, &got, &want, &format!("{} {n} parts", v.name));
        }
        for _ in 0..4 {
            let cuts: Vec<u32> = (0..1 + rng.below(6))
                .map(|_| rng.next_u64() as u32)
                .collect();
            let got = case.run_split(v.kernel, &split_ranges(case.numel(), &cuts));
            assert_bits(&case, &got, &want, &format!("{} cut at {cuts:?}", v.name));
        }
    }
}

/// Different op kinds in different threads, each also splitting its own job.
#[test]
fn different_ops_in_parallel_with_splits() {
    let per = if small() { 6 } else { 40 };
    std::thread::scope(|s| {
        for (t, kind) in [OpKind::Dequantize, OpKind::Dynamic, OpKind::Axes]
            .into_iter()
            .enumerate()
        {
            s.spawn(move || {
                let mut runner = TestRunner::deterministic();
                let strat = case_strategy(Some(kind));
                for i in 0..per {
                    let case = strat.new_tree(&mut runner).unwrap().current();
                    let want = case.run(reference()).unwrap();
                    let n = case.numel();
                    let ranges = [0..n / 4, n / 4..n / 2, n / 2..n];
                    for v in all_variants() {
                        let got = case.run_split(v.kernel, &ranges);
                        assert_bits(&case, &got, &want, &format!("{} {t}/{i}", v.name));
                    }
                }
            });
        }
    });
}

/// A huge thread count (user input, e.g. the CLI's `--threads`) is not a panic.
#[test]
fn huge_thread_count_is_not_a_panic() {
    let case = large_case(70_000);
    let want = case.run(reference()).unwrap();
    let plan = case.plan().unwrap();
    for threads in [1_000_000, usize::MAX] {
        let mut got = case.dst.data.clone();
        let r = case
            .with_job(&plan, &mut got, |job| {
                job.run_parallel(reference(), threads)
            })
            .unwrap();
        match r {
            Ok(()) => assert_bits(&case, &got, &want, &format!("{threads} threads")),
            Err(e) => assert_eq!(got, case.dst.data, "{threads} threads: {e}: dst written"),
        }
    }
}
