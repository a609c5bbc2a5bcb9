//! A plan bound to its buffers ([`Job`], splittable into [`JobPart`]s), and the
//! [`Kernel`] interface every backend implements to compute a range of one
//! (SPEC §6). Running a job with the store policy and the thread pool:
//! [`crate::exec`].

use core::fmt;
use core::marker::PhantomData;
use core::ops::Range;
use core::str::FromStr;

use crate::error::{Error, Result, Role};
use crate::plan::Plan;
use crate::tensor::{Tensor, TensorDesc, TensorMut};

/// A backend choice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Backend {
    /// The scalar reference (SPEC §5, one element at a time).
    Reference,
    /// Kernels generated at compile time by `#[dequant_kernel]`.
    Generated,
    /// Kernels compiled at run time by Cranelift, specialised to the plan.
    Jit,
    /// The fastest available backend for the plan.
    #[default]
    Auto,
}

impl Backend {
    /// Every choice, in CLI order.
    pub const ALL: [Backend; 4] = [
        Backend::Reference,
        Backend::Generated,
        Backend::Jit,
        Backend::Auto,
    ];

    /// The CLI spelling.
    pub const fn name(self) -> &'static str {
        match self {
            Backend::Reference => "reference",
            Backend::Generated => "generated",
            Backend::Jit => "jit",
            Backend::Auto => "auto",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Backend {
    type Err = String;

    fn from_str(s: &str) -> core::result::Result<Self, String> {
        Backend::ALL
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| {
                format!("unknown backend `{s}` (expected reference, generated, jit or auto)")
            })
    }
}

/// A backend: computes any range of a validated [`Job`]'s elements.
pub trait Kernel: Sync {
    /// The choice that selects it ([`Backend::Auto`] only for `auto`'s [`Race`](crate::backend::Race)).
    fn backend(&self) -> Backend;

    /// Its name for messages (by default its [`backend`](Self::backend)'s: `reference`,
    /// `generated`, `jit`).
    fn name(&self) -> &'static str {
        self.backend().name()
    }

    /// Ok when this backend can run `plan` (its dtypes, its formula).
    ///
    /// # Errors
    /// [`Error::BackendUnavailable`] saying why not.
    fn supports(&self, plan: &Plan) -> Result<()>;

    /// Whether `auto` should prefer this backend for `plan` (asked before
    /// [`supports`](Self::supports)); `auto` falls back to one that does not pay only
    /// when none that pays supports the plan. Yes by default.
    fn pays(&self, plan: &Plan) -> bool {
        let _ = plan;
        true
    }

    /// Writes dst for the logical (row-major) element indices in `range`, and nothing
    /// outside them.
    ///
    /// Safe callers go through [`Job::run`], [`Job::run_range`],
    /// [`Job::run_parallel`] or [`JobPart::run`], which check the conditions below.
    ///
    /// # Safety
    /// - `range` is inside `0..job.plan().numel()`;
    /// - [`supports`](Self::supports) said yes for `job.plan()`;
    /// - no call running at the same time writes any element of `range` of the same
    ///   job (concurrent calls get disjoint ranges).
    unsafe fn run(&self, job: &Job<'_>, range: Range<usize>);

    /// Counters of a backend that compiles (the JIT); `None` for the others.
    fn stats(&self) -> Option<KernelStats> {
        None
    }

    /// The backend whose store race ([`race_store`](crate::policy::race_store)) this kernel's calls
    /// of a plan take part in: its own by default. `auto`'s
    /// [`Race`](crate::backend::Race) gives its winner's once chosen, so it
    /// stores as that backend does, and `None` while its calls still run on
    /// several kernels (they then store as the process does, untimed).
    fn store_backend(&self) -> Option<Backend> {
        Some(self.backend())
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

// SAFETY: a DstBuf is made only from a `&mut [u8]` it borrows for 'a. Its bytes are
// written only by `unsafe` code under the contracts of `Kernel::run` and
// `Job::dst_bytes`, which make concurrent writes disjoint; the safe ways to run take
// `&mut Job` or a `JobPart` (a disjoint range of a mutably borrowed job).
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

    /// The whole job as one part, to split into disjoint parts for the caller's own
    /// threads (see [`JobPart::split_at`]).
    pub fn as_part(&mut self) -> JobPart<'_, 'a> {
        let range = 0..self.plan.numel();
        JobPart { job: self, range }
    }

    /// Splits the job at logical element `mid`: the parts `0..mid` and `mid..numel`,
    /// each runnable on its own thread (like `split_at_mut`).
    ///
    /// # Errors
    /// [`Error::SplitOutside`] when `mid > numel`.
    pub fn split_at(&mut self, mid: usize) -> Result<(JobPart<'_, 'a>, JobPart<'_, 'a>)> {
        self.as_part().split_at(mid)
    }

    /// Splits the job into `n` disjoint contiguous parts of about equal length, in
    /// order, covering every element (like `chunks_mut`; parts are empty when
    /// `n > numel`). Lazy: a part is made when the iterator reaches it.
    ///
    /// # Errors
    /// [`Error::ZeroThreads`] when `n` is 0.
    pub fn parts(
        &mut self,
        n: usize,
    ) -> Result<impl ExactSizeIterator<Item = JobPart<'_, 'a>> + Send> {
        if n == 0 {
            return Err(Error::ZeroThreads);
        }
        let job = &*self;
        let numel = job.plan.numel();
        // Where part `i` starts: numel * i / n, exactly.
        let cut = move |i: usize| (numel as u128 * i as u128 / n as u128) as usize;
        Ok((0..n).map(move |i| JobPart {
            job,
            range: cut(i)..cut(i + 1),
        }))
    }
}

/// A contiguous range of a job's logical elements that no other part shares, made by
/// [`Job::as_part`], [`Job::split_at`] or [`Job::parts`]: runnable on its own thread
/// while the other parts run on theirs.
#[derive(Debug)]
pub struct JobPart<'j, 'a> {
    job: &'j Job<'a>,
    range: Range<usize>,
}

impl<'j, 'a> JobPart<'j, 'a> {
    /// Its logical elements.
    pub fn range(&self) -> Range<usize> {
        self.range.clone()
    }

    /// Splits this part at logical element `mid` (an index of the job, inside
    /// `range().start..=range().end`) into `start..mid` and `mid..end`.
    ///
    /// # Errors
    /// [`Error::SplitOutside`] when `mid` is outside the part.
    pub fn split_at(self, mid: usize) -> Result<(Self, Self)> {
        let Range { start, end } = self.range;
        if !(start..=end).contains(&mid) {
            return Err(Error::SplitOutside {
                at: mid,
                start,
                end,
            });
        }
        let head = JobPart {
            job: self.job,
            range: start..mid,
        };
        let tail = JobPart {
            job: self.job,
            range: mid..end,
        };
        Ok((head, tail))
    }

    /// Runs `kernel` over this part's elements (bit-identical to the same range of
    /// [`Job::run`]).
    ///
    /// # Errors
    /// The kernel's refusal ([`Error::BackendUnavailable`]).
    pub fn run(&mut self, kernel: &dyn Kernel) -> Result<()> {
        kernel.supports(self.job.plan)?;
        if !self.range.is_empty() {
            // SAFETY: the range is inside the plan (parts only shrink the whole
            // job's), `supports` said yes, and no other part of this job shares an
            // element: parts come from splitting one mutably borrowed job. Disjoint
            // logical elements are disjoint dst bytes, as the plan rejected
            // self-overlapping dst views.
            unsafe { kernel.run(self.job, self.range.clone()) };
        }
        Ok(())
    }
}
