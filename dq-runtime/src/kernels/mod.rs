//! Compile-time generated kernels: the generic loops `#[dequant_kernel]`
//! instantiates, the table it builds, and the [`GeneratedKernel`] backend.
//!
//! A kernel is a [`FormulaIr`] (for the JIT and the reference) plus a table of
//! [`Entry`]s, one per (src, zps, dst) combination, each holding one function per
//! ISA. The functions walk [`Plan::loops`] and run each innermost run as one of:
//! (a) one scale for a contiguous run, (b) a scale per element, (c) a scale per
//! group (runs may start and end mid-group), (d) a general strided fallback.

use core::ops::Range;

use crate::arch::{self, Isa};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::formula::FormulaIr;
use crate::job::{Backend, Job, Kernel};
use crate::plan::Plan;

pub(crate) mod driver;
#[cfg(target_arch = "x86_64")]
mod x86_64;
// The two below are what `#[dequant_kernel]` expansions instantiate; not a public API.
#[doc(hidden)]
pub mod dtypes;
#[doc(hidden)]
pub mod lanes;

#[doc(hidden)]
pub use dtypes::{FloatType, IntType};
#[doc(hidden)]
pub use lanes::{ExactInt, Formula, FromI64, Lanes, Scalar, Standard, apply};

/// A kernel function: runs logical elements `range` of a job.
///
/// Unsafe because an ISA-specific one needs its CPU features.
pub(crate) type RunFn = unsafe fn(&Job<'_>, Range<usize>);

/// The kernels of one (src, zps, dst) combination, one function per ISA.
///
/// The vector functions depend on src, dst and formula only (zero points are read
/// at run time), so the table shares them between zero-point types.
///
/// Its fields are private: the dtypes are those its functions were instantiated
/// for by [`Entry::new`], so no safe code can label a function with dtypes whose
/// element sizes differ from the ones it reads and writes.
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    src: DType,
    zps: Option<DType>,
    dst: DType,
    scales: DType,
    /// True when the vector functions apply (8/4-bit src, f32/f16/bf16 dst, no s64
    /// zero points); s32 zero points are checked per job ([`driver::zps_fit_i32`]).
    vector: bool,
    portable: RunFn,
    #[cfg(target_arch = "x86_64")]
    avx2: RunFn,
    #[cfg(target_arch = "x86_64")]
    avx512: RunFn,
}

impl Entry {
    /// The entry of formula `F` for src `S`, zero points `Z`, dst `D` (what
    /// `#[dequant_kernel]` expansions call).
    #[doc(hidden)]
    pub const fn new<S: IntType, Z: IntType, D: FloatType, F: Formula>() -> Entry {
        let src = match S::DTYPE {
            Some(d) => d,
            None => panic!("src cannot be `none`"),
        };
        if S::DECODE.is_some() && !F::FLOAT_SRC {
            panic!("a float src needs a formula with a float-src form");
        }
        let vector = S::SMALL && D::VECTOR && !matches!(Z::DTYPE, Some(DType::S64));
        let portable: RunFn = driver::run_exact::<S, Z, D, F>;
        Entry {
            src,
            zps: Z::DTYPE,
            dst: D::DTYPE,
            scales: D::SCALES,
            vector,
            portable,
            #[cfg(target_arch = "x86_64")]
            avx2: if vector {
                x86_64::run_avx2::<S, D, F>
            } else {
                portable
            },
            #[cfg(target_arch = "x86_64")]
            avx512: if vector {
                x86_64::run_avx512::<S, D, F>
            } else {
                portable
            },
        }
    }

    /// The dtype triple, as [`Lowering::key`](crate::Lowering::key) gives it.
    pub fn key(&self) -> (DType, Option<DType>, DType) {
        (self.src, self.zps, self.dst)
    }

    /// Src dtype.
    pub fn src(&self) -> DType {
        self.src
    }

    /// Zero-point dtype, `None` for symmetric.
    pub fn zps(&self) -> Option<DType> {
        self.zps
    }

    /// Dst dtype.
    pub fn dst(&self) -> DType {
        self.dst
    }

    /// Scales dtype: the dst dtype, or e8m0.
    pub fn scales(&self) -> DType {
        self.scales
    }

    /// The function for `job` on `isa`: a vector one when it applies.
    fn func(&self, isa: Isa, job: &Job<'_>) -> RunFn {
        if !self.vector || !driver::zps_fit_i32(job) {
            return self.portable;
        }
        match isa {
            Isa::Portable => self.portable,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => self.avx2,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => self.avx512,
            #[cfg(not(target_arch = "x86_64"))]
            _ => self.portable,
        }
    }
}

/// A `#[dequant_kernel]` backend: its formula and its table.
#[derive(Clone, Copy, Debug)]
pub struct GeneratedKernel {
    ir: &'static FormulaIr,
    float_ir: Option<&'static FormulaIr>,
    table: &'static [Entry],
    isa: Option<Isa>,
}

impl GeneratedKernel {
    /// A kernel from the macro's formula and table; runs on [`arch::selected`].
    pub const fn new(ir: &'static FormulaIr, table: &'static [Entry]) -> Self {
        GeneratedKernel {
            ir,
            float_ir: None,
            table,
            isa: None,
        }
    }

    /// This kernel with `ir`, the formula's float-src form (SPEC §10), for a kernel
    /// generated for both integer and float src.
    pub const fn with_float_ir(self, ir: &'static FormulaIr) -> Self {
        GeneratedKernel {
            float_ir: Some(ir),
            ..self
        }
    }

    /// The formula (the same one the Rust code evaluates); for a kernel generated
    /// for integer and float src, its integer-src form.
    pub fn ir(&self) -> &'static FormulaIr {
        self.ir
    }

    /// The formula the kernel evaluates for a src of dtype `src`, if it reads one.
    pub fn ir_for(&self, src: DType) -> Option<&'static FormulaIr> {
        if self.ir.accepts_src(src) {
            Some(self.ir)
        } else {
            self.float_ir.filter(|f| f.accepts_src(src))
        }
    }

    /// Every combination this kernel was generated for.
    pub fn table(&self) -> &'static [Entry] {
        self.table
    }

    /// The ISA it runs on.
    pub fn isa(&self) -> Isa {
        self.isa.unwrap_or_else(arch::selected)
    }

    /// This kernel pinned to `isa`, or `None` when the CPU lacks it.
    pub fn with_isa(&self, isa: Isa) -> Option<Self> {
        isa.available().then_some(GeneratedKernel {
            isa: Some(isa),
            ..*self
        })
    }

    fn entry(&self, plan: &Plan) -> Option<&'static Entry> {
        let (key, scales) = (plan.lowering().key(), plan.lowering().scales);
        self.table
            .iter()
            .find(|e| e.key() == key && e.scales == scales)
    }
}

impl Kernel for GeneratedKernel {
    fn backend(&self) -> Backend {
        Backend::Generated
    }

    fn supports(&self, plan: &Plan) -> Result<()> {
        match self.entry(plan) {
            Some(_) => Ok(()),
            None => {
                let (s, z, d) = plan.kernel_key();
                let z = z.map_or("none", DType::name);
                let sc = plan.lowering().scales;
                let scales = if sc == d {
                    String::new()
                } else {
                    format!(", scales {sc}")
                };
                Err(Error::BackendUnavailable {
                    backend: "generated",
                    reason: format!(
                        "`{}` was not generated for src {s}, zps {z}, dst {d}{scales}",
                        self.ir.name
                    ),
                })
            }
        }
    }

    unsafe fn run(&self, job: &Job<'_>, range: Range<usize>) {
        if let Some(e) = self.entry(job.plan()) {
            let isa = self.isa();
            // SAFETY: `isa` is available on this CPU (`with_isa` checked it, or
            // `arch::selected` never exceeds the hardware); a vector function is
            // chosen only for jobs it applies to (`func`); `range` is inside
            // `0..numel` and no concurrent call writes it (this fn's contract).
            unsafe { (e.func(isa, job))(job, range) }
        }
    }
}

#[cfg(test)]
mod tests;
