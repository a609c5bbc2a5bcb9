//! Software prefetch of staged words, called from JIT code: Cranelift has no
//! prefetch instruction. A staged linear (AWQ) reads each input's words of a
//! tile, 8 cache lines, from rows `N / 2` bytes apart: the hardware prefetchers
//! keep few of those rows in flight, so the stage waits on memory. Prefetching
//! the rows [`AHEAD`] inputs ahead made the AWQ JIT faster on AMD EPYC Zen 5,
//! whether rows start on a line or not, and on Zen 4 (16 and 64 inputs ahead
//! ran alike; `prefetcht1` a little slower; BENCHMARKS.md).

use cranelift_codegen::ir::Value;
use cranelift_frontend::FunctionBuilder;

/// Inputs ahead of the one being staged whose rows are prefetched.
pub(crate) const AHEAD: i64 = 24;
/// Rows a call prefetches.
pub(crate) const ROWS: usize = 4;
/// Bytes a call prefetches of each row: 8 lines.
pub(crate) const ROW_BYTES: usize = 512;

/// Emits a call that prefetches [`ROW_BYTES`] from each of the [`ROWS`] rows at
/// `a`, `a + stride`, ... A prefetch reads nothing architecturally and never
/// faults; the emitting code still keeps every line inside the words' buffer.
/// An ordinary call (the platform's C convention): once per staged input, it
/// measured level with a register-preserving one (BENCHMARKS.md).
pub(crate) fn rows(b: &mut FunctionBuilder<'_>, a: Value, stride: Value) {
    crate::host_f16::call_c(b, prefetch_rows as *const u8, &[a, stride]);
}

/// `prefetcht0` of the 8 lines at `a`, `a + stride`, `a + 2 * stride` and
/// `a + 3 * stride` (no-ops off x86-64, where no linear function is compiled).
extern "C" fn prefetch_rows(a: *const u8, stride: usize) {
    #[cfg(target_arch = "x86_64")]
    for r in 0..ROWS {
        let row = a.wrapping_add(r.wrapping_mul(stride));
        for l in 0..ROW_BYTES / 64 {
            let p = row.wrapping_add(64 * l);
            // SAFETY: a prefetch reads nothing architecturally and never faults,
            // whatever the address.
            unsafe {
                core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast())
            };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (a, stride);
}
