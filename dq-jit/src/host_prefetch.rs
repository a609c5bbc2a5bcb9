//! Software prefetch of staged words, called from JIT code: Cranelift has no
//! prefetch instruction. A staged linear (AWQ) reads each input's words of a
//! tile, 8 cache lines, from rows `N / 2` bytes apart: the hardware prefetchers
//! keep few of those rows in flight, so the stage waits on memory. Prefetching
//! the rows [`AHEAD`] inputs ahead made the AWQ JIT faster on AMD EPYC Zen 5,
//! whether rows start on a line or not (16 and 64 inputs ahead ran alike;
//! `prefetcht1` a little slower; BENCHMARKS.md).

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
pub(crate) fn rows(b: &mut FunctionBuilder<'_>, a: Value, stride: Value) {
    crate::host_f16::call(b, prefetch_rows, &[a, stride]);
}

/// `prefetcht0` of the 8 lines at `rdi`, `rdi + rsi`, `rdi + 2 * rsi` and
/// `rdi + 3 * rsi`. Called under `preserve_all`; it changes no register.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[rustfmt::skip]
unsafe extern "C" fn prefetch_rows() {
    macro_rules! row {
        () => {
            concat!(
                "prefetcht0 [rdi]\n", "prefetcht0 [rdi + 64]\n",
                "prefetcht0 [rdi + 128]\n", "prefetcht0 [rdi + 192]\n",
                "prefetcht0 [rdi + 256]\n", "prefetcht0 [rdi + 320]\n",
                "prefetcht0 [rdi + 384]\n", "prefetcht0 [rdi + 448]\n",
            )
        };
    }
    core::arch::naked_asm!(
        "push rdi",
        row!(), "add rdi, rsi",
        row!(), "add rdi, rsi",
        row!(), "add rdi, rsi",
        row!(),
        "pop rdi",
        "ret",
    )
}

/// [`prefetch_rows`] off x86-64, where no linear function is compiled.
#[cfg(not(target_arch = "x86_64"))]
unsafe extern "C" fn prefetch_rows() {
    unreachable!("the linear JIT is x86-64 only")
}
