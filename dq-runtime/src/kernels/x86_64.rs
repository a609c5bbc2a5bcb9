//! The x86-64 entry points of the generated kernels: [`run_vector`] on the
//! AVX2 and AVX-512 tokens, compiled with their features.

use core::ops::Range;

use super::driver::run_vector;
use super::{FloatType, Formula, IntType};
use crate::arch::x86_64::{Avx2, Avx512};
use crate::job::Job;

/// The AVX2 kernel of one (src, dst) pair.
///
/// # Safety
/// The CPU has AVX2 and F16C; the job and range meet [`run_vector`]'s contract.
#[target_feature(enable = "avx2,f16c")]
pub unsafe fn run_avx2<S: IntType, D: FloatType, F: Formula>(job: &Job<'_>, range: Range<usize>) {
    // SAFETY: the features are enabled (caller); job and range per the caller.
    unsafe { run_vector::<Avx2, S, D, F>(Avx2::new_unchecked(), job, range) }
}

/// The AVX-512 kernel of one (src, dst) pair.
///
/// # Safety
/// The CPU has AVX-512 F, BW, VL, DQ, AVX2 and F16C; the job and range meet
/// [`run_vector`]'s contract.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,f16c")]
pub unsafe fn run_avx512<S: IntType, D: FloatType, F: Formula>(job: &Job<'_>, range: Range<usize>) {
    // SAFETY: the features are enabled (caller); job and range per the caller.
    unsafe { run_vector::<Avx512, S, D, F>(Avx512::new_unchecked(), job, range) }
}
