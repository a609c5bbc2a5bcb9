//! `Job::run_parallel`'s choice to probe before splitting: work too small to pay
//! for waking a thread even at the fastest output speed is one call, unless its
//! output is large (its lines come from memory, as no kernel writes them that
//! fast): then the probe measures it. One test, as it sets the process-wide
//! large-output threshold.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

use dq::exec::{Job, Kernel};
use dq::{Backend, DynamicDequantize, Plan, Reference, Result, Tensor, TensorMut, policy};

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

/// Kernel calls of one `run_parallel` of `n` s8 -> f32 elements on 2 threads,
/// after checking its output.
fn calls(n: usize) -> usize {
    let q: Vec<i8> = (0..n).map(|i| i as i8).collect();
    let src = Tensor::from_slice(&q, &[n]);
    let scales = Tensor::from_slice(&[0.5f32], &[1]);
    let mut out = vec![-1.0f32; n];
    let mut dst = TensorMut::from_slice(&mut out, &[n]);
    let op = DynamicDequantize::per_tensor().into();
    let plan = Plan::new(&op, &src.desc, Some(&scales.desc), None, &dst.desc).unwrap();
    let k = Counted::default();
    plan.bind(&src, Some(&scales), None, &mut dst)
        .unwrap()
        .run_parallel(&k, 2)
        .unwrap();
    assert_eq!(out[n - 1], ((n - 1) as i8) as f32 * 0.5);
    k.0.load(Ordering::Relaxed)
}

#[test]
fn a_large_output_is_probed_however_small_the_floor_says_its_work_is() {
    // 64K f32 outputs take at least 256 KiB / 256 GB/s = 1 us: no split pays.
    let n = 1 << 16;
    assert_eq!(calls(n), 1, "a small output: one call, no probe");
    policy::set_large_output(Some(0));
    assert!(calls(n) >= 2, "a large output: the probe, then the rest");
    policy::set_large_output(None);
    assert_eq!(calls(n), 1, "the threshold restored");
}
