//! Binding buffers to a plan, and running a backend over a range or in parallel
//! (SPEC sections 6 and 7).

use core::marker::PhantomData;
use core::ops::Range;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use rayon::prelude::*;

use crate::error::{Error, Result, Role};
use crate::plan::Plan;
use crate::tensor::{Tensor, TensorDesc, TensorMut};

/// A backend: computes any range of a validated [`Job`]'s elements.
pub trait Kernel: Sync {
    /// Its name (`reference`, `generated`, `jit`).
    fn name(&self) -> &'static str;

    /// Ok when this backend can run `plan` (its dtypes, its formula).
    ///
    /// # Errors
    /// [`Error::BackendUnavailable`] saying why not.
    fn supports(&self, plan: &Plan) -> Result<()>;

    /// Writes dst for the logical (row-major) element indices in `range`.
    ///
    /// Called only with `range` inside `0..plan.numel()` and after
    /// [`supports`](Self::supports) said yes. Must write nothing outside `range`.
    fn run(&self, job: &Job<'_>, range: Range<usize>);

    /// Counters of a backend that compiles (the JIT); `None` for the others.
    fn stats(&self) -> Option<KernelStats> {
        None
    }
}

/// Counters of a compiling backend, cumulative since the process started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelStats {
    /// Kernels compiled (cache misses).
    pub compiled: u64,
    /// Lookups served from the cache.
    pub reused: u64,
    /// Total compile time in nanoseconds.
    pub compile_ns: u64,
    /// Bytes of machine code currently held by the cache.
    pub code_bytes: u64,
    /// Kernels currently cached.
    pub cached: u64,
}

/// The dst buffer of a job, shared by the threads that fill disjoint parts of it.
#[derive(Debug)]
pub struct DstBuf<'a> {
    ptr: *mut u8,
    len: usize,
    _borrow: PhantomData<&'a mut [u8]>,
}

// SAFETY: a DstBuf is made only from a `&mut [u8]` it borrows for 'a, and writers
// go through `Job::dst_bytes`, whose contract makes concurrent writes disjoint.
unsafe impl Send for DstBuf<'_> {}
// SAFETY: as above.
unsafe impl Sync for DstBuf<'_> {}

/// A plan bound to buffers whose sizes were checked: ready to run.
#[derive(Debug)]
pub struct Job<'a> {
    plan: &'a Plan,
    src: &'a [u8],
    scales: &'a [u8],
    zps: &'a [u8],
    dst: DstBuf<'a>,
}

impl Plan {
    /// Checks the tensors against the plan and their buffers against their views.
    ///
    /// For the static op pass `None` for scales and zps (the plan holds them).
    ///
    /// # Errors
    /// [`Error::PlanMismatch`] when a descriptor differs from the plan's,
    /// [`Error::BufferTooSmall`] when a buffer cannot hold its view,
    /// [`Error::MissingAttr`] / [`Error::AttrNotAllowed`] for absent or extra tensors.
    pub fn bind<'a>(
        &'a self,
        src: &Tensor<'a>,
        scales: Option<&Tensor<'a>>,
        zps: Option<&Tensor<'a>>,
        dst: &'a mut TensorMut<'_>,
    ) -> Result<Job<'a>> {
        check_view(Role::Src, self.src(), &src.desc, src.data.len())?;
        check_view(Role::Dst, self.dst(), &dst.desc, dst.data.len())?;
        let (scales, zps) = match self.static_params() {
            Some((s, z)) => {
                let op = self.op();
                if scales.is_some() {
                    return Err(Error::AttrNotAllowed {
                        op,
                        attr: "scales input",
                        qtype: None,
                    });
                }
                if zps.is_some() {
                    return Err(Error::AttrNotAllowed {
                        op,
                        attr: "zps input",
                        qtype: None,
                    });
                }
                (s, z.unwrap_or(&[]))
            }
            None => {
                let s = scales.ok_or(Error::MissingAttr {
                    op: self.op(),
                    attr: "scales",
                    qtype: None,
                })?;
                check_view(Role::Scales, self.scales(), &s.desc, s.data.len())?;
                let z = match (self.zps(), zps) {
                    (Some(want), Some(z)) => {
                        check_view(Role::Zps, want, &z.desc, z.data.len())?;
                        z.data
                    }
                    (None, None) => &[][..],
                    (Some(_), None) => {
                        return Err(Error::MissingAttr {
                            op: self.op(),
                            attr: "zps",
                            qtype: None,
                        });
                    }
                    (None, Some(_)) => {
                        return Err(Error::AttrNotAllowed {
                            op: self.op(),
                            attr: "zps (the plan has none)",
                            qtype: None,
                        });
                    }
                };
                (s.data, z)
            }
        };
        let data: &'a mut [u8] = &mut *dst.data;
        Ok(Job {
            plan: self,
            src: src.data,
            scales,
            zps,
            dst: DstBuf {
                ptr: data.as_mut_ptr(),
                len: data.len(),
                _borrow: PhantomData,
            },
        })
    }
}

/// The given view must describe the same tensor as the plan's, in a large enough buffer.
fn check_view(role: Role, want: &TensorDesc, got: &TensorDesc, len: usize) -> Result<()> {
    let same = want.dtype == got.dtype
        && want.shape == got.shape
        && (want.numel() == Some(0) || want.visit_strides(|w| got.visit_strides(|g| w == g)));
    if !same {
        return Err(Error::PlanMismatch {
            role,
            expected: want.describe(),
            got: got.describe(),
        });
    }
    let need = got.required_bytes(role)?;
    if len < need {
        return Err(Error::BufferTooSmall {
            role,
            dtype: got.dtype,
            shape: got.shape.clone(),
            expected: need,
            got: len,
        });
    }
    Ok(())
}

impl<'a> Job<'a> {
    /// The validated plan.
    pub fn plan(&self) -> &'a Plan {
        self.plan
    }
    /// The src bytes (large enough for the src view).
    pub fn src(&self) -> &'a [u8] {
        self.src
    }
    /// The scales bytes (dense, large enough).
    pub fn scales(&self) -> &'a [u8] {
        self.scales
    }
    /// The zero-point bytes (empty when symmetric).
    pub fn zps(&self) -> &'a [u8] {
        self.zps
    }
    /// Length in bytes of the dst buffer (large enough for the dst view).
    pub fn dst_len(&self) -> usize {
        self.dst.len
    }
    /// Raw pointer to the dst buffer, for JIT code that writes it directly.
    pub fn dst_ptr(&self) -> *mut u8 {
        self.dst.ptr
    }

    /// Mutable access to dst bytes `bytes`.
    ///
    /// # Safety
    /// No other live reference may cover any of these bytes: a backend asks only for
    /// the bytes of elements in the range it was given, and ranges run concurrently
    /// are disjoint (the plan rejected self-overlapping dst views).
    ///
    /// # Panics
    /// If `bytes` is outside the buffer.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn dst_bytes(&self, bytes: Range<usize>) -> &mut [u8] {
        assert!(
            bytes.start <= bytes.end && bytes.end <= self.dst.len,
            "dst bytes out of bounds"
        );
        // SAFETY: in bounds (asserted); exclusive per the caller's contract; the
        // buffer is borrowed mutably for 'a by this job.
        unsafe { core::slice::from_raw_parts_mut(self.dst.ptr.add(bytes.start), bytes.len()) }
    }

    /// Runs `kernel` for the logical elements `range` (SPEC section 7).
    ///
    /// # Errors
    /// [`Error::BadRange`] outside `0..=numel`, or the kernel's own refusal.
    pub fn run_range(&self, kernel: &dyn Kernel, range: Range<usize>) -> Result<()> {
        let n = self.plan.numel();
        if range.start > range.end || range.end > n {
            return Err(Error::BadRange {
                start: range.start,
                end: range.end,
                elements: n,
            });
        }
        kernel.supports(self.plan)?;
        if !range.is_empty() {
            kernel.run(self, range);
        }
        Ok(())
    }

    /// Runs `kernel` over every element.
    ///
    /// # Errors
    /// The kernel's refusal ([`Error::BackendUnavailable`]).
    pub fn run(&self, kernel: &dyn Kernel) -> Result<()> {
        self.run_range(kernel, 0..self.plan.numel())
    }

    /// Runs `kernel` over every element on `threads` threads (a cached rayon pool).
    /// The result is bit-identical to [`run`](Self::run).
    ///
    /// # Errors
    /// [`Error::ZeroThreads`], or the kernel's refusal.
    pub fn run_parallel(&self, kernel: &dyn Kernel, threads: usize) -> Result<()> {
        if threads == 0 {
            return Err(Error::ZeroThreads);
        }
        kernel.supports(self.plan)?;
        let chunks = split(self.plan.numel(), threads);
        // More threads than chunks would idle; bounding the pool by the work also
        // bounds what a huge requested count can spawn.
        let threads = threads.min(chunks.len());
        if threads <= 1 {
            return self.run(kernel);
        }
        match pool(threads) {
            Some(pool) => pool.install(|| {
                chunks.into_par_iter().for_each(|r| kernel.run(self, r));
            }),
            // No threads to be had: the same bits on the caller's thread.
            None => return self.run(kernel),
        }
        Ok(())
    }
}

/// Smallest chunk worth a task, in elements.
const MIN_CHUNK: usize = 1 << 15;

/// Splits `0..n` into about four chunks per thread, each a multiple of 64 elements
/// (so threads do not share dst cache lines in dense layouts).
pub fn split(n: usize, threads: usize) -> Vec<Range<usize>> {
    let want = threads.saturating_mul(4).max(1);
    let size = n.div_ceil(want).max(MIN_CHUNK).next_multiple_of(64);
    (0..n).step_by(size).map(|s| s..(s + size).min(n)).collect()
}

/// A rayon pool with `threads` threads, built once per count; `None` when the
/// threads cannot be created.
fn pool(threads: usize) -> Option<Arc<rayon::ThreadPool>> {
    static POOLS: OnceLock<Mutex<HashMap<usize, Arc<rayon::ThreadPool>>>> = OnceLock::new();
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
    Some(pools.entry(threads).or_insert(Arc::new(p)).clone())
}

#[cfg(test)]
mod tests {
    use super::*;

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
