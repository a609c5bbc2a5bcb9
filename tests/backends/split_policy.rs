//! `Job::run_parallel`'s choice to probe before splitting: work too small to pay
//! for waking a thread even at the fastest output speed is one call, unless its
//! output is large (its lines come from memory, as no kernel writes them that
//! fast): then the probe measures it. The threshold is set by a `Tuning` on the
//! test's thread only.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

use dq::case::Case;
use dq::exec::{Job, Kernel};
use dq::kernel::Reference;
use dq::{Backend, DType, DynamicDequantize, Plan, Result, TensorDesc, policy};

/// The reference, counting its calls.
#[derive(Default)]
struct Counted(AtomicUsize, Reference);

impl Kernel for Counted {
    fn backend(&self) -> Backend {
        self.1.backend()
    }
    fn supports(&self, plan: &Plan) -> Result<()> {
        self.1.supports(plan)
    }
    unsafe fn run(&self, job: &Job<'_>, range: Range<usize>) {
        self.0.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as the caller promised.
        unsafe { self.1.run(job, range) }
    }
}

/// Kernel calls of one `run_parallel` of `n` s8 -> f32 elements (per tensor) on 2
/// threads, after checking its output against a run on one thread.
fn calls(n: usize) -> usize {
    let case = Case::generate(
        DynamicDequantize::per_tensor().into(),
        TensorDesc::new(DType::S8, &[n]),
        Some(TensorDesc::new(DType::F32, &[1])),
        None,
        TensorDesc::new(DType::F32, &[n]),
        n as u64,
    )
    .unwrap();
    let k = Counted::default();
    let got = case.run_parallel(&k, 2).unwrap();
    let calls = k.0.load(Ordering::Relaxed);
    assert!(
        got == case.run(&Reference::default()).unwrap(),
        "{n} elements"
    );
    calls
}

#[test]
fn a_large_output_is_probed_however_small_the_floor_says_its_work_is() {
    // 4 * PROBE f32 outputs take at least 256 KiB / 256 GB/s = 1 us, far below any
    // pool's wake-up (tens of microseconds): no split pays.
    let n = 4 * dq::exec::PROBE;
    assert_eq!(calls(n), 1, "a small output: one call, no probe");
    let large = policy::Tuning::new().with_large_above(0);
    assert!(
        large.scope(|| calls(n)) >= 2,
        "a large output: the probe, then the rest"
    );
    assert_eq!(calls(n), 1, "the threshold restored");
}
