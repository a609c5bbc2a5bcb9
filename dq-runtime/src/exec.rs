//! Running a backend over a job, on a range or in parallel (SPEC §7): the store
//! strategy races and the thread pool. Jobs and the [`Kernel`] interface:
//! [`crate::job`], re-exported here.

use core::ops::Range;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::job::Backend;
pub use crate::job::{DstBuf, Job, JobPart, Kernel, KernelStats};
use crate::plan::Plan;
use crate::policy::{self, Tuning};

// Running a job: these methods of `Job` live here, beside the store races and
// the pool they use, above the kernels (the type and its other methods: `job`).
impl Job<'_> {
    /// Runs `kernel` for the logical elements `range` (SPEC §7).
    ///
    /// # Errors
    /// [`Error::BadRange`] outside `0..=numel`, or the kernel's own refusal.
    pub fn run_range(&mut self, kernel: &dyn Kernel, range: Range<usize>) -> Result<()> {
        let n = self.plan().numel();
        if range.start > range.end || range.end > n {
            return Err(Error::BadRange {
                start: range.start,
                end: range.end,
                elements: n,
            });
        }
        kernel.supports(self.plan())?;
        if !range.is_empty() {
            // SAFETY: `range` is inside the plan (checked), `supports` said yes,
            // and `&mut self` keeps every other run of this job out while this
            // one lasts.
            unsafe { run_raced(self, kernel, range) };
        }
        Ok(())
    }

    /// Runs `kernel` over every element.
    ///
    /// # Errors
    /// The kernel's refusal ([`Error::BackendUnavailable`]).
    pub fn run(&mut self, kernel: &dyn Kernel) -> Result<()> {
        self.run_range(kernel, 0..self.plan().numel())
    }

    /// Runs `kernel` over every element on up to `threads` threads (a cached rayon
    /// pool). The result is bit-identical to [`run`](Self::run).
    ///
    /// The first [`PROBE`] elements run on the caller's thread, timed; the rest is
    /// split over as many threads as [`policy::threads_for`] says pay for waking
    /// them (the pool's wake-up measured once per pool), so a split is never
    /// slower than one thread by more than noise; one thread runs the rest itself.
    /// Work too small to pay for any wake-up runs in one call ([`fill_parallel`]
    /// splits the same way).
    ///
    /// # Errors
    /// [`Error::ZeroThreads`], or the kernel's refusal.
    pub fn run_parallel(&mut self, kernel: &dyn Kernel, threads: usize) -> Result<()> {
        if threads == 0 {
            return Err(Error::ZeroThreads);
        }
        kernel.supports(self.plan())?;
        let n = self.plan().numel();
        if threads == 1 || n == 0 {
            return self.run(kernel);
        }
        let plan = self.plan();
        raced(plan, kernel, n, |store| {
            self.split_run(kernel, threads, store)
        });
        Ok(())
    }

    /// [`run_parallel`](Self::run_parallel)'s split ([`spread`]), every part
    /// storing large outputs as `store` (when set).
    fn split_run(
        &mut self,
        kernel: &dyn Kernel,
        threads: usize,
        store: Option<policy::StoreStrategy>,
    ) {
        let n = self.plan().numel();
        let out_bytes = self.plan().lowering().output_bytes();
        let job = &*self;
        let tuning = Tuning::current();
        // SAFETY (both arms): `spread` hands out ranges inside `0..n` that are
        // pairwise disjoint, `supports` said yes, and `&mut self` keeps every
        // other run of this job out while these last.
        spread(n, 1, out_bytes, threads, &mut |step| match step {
            Step::Here(r) => policy::with_call_store(store, || unsafe { kernel.run(job, r) }),
            Step::Pool(pool, chunks) => pool.install(|| {
                chunks.into_par_iter().for_each(|r| {
                    let run = || unsafe { kernel.run(job, r) };
                    tuning.scope(|| policy::with_call_store(store, run))
                })
            }),
        });
    }
}

/// Where [`spread`] runs a part of the work.
enum Step<'p> {
    /// On the caller's thread.
    Here(Range<usize>),
    /// These disjoint chunks, in order, on the pool's threads.
    Pool(&'p rayon::ThreadPool, Vec<Range<usize>>),
}

/// Runs elements `0..n` (whole units of `unit` elements; `n` a multiple of it)
/// whose output is `out_bytes`, on up to `threads` threads: every range `step`
/// gets is cut at units, and together they cover `0..n` once, in order.
///
/// The first [`PROBE`] elements run on the caller's thread, timed; the rest is
/// split over as many threads as [`policy::threads_for`] says pay for waking
/// them (the pool's wake-up measured once per pool), so a split is never slower
/// than one thread by more than noise. Work that cannot pay for a wake-up even
/// at the fastest speed any kernel writes ([`policy::FASTEST_NS_PER_BYTE`]) runs
/// in one step, unprobed, on the caller's thread: tiny tensors cost no dispatch.
fn spread(n: usize, unit: usize, out_bytes: usize, threads: usize, step: &mut dyn FnMut(Step<'_>)) {
    let unit = unit.max(1);
    let tuning = Tuning::current();
    let forced = tuning.forces_split();
    // The probe's elements (none when forced), and the rest.
    let start = if forced {
        0
    } else {
        PROBE.next_multiple_of(unit).min(n)
    };
    let rest = n - start;
    // More threads than chunks would idle; bounding the pool by the work also
    // bounds what a huge requested count can spawn.
    let mut threads = threads.min(split_units(rest, threads, unit).len());
    let wake = match threads {
        2.. if !forced => pool(threads).map_or(f64::INFINITY, |(_, wake)| wake),
        _ => f64::INFINITY,
    };
    if !forced && !tuning.always_probes() && !policy::is_large_output(out_bytes) {
        // Work that cannot pay for a wake-up even at the fastest speed any
        // kernel writes its output: one call, no probe (two calls instead of
        // one cost small plans up to 40%). Not for an output whose lines come
        // from memory, which no kernel writes at that speed: on a 2-vCPU AMD
        // EPYC (Zen 4) VM with a slow pool wake-up, u4 -> f16 4096x4096 fell
        // under this floor and never split (BENCHMARKS.md).
        let floor = policy::FASTEST_NS_PER_BYTE * out_bytes as f64 / n.max(1) as f64;
        if policy::threads_for(n, floor, wake, threads) < 2 {
            return step(Step::Here(0..n));
        }
    }
    if !forced {
        let t = Instant::now();
        step(Step::Here(0..start));
        let ns = t.elapsed().as_nanos() as f64 / start.max(1) as f64;
        threads = policy::threads_for(rest, ns, wake, threads);
    }
    let pool = (threads > 1).then(|| pool(threads)).flatten();
    let Some((pool, _)) = pool else {
        // One thread, or no threads to be had: the same bits on this thread.
        if rest > 0 {
            step(Step::Here(start..n));
        }
        return;
    };
    let chunks: Vec<_> = (split_units(rest, threads, unit).into_iter())
        .map(|r| r.start + start..r.end + start)
        .collect();
    DISPATCHES.set(DISPATCHES.get() + 1);
    step(Step::Pool(&pool, chunks));
}

/// Fills `out`, whole units of `per_unit` elements, on up to `threads` threads of
/// the pool [`Job::run_parallel`] uses, split as it splits (probe, then the
/// threads that pay; work too small for any wake-up on the caller's thread):
/// `fill(first, part)` writes `part`, the units from unit `first` on. Each unit
/// is written by one call, so the bits do not depend on the thread count; a
/// trailing partial unit is not written.
///
/// ```
/// let mut out = vec![0u32; 3 * 1000];
/// dq_runtime::exec::fill_parallel(&mut out, 3, 2, &|first, part| {
///     for (i, u) in part.chunks_mut(3).enumerate() {
///         u.fill((first + i) as u32);
///     }
/// });
/// assert_eq!(out[3 * 999], 999);
/// ```
pub fn fill_parallel<T: Send>(
    out: &mut [T],
    per_unit: usize,
    threads: usize,
    fill: &(dyn Fn(usize, &mut [T]) + Sync),
) {
    if per_unit == 0 || out.len() < per_unit {
        return;
    }
    let n = out.len() / per_unit * per_unit;
    let out = &mut out[..n];
    if threads <= 1 {
        return fill(0, out);
    }
    let bytes = core::mem::size_of_val(out);
    let mut out = Some(out);
    let mut done = 0;
    spread(n, per_unit, bytes, threads.max(1), &mut |step| {
        let Some(rest) = out.take() else { return };
        match step {
            Step::Here(r) => {
                let (part, tail) = rest.split_at_mut(r.len());
                fill(done / per_unit, part);
                done = r.end;
                out = Some(tail);
            }
            Step::Pool(pool, chunks) => {
                let mut tail = rest;
                let mut parts = Vec::with_capacity(chunks.len());
                for r in chunks {
                    let (part, t) = tail.split_at_mut(r.len());
                    parts.push((r.start / per_unit, part));
                    tail = t;
                }
                let tuning = Tuning::current();
                pool.install(|| {
                    parts
                        .into_par_iter()
                        .for_each(|(f, p)| tuning.scope(|| fill(f, p)))
                });
            }
        }
    });
}

/// Work this thread handed to a pool's threads so far ([`Job::run_parallel`],
/// [`fill_parallel`]): work run on the caller's thread alone does not count, nor
/// work other threads handed over (so threads running beside a test that reads it
/// do not move it).
pub fn dispatches() -> u64 {
    DISPATCHES.get()
}

thread_local! {
    /// This thread's [`dispatches`].
    static DISPATCHES: core::cell::Cell<u64> = const { core::cell::Cell::new(0) };
}

/// Smallest chunk worth a task, in elements.
const MIN_CHUNK: usize = 1 << 15;

/// Elements [`Job::run_parallel`] runs and times on the caller's thread before
/// choosing how many threads the rest pays for.
pub const PROBE: usize = 1 << 14;

/// Splits `0..n` into about four chunks per thread, each a multiple of 64 elements
/// (so threads do not share dst cache lines in dense layouts), or as long as the
/// current [`Tuning`]'s chunk.
pub fn split(n: usize, threads: usize) -> Vec<Range<usize>> {
    split_units(n, threads, 1)
}

/// [`split`] with every chunk also a multiple of `unit` elements.
fn split_units(n: usize, threads: usize, unit: usize) -> Vec<Range<usize>> {
    let want = threads.saturating_mul(4).max(1);
    let size = match Tuning::current().chunk() {
        None => n.div_ceil(want).max(MIN_CHUNK).next_multiple_of(64),
        Some(forced) => forced,
    };
    let size = size.next_multiple_of(unit.max(1));
    (0..n).step_by(size).map(|s| s..(s + size).min(n)).collect()
}

/// A rayon pool with `threads` threads and its wake-up cost in ns (the median of
/// a few timed empty dispatches to every thread, after idling), built and timed
/// once per count; `None` when the threads cannot be created.
fn pool(threads: usize) -> Option<(Arc<rayon::ThreadPool>, f64)> {
    type Pools = HashMap<usize, (Arc<rayon::ThreadPool>, f64)>;
    static POOLS: OnceLock<Mutex<Pools>> = OnceLock::new();
    let mut pools = POOLS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(p) = pools.get(&threads) {
        return Some(p.clone());
    }
    let p = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("dq-worker-{i}"))
        .build()
        .ok()?;
    let wake = wake_ns(&p);
    Some(pools.entry(threads).or_insert((Arc::new(p), wake)).clone())
}

/// Empty dispatches timed by [`wake_ns`].
const WAKE_SAMPLES: usize = 5;

/// The median time of an empty dispatch to every thread of `pool` after its
/// threads have gone idle, in ns.
fn wake_ns(pool: &rayon::ThreadPool) -> f64 {
    pool.broadcast(|_| ());
    let mut t: Vec<u128> = (0..WAKE_SAMPLES)
        .map(|_| {
            std::thread::sleep(Duration::from_micros(300));
            let start = Instant::now();
            pool.broadcast(|_| ());
            start.elapsed().as_nanos()
        })
        .collect();
    t.sort_unstable();
    t[WAKE_SAMPLES / 2] as f64
}

/// The key of `backend`'s store race on `plan`.
fn store_key(plan: &Plan, backend: Backend) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (plan.lowering(), backend).hash(&mut h);
    h.finish()
}

/// The store strategy `kernel`'s calls of `plan` settled on for large outputs
/// ([`policy::race_store`], [`Kernel::store_backend`]); `None` while racing or
/// when no race ran.
pub fn raced_store(plan: &Plan, kernel: &dyn Kernel) -> Option<policy::StoreStrategy> {
    policy::chosen_store(store_key(plan, kernel.store_backend()?))
}

/// Runs `f`, one whole call of `kernel` over `elements` elements of `plan`, with
/// the store strategy of the plan's race ([`policy::race_store`]) and reports its
/// time; `f` gets `None` (the process-wide strategy) when no race applies.
fn raced<R>(
    plan: &Plan,
    kernel: &dyn Kernel,
    elements: usize,
    f: impl FnOnce(Option<policy::StoreStrategy>) -> R,
) -> R {
    raced_settled(plan, kernel, elements, f).0
}

/// Runs `kernel` over `range` of `job` as one call, storing as its plan's store
/// race says ([`raced`]); returns whether that was the race's settled strategy
/// (or the process's, where no race applies): false while the race still tries
/// strategies.
///
/// # Safety
/// [`Kernel::run`]'s contract for `job`, `kernel` and `range`.
pub(crate) unsafe fn run_raced(job: &Job<'_>, kernel: &dyn Kernel, range: Range<usize>) -> bool {
    let n = range.len();
    let ((), settled) = raced_settled(job.plan(), kernel, n, |store| {
        // SAFETY: the caller's contract.
        policy::with_call_store(store, || unsafe { kernel.run(job, range) })
    });
    settled
}

/// [`raced`], also saying whether the call stored as the race settled (see
/// [`run_raced`]).
fn raced_settled<R>(
    plan: &Plan,
    kernel: &dyn Kernel,
    elements: usize,
    f: impl FnOnce(Option<policy::StoreStrategy>) -> R,
) -> (R, bool) {
    let Some(backend) = kernel.store_backend() else {
        return (f(None), true);
    };
    let key = || store_key(plan, backend);
    let Some((store, timed)) = policy::race_store(plan.lowering().output_bytes(), key) else {
        return (f(None), true);
    };
    let t = Instant::now();
    let r = f(Some(store));
    if timed {
        let ns = t.elapsed().as_nanos() as f64 / elements.max(1) as f64;
        policy::report_store(key(), store, ns);
    }
    (r, !timed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DynamicDequantize, Reference, Tensor, TensorMut};

    /// Binds `n` s8 elements (0, 1, ..) with scale 0.5 to an f32 dst and calls `f`.
    fn with_job<R>(n: usize, f: impl FnOnce(&mut Job<'_>) -> R) -> (R, Vec<f32>) {
        let q: Vec<i8> = (0..n).map(|i| i as i8).collect();
        let src = Tensor::from_slice(&q, &[n]);
        let scales = Tensor::from_slice(&[0.5f32], &[1]);
        let mut out = vec![-1.0f32; n];
        let mut dst = TensorMut::from_slice(&mut out, &[n]);
        let op = DynamicDequantize::per_tensor().into();
        let plan = Plan::new(&op, &src.desc, Some(&scales.desc), None, &dst.desc).unwrap();
        let r = f(&mut plan.bind(&src, Some(&scales), None, &mut dst).unwrap());
        (r, out)
    }

    #[test]
    fn parts_cover_everything_once_evenly() {
        for n in [0, 1, 5, 64, 1000] {
            for k in [1, 2, 3, 7, 1000] {
                let (ranges, _) = with_job(n, |job| {
                    let parts = job.parts(k).unwrap();
                    assert_eq!(parts.len(), k);
                    parts.map(|p| p.range()).collect::<Vec<_>>()
                });
                let mut next = 0;
                for r in &ranges {
                    assert_eq!(r.start, next);
                    assert!(r.len() == n / k || r.len() == n / k + 1, "{n} {k} {r:?}");
                    next = r.end;
                }
                assert_eq!(next, n);
            }
        }
        let ((), _) = with_job(3, |job| {
            assert_eq!(job.parts(0).err(), Some(Error::ZeroThreads));
            // Lazy: a huge count makes no parts up front.
            let mut parts = job.parts(usize::MAX).unwrap();
            assert_eq!(parts.len(), usize::MAX);
            assert_eq!(parts.next().unwrap().range(), 0..0);
        });
    }

    #[test]
    fn split_at_checks_the_part() {
        let outside = |at, start, end| Some(Error::SplitOutside { at, start, end });
        let ((), _) = with_job(10, |job| {
            assert_eq!(job.split_at(11).err(), outside(11, 0, 10));
            let (a, b) = job.split_at(4).unwrap();
            assert_eq!((a.range(), b.range()), (0..4, 4..10));
            // Inside the job but outside the part: its neighbour's elements.
            assert_eq!(a.split_at(5).err(), outside(5, 0, 4));
            assert_eq!(b.split_at(3).err(), outside(3, 4, 10));
            let (b1, b2) = job.split_at(4).unwrap().1.split_at(10).unwrap();
            assert_eq!((b1.range(), b2.range()), (4..10, 10..10));
        });
    }

    #[test]
    fn parts_run_on_threads_like_the_whole_job() {
        let r = Reference::default();
        let (_, whole) = with_job(100, |job| job.run(&r).unwrap());
        assert_eq!(whole[3], 1.5);
        let (_, parts) = with_job(100, |job| {
            let (head, rest) = job.split_at(37).unwrap();
            let (mid, tail) = rest.split_at(38).unwrap();
            std::thread::scope(|s| {
                for mut p in [head, mid, tail] {
                    s.spawn(move || p.run(&r).unwrap());
                }
            });
        });
        assert_eq!(whole, parts);
    }

    #[test]
    fn forced_chunks_are_cut_exactly_then_restored() {
        Tuning::new().with_chunk(7).scope(|| {
            assert_eq!(split(20, 2), [0..7, 7..14, 14..20]);
            assert_eq!(split(5, 1), vec![Range { start: 0, end: 5 }]);
        });
        assert_eq!(split(20, 2), vec![Range { start: 0, end: 20 }]);
    }

    #[test]
    fn measured_runs_cover_the_probe_and_the_rest() {
        let _probe = Tuning::new().with_probe().enter();
        let r = Reference::default();
        for n in [PROBE - 1, PROBE, PROBE + 1, 5 * PROBE + 7] {
            let (_, whole) = with_job(n, |job| job.run(&r).unwrap());
            assert_eq!(whole[n - 1], ((n - 1) as i8) as f32 * 0.5);
            for threads in [2, 3, usize::MAX] {
                let (_, par) = with_job(n, |job| job.run_parallel(&r, threads).unwrap());
                assert!(whole == par, "{n} elements, {threads} threads");
            }
        }
    }

    /// Units `u` of `per` elements hold `u`: where they landed, and on which threads.
    fn fill_units(units: usize, per: usize, threads: usize) -> (Vec<usize>, usize) {
        let seen = Mutex::new(std::collections::HashSet::new());
        let mut out = vec![usize::MAX; units * per + per / 2];
        fill_parallel(&mut out, per, threads, &|first, part| {
            assert_eq!(part.len() % per, 0, "whole units");
            for (i, u) in part.chunks_mut(per).enumerate() {
                u.fill(first + i);
            }
            seen.lock().unwrap().insert(std::thread::current().id());
        });
        let tail = out.split_off(units * per);
        assert!(
            tail.iter().all(|&x| x == usize::MAX),
            "a partial unit is left"
        );
        (out, seen.into_inner().unwrap().len())
    }

    #[test]
    fn fill_parallel_writes_every_unit_once_split_or_not() {
        for (units, per) in [(0, 3), (1, 1), (7, 5), (1000, 3), (PROBE / 4 + 9, 17)] {
            let want: Vec<usize> = (0..units)
                .flat_map(|u| std::iter::repeat_n(u, per))
                .collect();
            for threads in [1, 2, 3, 64] {
                assert_eq!(
                    fill_units(units, per, threads).0,
                    want,
                    "{units}x{per} {threads}"
                );
            }
            // Forced chunks of 7 elements: cut at whole units all the same.
            let (got, _) = Tuning::new()
                .with_chunk(7)
                .scope(|| fill_units(units, per, 3));
            assert_eq!(got, want, "{units}x{per} forced");
        }
        // Too small to pay for a wake-up: the caller's thread alone.
        assert_eq!(fill_units(100, 4, 8).1, 1);
    }

    #[test]
    fn pool_threads_run_under_the_callers_tuning() {
        let t = Tuning::new().with_chunk(5).with_large_above(3);
        let seen = Mutex::new(Vec::new());
        let mut out = vec![0u8; 1000];
        t.scope(|| {
            fill_parallel(&mut out, 1, 4, &|_, _| {
                let me = (std::thread::current().id(), Tuning::current());
                seen.lock().unwrap().push(me);
            })
        });
        let seen = seen.into_inner().unwrap();
        assert_eq!(seen.len(), 200, "chunks of 5");
        assert!(seen.iter().all(|&(_, got)| got == t), "{seen:?}");
        let caller = std::thread::current().id();
        assert!(seen.iter().any(|&(id, _)| id != caller), "pool threads ran");
    }

    #[test]
    fn split_covers_everything_once() {
        for n in [0, 1, 63, 64, 65, MIN_CHUNK * 9 + 17] {
            for t in [1, 2, 3, 4, 1 << 20, usize::MAX] {
                let c = split(n, t);
                let mut next = 0;
                for r in &c {
                    assert_eq!(r.start, next);
                    assert!(r.end > r.start);
                    next = r.end;
                }
                assert_eq!(next, n);
            }
        }
    }
}
