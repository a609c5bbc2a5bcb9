//! Quantized linears (GPTQ, AWQ, compressed-tensors) on the JIT: one Cranelift
//! function per distinct linear *shape*, cached.
//!
//! A [`dq_runtime::linear::Linear`] is a validated set of affine views of packed
//! bytes. Its [`Shape`] is everything but the bytes and N: field width, packing and
//! field order, word strides and offset, the zero points' view, scale type and
//! strides, group size (or a per-input group index), K and the output type
//! (f32, f16, bf16). All of it is baked into the function as constants; the
//! function computes rows `n0..n1` and inputs `k0..k1` of the `[N, K]` output,
//! reading the packed words, zero points, scales and group index **where they lie**
//! (no copy or repacking beforehand). Per row and run of one group it computes the
//! group's zero point and scale from the packed views; 4-bit fields into f16/bf16
//! outputs go through the group's 16 exact outputs (computed by the formula in
//! F32X4 lanes), looked up 16 at a time with a byte shuffle (`x86_pshufb`): words
//! along K 4 at a time per row (32 inputs), four rows at a time where their words
//! lie side by side (GPTQ: one 16-byte load per word row and a 4x4 transpose) or
//! a row's words do (compressed-tensors: one 16-byte load per row);
//! words along N (AWQ) a word column of 8 rows at a time (each word loaded once,
//! its 8 fields split by byte shuffles, 8 tables in a stack slot), the words of a
//! call's columns first staged in memory order into a buffer, a column's side by
//! side ([`STAGE_WORDS`] by [`STAGE_INPUTS`]; the rows a few inputs ahead
//! prefetched as it goes, `host_prefetch`). Where every row of a 16-bit
//! output starts on a 64-byte line, both write whole lines (32 inputs from a
//! multiple of 32) with non-temporal stores (`host_store`), the inputs before and
//! after 8 at a time with plain stores. Where every row starts 16, 32 or 48 bytes
//! into a line (a large `Vec` on Linux starts 16 in) and groups are whole lines
//! (a multiple of 32 inputs), they stream too: a line across a group boundary
//! is looked up with both groups' tables (kept in alternate halves of the stack
//! slot), and calls end where lines do. Other widths, f32 outputs and
//! per-input group indices take the formula `f32(q - z) * s` in F32X4 lanes (or
//! one input at a time),
//! rounded to f16/bf16 by integer round-to-nearest-even: the bits of
//! [`Linear::value`] and the generated driver, NaN, infinite and subnormal scales
//! included.
//!
//! The tile loop and the thread split stay in Rust ([`LinearJit::run`]): tiles are
//! [`TILE_ROWS`] rows (words packed along K, so a tile's words are four cache lines
//! a word row) or [`TILE_WORDS`] words of rows (along N: a cache line a row;
//! [`STAGE_WORDS`] where staged) by chunks of [`CHUNK`] (staged: [`STAGE_INPUTS`])
//! inputs, and each call of the compiled function does one
//! tile and chunk over the raw packed bytes. Outputs are a transpose of K-packed words: the
//! function walks a tile row by row, so a tile's words stay in L1 across its rows.
//!
//! ```
//! use dq_runtime::linear::{Groups, Linear, Packed, Packing, ScaleType, Scales};
//! let word = 0x7654_3210u32.to_le_bytes();
//! let scale = 0.5f32.to_le_bytes();
//! let weights = Packed { words: &word, bits: 4, packing: Packing::Inner, row_stride: 1, col_stride: 1, offset: -8 };
//! let scales = Scales { bytes: &scale, dtype: ScaleType::F32, row_stride: 1, col_stride: 1 };
//! let linear = Linear::new(1, 8, 1, weights, None, scales, Groups::Size(8))?;
//! let mut out = [0f32; 8];
//! dq_jit::linear().run(&linear, 0..1, &mut out)?;
//! assert_eq!(out, [-4.0, -3.5, -3.0, -2.5, -2.0, -1.5, -1.0, -0.5]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod coded;
mod emit;

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use cranelift_codegen::ir::Function;
use cranelift_codegen::isa::OwnedTargetIsa;
use dq_runtime::DType;
use dq_runtime::linear::{Groups, Linear, LinearError, Out, Packed, Packing, ScaleType};

use crate::cache::{Cache, Code};
use crate::compile::{self, Compiled};
use crate::error::JitError;
use crate::host_prefetch;

/// Inputs per call (a chunk of a tile's rows). The tile sizes were chosen by
/// `benches/checkpoints.rs` on AMD EPYC Zen 4: 64 rows / 16 words by 2048 inputs
/// ran GPTQ and AWQ faster than the generated driver's 32 / 8 by 1024
/// (BENCHMARKS.md).
pub const CHUNK: usize = 2048;
/// Rows per tile, words packed along K.
pub const TILE_ROWS: usize = 64;
/// Words per tile along N (`16 * 32 / bits` rows), unstaged.
pub const TILE_WORDS: usize = 16;
/// Words per tile along N where word columns are staged (AWQ): a tile's words
/// of one input are 8 cache lines.
pub const STAGE_WORDS: usize = 128;
/// Inputs per call where word columns are staged. By `examples/linear_speed.rs`
/// (AWQ) on AMD EPYC Zen 5, 128 words by 1024 inputs was the fastest stage tried,
/// on a line and off one (a call off a line computes one group's tables more than
/// its inputs need, so longer calls pay that less often; BENCHMARKS.md).
pub const STAGE_INPUTS: usize = 1024;
/// Words from one staged column to the next: [`STAGE_INPUTS`] and a line. With
/// no pad the columns' words of one input lie a multiple of 4 KiB apart, in the
/// same few L1 sets, and staging took most of AWQ's time on Zen 5; with it, a
/// fraction (BENCHMARKS.md).
pub const STAGE_STRIDE: usize = STAGE_INPUTS + 16;
// A stage's prefetch takes a tile's words of an input: its 8 lines.
const _: () = assert!(STAGE_WORDS * 4 == host_prefetch::ROW_BYTES);

/// Why the JIT could not run a linear.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LinearJitError {
    /// The rows or the output do not fit the linear.
    #[error(transparent)]
    Linear(#[from] LinearError),
    /// The function could not be compiled.
    #[error(transparent)]
    Jit(#[from] JitError),
}

/// A packed view's shape: everything but the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct PackShape {
    bits: u32,
    packing: Packing,
    row_stride: usize,
    col_stride: usize,
    offset: i32,
}

impl PackShape {
    fn of(p: &Packed<'_>) -> PackShape {
        PackShape {
            bits: p.bits,
            packing: match p.packing {
                // Only the first `32 / bits` entries are read: the rest is no part
                // of the shape.
                Packing::Outer { order } => {
                    let mut o = [0; 8];
                    let w = (32 / p.bits) as usize;
                    o[..w].copy_from_slice(&order[..w]);
                    Packing::Outer { order: o }
                }
                inner => inner,
            },
            row_stride: p.row_stride,
            col_stride: p.col_stride,
            offset: p.offset,
        }
    }
}

/// How inputs find their group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum GroupMode {
    /// `k / size`.
    Size(usize),
    /// A per-input index (act-order `g_idx`), read where it lies.
    Index,
}

/// What one compiled function is specialised for: a linear without its bytes
/// and N, and the output type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shape {
    weights: PackShape,
    zeros: Option<PackShape>,
    scale: ScaleType,
    scale_strides: (usize, usize),
    groups: GroupMode,
    k: usize,
    out: DType,
    /// How the 16-bit output rows are written (see [`LinearJit::run`]).
    store: Store,
}

/// How a function writes its output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Store {
    /// Plain stores.
    Plain,
    /// Every row starts on a 64-byte line, and vector steps write whole lines
    /// (32 inputs from a multiple of 32) with non-temporal stores.
    Lines,
    /// Every row starts this many bytes (16, 32 or 48) into a line (row bytes a
    /// multiple of 64, groups of whole lines), and vector steps write whole
    /// lines with non-temporal stores, a line across two groups looked up with
    /// both groups' tables; a row's partial first and last lines with plain
    /// stores.
    Skewed(u8),
}

impl Shape {
    /// The shape of `l` written as `out` (F32, F16 or BF16).
    pub fn of(l: &Linear<'_>, out: DType) -> Shape {
        let s = l.scales();
        Shape {
            weights: PackShape::of(l.weights()),
            zeros: l.zeros().map(PackShape::of),
            scale: s.dtype,
            scale_strides: (s.row_stride, s.col_stride),
            groups: match *l.map() {
                Groups::Size(s) => GroupMode::Size(s),
                Groups::Index(_) => GroupMode::Index,
            },
            k: l.k(),
            out,
            store: Store::Plain,
        }
    }
}

/// The arguments of a compiled function (one pointer to this).
#[repr(C)]
struct Args {
    words: *const u8,
    zeros: *const u8,
    scales: *const u8,
    gidx: *const u8,
    out: *mut u8,
    /// Where staged word columns go ([`STAGE_WORDS`] columns of
    /// [`STAGE_STRIDE`] words), for functions that stage them.
    stage: *mut u8,
    n0: usize,
    n1: usize,
    k0: usize,
    k1: usize,
    /// The row `out` starts at.
    first: usize,
    /// The highest address from which a stage's prefetch of the next rows
    /// ([`crate::host_prefetch`]) stays inside the words' buffer; null where
    /// the buffer is too short, or nothing is staged: no prefetch.
    ahead_limit: *const u8,
}

/// The compiled function's type.
type LinearFn = unsafe extern "C" fn(args: *const Args);

/// A compiled linear shape.
pub struct LinearKernel {
    code: Compiled,
    shape: Shape,
}

impl Code for LinearKernel {
    fn code_mut(&mut self) -> &mut Compiled {
        &mut self.code
    }
}

impl LinearKernel {
    /// Bytes of machine code.
    pub fn code_bytes(&self) -> usize {
        self.code.code_bytes
    }

    /// Compile time in nanoseconds.
    pub fn compile_ns(&self) -> u64 {
        self.code.compile_ns
    }

    /// The shape it computes.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// Calls the function.
    ///
    /// # Safety
    /// `args` describe a linear of this kernel's shape whose views were
    /// validated by `Linear::new`, rows `n0..n1` inside its N and at least
    /// `first`, `k0..k1` inside its K, and `out` valid for writing
    /// `(n1 - first) * K` elements of the shape's output type; where the shape
    /// stages word columns ([`emit::stages`]), `stage` valid for writing and
    /// reading `STAGE_WORDS * STAGE_STRIDE` words, rows `n0..n1` within
    /// `STAGE_WORDS` word columns and `k1 - k0 <= STAGE_INPUTS`; where it
    /// stores [`Store::Lines`], every row of `out` starting on a 64-byte line;
    /// where [`Store::Skewed`], every row at its offset into one.
    unsafe fn call(&self, args: &Args) {
        // SAFETY: the code was built for `LinearFn` by `emit::build` (one pointer
        // parameter, no result) and lives as long as `self.code`.
        let f = unsafe { core::mem::transmute::<*const u8, LinearFn>(self.code.entry()) };
        // SAFETY: the caller's contract.
        unsafe { f(args) }
    }
}

/// Counts of a [`LinearJit`]'s work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinearStats {
    /// Functions compiled.
    pub compiled: u64,
    /// Runs that found their function compiled.
    pub reused: u64,
    /// Runs that wrote whole output lines with non-temporal stores.
    pub streamed: u64,
    /// Functions held now.
    pub kernels: usize,
}

/// Compiles and caches linear functions by [`Shape`] (the crate's one cache:
/// bounded, least recently used evicted).
pub struct LinearJit {
    cache: Cache<Shape, (), LinearKernel>,
    streamed: AtomicU64,
    stream: bool,
    f16_convert: bool,
}

impl Default for LinearJit {
    fn default() -> Self {
        LinearJit::new()
    }
}

/// The process-wide linear JIT.
pub fn linear() -> &'static LinearJit {
    static JIT: OnceLock<LinearJit> = OnceLock::new();
    JIT.get_or_init(LinearJit::new)
}

impl LinearJit {
    /// An empty cache keeping at most [`DEFAULT_CAPACITY`](crate::DEFAULT_CAPACITY)
    /// functions; the Cranelift verifier checks each function in debug builds.
    pub fn new() -> LinearJit {
        LinearJit {
            cache: Cache::new(crate::DEFAULT_CAPACITY),
            streamed: AtomicU64::new(0),
            stream: true,
            f16_convert: true,
        }
    }

    /// This JIT (emptied) keeping at most `capacity` functions.
    pub fn with_capacity(self, capacity: usize) -> LinearJit {
        LinearJit {
            cache: Cache::new(capacity),
            ..self
        }
    }

    /// This JIT (emptied) with f16 outputs' tables rounded by the host's f16
    /// instructions (F16C) when `on` (the default, where the host has them), or
    /// by integer code in the function (for tests of that code on hosts with
    /// F16C). Both give the same bits.
    pub fn with_f16_conversion(self, on: bool) -> LinearJit {
        LinearJit {
            cache: Cache::new(self.cache.capacity()),
            f16_convert: on,
            ..self
        }
    }

    /// This JIT with whole output lines written by non-temporal stores where the
    /// output allows (`on`, the default) or never (for tests of the other path).
    /// Both give the same bits.
    pub fn with_streaming(self, on: bool) -> LinearJit {
        LinearJit { stream: on, ..self }
    }

    /// Whether the functions call the host's F16C for f16 tables.
    fn host_f16(&self) -> bool {
        self.f16_convert && dq_runtime::arch::f16_convert()
    }

    /// What it has done.
    pub fn stats(&self) -> LinearStats {
        let s = self.cache.stats();
        LinearStats {
            compiled: s.compiled,
            reused: s.reused,
            streamed: self.streamed.load(Ordering::Relaxed),
            kernels: s.cached as usize,
        }
    }

    /// True when the function for `l` written as `out` (plain stores) is
    /// compiled and cached.
    pub fn is_cached(&self, l: &Linear<'_>, out: DType) -> bool {
        self.cache.contains(&Shape::of(l, out))
    }

    /// The function for `l` written as `out`, from the cache or compiled.
    ///
    /// # Errors
    /// [`JitError`] when the host is not supported or Cranelift fails.
    pub fn kernel(&self, l: &Linear<'_>, out: DType) -> Result<Arc<LinearKernel>, JitError> {
        self.kernel_of(Shape::of(l, out))
    }

    /// The function of `shape`, from the cache or compiled.
    fn kernel_of(&self, shape: Shape) -> Result<Arc<LinearKernel>, JitError> {
        self.cache.get(
            &shape,
            || Ok(()),
            |()| {
                let code = compile::compile("linear", |isa| self.build(&shape, isa))?;
                Ok(LinearKernel { code, shape })
            },
        )
    }

    /// The IR of `shape`'s function.
    ///
    /// # Errors
    /// [`JitError::UnsupportedHost`] without SSSE3 and SSE4.1.
    fn build(&self, shape: &Shape, isa: &OwnedTargetIsa) -> Result<Function, JitError> {
        if !(compile::has_pshufb(isa) && compile::has_flag(isa, "has_sse41")) {
            return Err(JitError::UnsupportedHost {
                reason: "the linear JIT needs SSSE3 and SSE4.1 (x86-64)",
            });
        }
        Ok(emit::build(shape, isa, self.host_f16()))
    }

    /// The host ISA and the IR of the function for `l` written as `out`.
    fn ir(&self, l: &Linear<'_>, out: DType) -> Result<(OwnedTargetIsa, Function), JitError> {
        compile::build(|isa| self.build(&Shape::of(l, out), isa))
    }

    /// The CLIF text of the function for `l` written as `out` (for review and tests).
    ///
    /// # Errors
    /// As [`kernel`](Self::kernel).
    pub fn clif(&self, l: &Linear<'_>, out: DType) -> Result<String, JitError> {
        Ok(self.ir(l, out)?.1.display().to_string())
    }

    /// Runs the Cranelift verifier on the function for `l` written as `out`.
    ///
    /// # Errors
    /// [`JitError::Verifier`] with its message, or as [`kernel`](Self::kernel).
    pub fn verify(&self, l: &Linear<'_>, out: DType) -> Result<(), JitError> {
        let (isa, f) = self.ir(l, out)?;
        compile::verify(&isa, &f)
    }

    /// Writes rows `rows` of `l` into `out` (row-major, `rows.len() * K`
    /// elements): the bits of [`Linear::run`].
    ///
    /// # Errors
    /// [`LinearError::Output`] when `rows` or `out`'s length do not fit;
    /// [`JitError`] when the function cannot be compiled.
    pub fn run<T: Out>(
        &self,
        l: &Linear<'_>,
        rows: Range<usize>,
        out: &mut [T],
    ) -> Result<(), LinearJitError> {
        let k = l.k();
        let fits = rows.start <= rows.end && rows.end <= l.n();
        if !fits || rows.len().checked_mul(k) != Some(out.len()) {
            return Err(LinearError::Output {
                start: rows.start,
                end: rows.end,
                n: l.n(),
                k,
                got: out.len(),
            }
            .into());
        }
        if out.is_empty() {
            return Ok(());
        }
        // Whole lines streamed (quads, staged columns) where every row starts at
        // the same 16-byte offset into a line: its start, or elsewhere where
        // groups are whole lines. (Writing the lines across groups' runs with
        // plain stores instead was slower than not streaming; BENCHMARKS.md.)
        let mut shape = Shape::of(l, T::OUT);
        let row_bytes = k * size_of::<T>();
        let at = out.as_ptr() as usize % 64;
        shape.store = match (self.stream && row_bytes.is_multiple_of(64), at) {
            (true, 0) if emit::can_stream(&shape) => Store::Lines,
            (true, 16 | 32 | 48) if emit::can_skew(&shape) => Store::Skewed(at as u8),
            _ => Store::Plain,
        };
        let kernel = self.kernel_of(shape)?;
        let q = l.weights();
        let staged = emit::stages(kernel.shape());
        let (align, tile, chunk) = match q.packing {
            Packing::Inner => (1, TILE_ROWS, CHUNK),
            Packing::Outer { .. } if staged => {
                (q.per_word(), q.per_word() * STAGE_WORDS, STAGE_INPUTS)
            }
            Packing::Outer { .. } => (q.per_word(), q.per_word() * TILE_WORDS, CHUNK),
        };
        // The stage of a call's word columns, and how far its prefetch may go.
        let (stage_words, ahead_limit) = if staged {
            (STAGE_WORDS * STAGE_STRIDE, ahead_limit(q))
        } else {
            (0, core::ptr::null())
        };
        let mut stage = vec![0u32; stage_words];
        let mut args = Args {
            words: q.words.as_ptr(),
            zeros: l.zeros().map_or(core::ptr::null(), |z| z.words.as_ptr()),
            scales: l.scales().bytes.as_ptr(),
            gidx: match *l.map() {
                Groups::Index(ix) => ix.as_ptr().cast(),
                Groups::Size(_) => core::ptr::null(),
            },
            out: out.as_mut_ptr().cast(),
            stage: stage.as_mut_ptr().cast(),
            n0: 0,
            n1: 0,
            k0: 0,
            k1: 0,
            first: rows.start,
            ahead_limit,
        };
        // Skewed: calls end where lines do, so no line is split between two.
        let shift = match shape.store {
            Store::Skewed(at) => usize::from(at) / size_of::<T>(),
            _ => 0,
        };
        for (n, ks) in calls(rows, align, tile, k, (chunk, shift)) {
            (args.n0, args.n1, args.k0, args.k1) = (n.start, n.end, ks.start, ks.end);
            // SAFETY: `l` was validated by `Linear::new` (every view's index of
            // rows 0..N and inputs 0..K, and every group the map names, lies inside
            // its buffer; a group index has K entries); `kernel` was compiled for
            // `l`'s shape with `T`'s type; the call's rows lie in `rows`, checked
            // inside 0..N above, and its inputs in 0..K; `out` holds `rows.len() *
            // K` elements of `T` (checked above) and is borrowed mutably for this
            // call; `stage`, for a function that stages, holds `STAGE_WORDS *
            // STAGE_STRIDE` words and is ours, and the call's rows span at most
            // `STAGE_WORDS` word columns (a tile starts at a word's first row) and
            // `STAGE_INPUTS` inputs; where the shape streams, every row of `out`
            // starts at the offset into a line the shape names and is whole
            // lines (checked above), and the function streams only whole,
            // aligned lines of the call's outputs (see `emit::skewed_run`);
            // the function touches no other memory than those views, the stage
            // and its stack (its prefetches, which read nothing, name only
            // lines of the words, below `ahead_limit`).
            unsafe { kernel.call(&args) };
        }
        if shape.store != Store::Plain {
            // The non-temporal stores before any later store, such as the one
            // that tells another thread the output is ready.
            dq_runtime::arch::stream_fence();
            self.streamed.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// The highest address of `q`'s words from which a stage's prefetch (rows
/// `host_prefetch::ROWS` of `ROW_BYTES`, a column stride apart) reads only
/// the buffer; null where the buffer is shorter than that span.
fn ahead_limit(q: &Packed<'_>) -> *const u8 {
    q.col_stride
        .checked_mul(4 * (host_prefetch::ROWS - 1))
        .and_then(|b| b.checked_add(host_prefetch::ROW_BYTES))
        .and_then(|b| q.words.len().checked_sub(b))
        .map_or(core::ptr::null(), |at| q.words[at..].as_ptr())
}

/// The calls of a run over `rows`: tiles of `tile` rows (the first from a
/// multiple of `align`) by chunks of at most `chunk` of the `k` inputs, ending
/// `shift` (under `chunk`) before multiples of `chunk`, and at `k`.
fn calls(
    rows: Range<usize>,
    align: usize,
    tile: usize,
    k: usize,
    (chunk, shift): (usize, usize),
) -> impl Iterator<Item = (Range<usize>, Range<usize>)> {
    let end = rows.end;
    let tiles = std::iter::successors(Some(rows.start), move |&s| {
        Some(s - s % align + tile).filter(|&e| e < end)
    })
    .map(move |s| s..(s - s % align + tile).min(end));
    let starts = std::iter::once(0).chain((chunk - shift..k).step_by(chunk));
    tiles.flat_map(move |n| {
        starts
            .clone()
            .map(move |k0| (n.clone(), k0..(k0 + chunk - (k0 + shift) % chunk).min(k)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dq_runtime::linear::Scales;

    /// The prefetch's last rows end at the words' end, and a buffer shorter
    /// than its span gets none.
    #[test]
    fn ahead_limit_keeps_the_prefetch_in_the_words() {
        let words = vec![0u8; 4096];
        let q = |col_stride, words| Packed {
            words,
            bits: 4,
            packing: Packing::Outer {
                order: [0, 4, 1, 5, 2, 6, 3, 7],
            },
            row_stride: 1,
            col_stride,
            offset: 0,
        };
        let limit = ahead_limit(&q(100, &words));
        assert_eq!(
            limit as usize + 3 * 400 + 512,
            words.as_ptr() as usize + 4096
        );
        assert!(ahead_limit(&q(100, &words[..1711])).is_null());
        assert_eq!(ahead_limit(&q(100, &words[..1712])), words.as_ptr());
        assert!(ahead_limit(&q(usize::MAX / 2, &words)).is_null());
    }

    #[test]
    fn calls_cover_each_input_once_and_end_where_lines_do() {
        for (k, chunk, shift) in [
            (4096, 512, 8),
            (4096, 512, 0),
            (1000, 512, 24),
            (300, 512, 16),
        ] {
            let ks: Vec<_> = calls(0..1, 1, 8, k, (chunk, shift))
                .map(|(_, ks)| ks)
                .collect();
            assert_eq!(ks.first().map(|r| r.start), Some(0));
            assert_eq!(ks.last().map(|r| r.end), Some(k));
            for w in ks.windows(2) {
                assert_eq!(w[0].end, w[1].start, "{k} {chunk} {shift}: contiguous");
                assert_eq!((w[0].end + shift) % chunk, 0, "ends {shift} before a chunk");
            }
            assert!(ks.iter().all(|r| r.len() <= chunk && !r.is_empty()));
        }
    }

    /// A stride no index reaches (one column) compiles into code that never uses
    /// it, and the output equals the generated driver's.
    #[test]
    fn unreached_huge_strides_compile_and_run() {
        let words: Vec<u8> = (0u8..8).map(|i| i.wrapping_mul(37)).collect();
        let scale = [0x3c00u16.to_le_bytes(), 0xbc00u16.to_le_bytes()].concat();
        for packing in [
            Packing::Inner,
            Packing::Outer {
                order: [7, 6, 5, 4, 3, 2, 1, 0],
            },
        ] {
            let weights = Packed {
                words: &words,
                bits: 4,
                packing,
                row_stride: 1,
                col_stride: usize::MAX / 2,
                offset: 0,
            };
            let scales = Scales {
                bytes: &scale,
                dtype: ScaleType::F16,
                row_stride: 1,
                col_stride: usize::MAX / 3,
            };
            let l = Linear::new(2, 1, 1, weights, None, scales, Groups::Size(1)).unwrap();
            let (mut a, mut b) = ([0f32; 2], [0f32; 2]);
            linear().run(&l, 0..2, &mut a).unwrap();
            l.run(0..2, &mut b).unwrap();
            assert_eq!(a, b, "{packing:?}");
        }
    }
}
