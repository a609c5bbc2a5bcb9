//! A kernel compiled for one elementwise plan ([`Spec`]) and how it runs a
//! job: checked against the job's plan, then called directly, block by block
//! through a staging buffer (streamed or f16-converted output), or piece by
//! piece over widened scales.

use core::ops::Range;
use std::cell::RefCell;
use std::sync::Arc;

use dq_runtime::policy::{self, StoreStrategy};
use dq_runtime::{Error, Job, Result, arch};

use crate::cache::Code;
use crate::compile::{Compiled, KernelFn};
use crate::error::JitError;
use crate::spec::{HostLookups, Spec};
use crate::{STREAM_MIN_BYTES, scales, stream};

/// A compiled kernel shared by the cache and its users; its code stays valid while
/// any `Arc` to it lives.
pub type Kernel = Arc<CompiledKernel>;

/// A kernel compiled for one [`Spec`]. Nothing about it can be changed: its
/// spec is the one its code was compiled from, which [`run`](Self::run)
/// checks jobs against.
pub struct CompiledKernel {
    spec: Spec,
    code: Compiled,
}

impl Code for CompiledKernel {
    fn code_mut(&mut self) -> &mut Compiled {
        &mut self.code
    }
}

impl CompiledKernel {
    /// The kernel of `spec`, its code compiled from it.
    pub(crate) fn new(spec: Spec, code: Compiled) -> CompiledKernel {
        CompiledKernel { spec, code }
    }

    /// What it was compiled for.
    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    /// Bytes of machine code.
    pub fn code_bytes(&self) -> usize {
        self.code.code_bytes
    }

    /// The raw entry point, valid while `self` lives. Calling it is `unsafe`;
    /// [`run`](Self::run) is the safe way. A caller must do what `run` does:
    /// pass buffers valid for [`spec`](Self::spec)'s plan, scales as
    /// [`Spec::scale_type`] values and a dst of [`Spec::out`] elements (f32
    /// under [`Spec::f16_blocks()`]); and where [`Spec::host_lookups()`] is
    /// [`HostLookups::Stream`], issue a store fence
    /// ([`arch::stream_fence`](dq_runtime::arch::stream_fence), `sfence`) after
    /// the call and before any other thread reads dst: the kernel's
    /// non-temporal stores are not fenced.
    pub fn entry(&self) -> KernelFn {
        // SAFETY: the code was built by `compile::build_ir`, whose signature is
        // exactly `KernelFn`'s; a transmute of a pointer calls nothing.
        unsafe { core::mem::transmute::<*const u8, KernelFn>(self.code.entry()) }
    }

    /// Computes the dst elements of `job` whose logical index is in `range`,
    /// storing as [`streams`](Self::streams) says (`&mut`: nothing else runs the job
    /// meanwhile).
    ///
    /// # Errors
    /// [`Error::BackendUnavailable`] when `job`'s plan is not the one compiled
    /// ([`JitError::OtherPlan`]), or [`Error::BadRange`] when `range` is outside the
    /// plan.
    pub fn run(&self, job: &mut Job<'_>, range: Range<usize>) -> Result<()> {
        self.run_with(job, range)
    }

    /// True when running `len` elements streams the output (non-temporal stores)
    /// rather than storing it directly: the kernel streams its lookups or its
    /// lines itself ([`HostLookups::Stream`], [`Spec::stream_lines`]), or the
    /// plan's store strategy is
    /// [`StoreStrategy::NonTemporal`], the range writes at least
    /// [`STREAM_MIN_BYTES`] and dst is dense (through a per-thread block buffer).
    pub fn streams(&self, len: usize) -> bool {
        let l = &self.spec.lowering;
        self.spec.host_lookups == Some(HostLookups::Stream)
            || self.spec.stream_lines
            || policy::store_for(l.output_bytes()) == StoreStrategy::NonTemporal
                && len.saturating_mul(l.dst_bytes()) >= STREAM_MIN_BYTES
                && l.dst_dense
    }

    /// [`run`](Self::run), for a caller that owns `range` of the job.
    pub(crate) fn run_with(&self, job: &Job<'_>, range: Range<usize>) -> Result<()> {
        let plan = job.plan();
        if plan.lowering() != &self.spec.lowering {
            return Err(JitError::OtherPlan.into());
        }
        if range.start > range.end || range.end > plan.numel() {
            return Err(Error::BadRange {
                start: range.start,
                end: range.end,
                elements: plan.numel(),
            });
        }
        if range.is_empty() {
            return Ok(());
        }
        if self.spec.f32_scales {
            // Piece by piece: the widened scales of a piece stay small (and in
            // cache) however large the plan.
            for piece in scales::pieces(range) {
                let span = scales::span(&self.spec, piece.clone());
                scales::with_f32(job.scales(), span, |s| self.run_on(job, s, piece));
            }
        } else {
            self.run_on(job, job.scales().as_ptr(), range);
        }
        Ok(())
    }

    /// [`run_with`](Self::run_with) once its checks passed, reading the scales
    /// as the kernel reads them at `scales` (valid for every scale index of
    /// `range`).
    fn run_on(&self, job: &Job<'_>, scales: *const u8, range: Range<usize>) {
        let stream = self.streams(range.len());
        if self.spec.host_lookups == Some(HostLookups::Stream) {
            // SAFETY: as below; the kernel's lookups stream their stores, which the
            // fence orders before the output is read.
            unsafe { self.call(job, scales, job.dst_ptr(), range) };
            arch::stream_fence();
        } else if self.spec.stream_lines {
            // SAFETY: as below; the fence orders the kernel's non-temporal stores
            // (whole lines of its own range) before the output is read.
            unsafe { self.call(job, scales, job.dst_ptr(), range) };
            arch::stream_fence();
        } else if self.spec.f16_blocks {
            self.run_f16_blocks(job, scales, range, stream);
        } else if stream {
            self.run_streaming(job, scales, range);
        } else {
            // SAFETY: the plan matches the compiled spec and `bind` validated every
            // buffer for it (`scales` as the caller says); `range` is inside the
            // plan, and the kernel writes only the dst elements of `range`, which
            // this call owns (the contract of Kernel::run, or `run`'s `&mut Job`).
            unsafe { self.call(job, scales, job.dst_ptr(), range) };
        }
    }

    /// Runs `range` block by block: the kernel writes each block's results (dense,
    /// `Spec::out_bytes` an element; streaming and f16 blocks both need a dense dst)
    /// into a thread-local staging buffer, then `flush(s, bytes)` moves the block
    /// that starts at element `s` to dst.
    fn run_blocks(
        &self,
        job: &Job<'_>,
        scales: *const u8,
        range: Range<usize>,
        mut flush: impl FnMut(usize, &[u8]),
    ) {
        thread_local! {
            static BUF: RefCell<Box<stream::Block>> =
                RefCell::new(Box::new(stream::Block([0; stream::BLOCK_BYTES])));
        }
        debug_assert!(self.spec.dst_dense);
        let w = self.spec.out_bytes();
        let per = stream::BLOCK_BYTES / w;
        BUF.with_borrow_mut(|b| {
            let buf = &mut b.0;
            let mut s = range.start;
            while s < range.end {
                let e = (s + per).min(range.end);
                // Dense output: element `l` lives at byte `l * w`, so this base puts
                // elements s..e at buf[0..(e - s) * w].
                let base = buf.as_mut_ptr().wrapping_sub(s * w);
                // SAFETY: as in `run_with` for src/scales/zps; the kernel's writes
                // land in `buf` (dense, see above), which holds `per` elements.
                unsafe { self.call(job, scales, base, s..e) };
                flush(s, &buf[..(e - s) * w]);
                s = e;
            }
        });
    }

    /// Computes blocks into a thread-local buffer and streams them to dst.
    fn run_streaming(&self, job: &Job<'_>, scales: *const u8, range: Range<usize>) {
        let w = self.spec.dst_bytes();
        self.run_blocks(job, scales, range, |s, block| {
            // SAFETY: the block's bytes s*w.. of dst belong to this call's range,
            // and `bind` checked the dst buffer holds every element.
            unsafe { arch::stream_copy(job.dst_ptr().add(s * w), block) }
        });
        arch::stream_fence();
    }

    /// Under [`Spec::f16_blocks`](crate::Spec): computes blocks of f32 results and
    /// converts each to f16 into dst (with non-temporal stores when `stream`).
    fn run_f16_blocks(&self, job: &Job<'_>, scales: *const u8, range: Range<usize>, stream: bool) {
        self.run_blocks(job, scales, range, |s, block| {
            // The block starts the 64-byte aligned staging buffer.
            let x = stream::as_f32s(block);
            // SAFETY: bytes 2s..2(s + x.len()) of dst belong to this call's range,
            // `bind` checked the dst buffer holds every element, and nothing else
            // writes them during this call (Kernel::run gives the range to it).
            unsafe {
                let dst = job.dst_ptr().add(s * 2);
                if stream {
                    arch::f32_to_f16_stream(dst, x);
                } else {
                    arch::f32_to_f16(dst, x);
                }
            }
        });
        if stream {
            arch::stream_fence();
        }
    }

    /// # Safety
    /// `job`'s plan matches `self.spec`, `range` is inside it, `scales` is a base
    /// at which the kernel's scale reads for `range` are valid ([`Spec::scale_type`]
    /// values), and `dst` one at which its dst writes for `range` are valid and
    /// exclusive.
    unsafe fn call(&self, job: &Job<'_>, scales: *const u8, dst: *mut u8, range: Range<usize>) {
        // SAFETY: forwarded from the caller's contract.
        unsafe {
            (self.entry())(
                job.src().as_ptr(),
                scales,
                job.zps().as_ptr(),
                dst,
                range.start,
                range.end,
            )
        }
    }
}
