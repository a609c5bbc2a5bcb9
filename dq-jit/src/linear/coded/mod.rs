//! Coded weights ([`dq_runtime::linear::coded`]: bitsandbytes NF4/FP4 and
//! LLM.int8, MLX affine, MXFP4) on the JIT: one Cranelift function per
//! declaration *shape*, cached.
//!
//! A [`Coded`] declares where each code lies (a bit stream, strides), its base
//! value, where its group's scale comes from and what follows the multiply. Its
//! [`CodedShape`] is all of that but the bytes, the base values and the offset:
//! code width and order, row and column strides, group size, the scale's kind
//! (floats of a type, bitsandbytes' nested absmax, e8m0), the post step (a
//! multiply by a constant, MLX's bias in the scales' type), K and the output
//! type. The function computes rows `n0..n1` of the `[N, K]` output from the
//! bytes where they lie, a run of one group at a time along the axis the codes
//! run on (K, or N where codes run along N as in gpt-oss' `[E, K, N]` output):
//! per run the group's scale, then
//! - 4-bit codes: the group's 16 outputs by the formula (four F32X4 lanes),
//!   looked up 16 codes a step with byte shuffles (`x86_pshufb`; two byte tables
//!   for f16/bf16, four for f32);
//! - 8-bit codes whose base value is the code itself (signed or unsigned): the
//!   formula 16 codes a step in F32X4 lanes;
//! - other widths (2, 3, 6 bits) and other tables: the formula one code at a time.
//!
//! Runs along N write their outputs down a column, a lane at a time. Every path
//! rounds once, with the integer round-to-nearest-even of the generated driver:
//! the bits of [`Coded::run`].
//!
//! ```
//! use dq_runtime::linear::coded::{BitOrder, Codes, Coded, Post, Scale};
//! use dq_runtime::linear::ScaleType;
//! let bytes = [0x01, 0x23];
//! let base: Vec<f32> = (0..16).map(|q| q as f32).collect();
//! let scale = 0.5f32.to_le_bytes();
//! let codes = Codes { bytes: &bytes, bits: 4, order: BitOrder::HighNibbleFirst };
//! let coded = Coded::new(1, 4, codes, (0, 4, 1), 4, &base,
//!     Scale::Floats { bytes: &scale, dtype: ScaleType::F32 }, Post::None)?;
//! let mut out = [0f32; 4];
//! dq_jit::coded().run(&coded, 0..1, &mut out)?;
//! assert_eq!(out, [0.0, 0.5, 1.0, 1.5]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod emit;
#[cfg(test)]
mod tests;

use std::ops::Range;
use std::sync::{Arc, OnceLock};

use dq_runtime::DType;
use dq_runtime::linear::coded::{BitOrder, Coded, Post, Scale};
use dq_runtime::linear::{LinearError, Out, ScaleType};

use super::LinearJitError;
use crate::cache::{Cache, Code};
use crate::compile::{self, Compiled};
use crate::error::JitError;

/// Rows per call where codes run along N: the call's output rows are written a
/// column at a time, so they should stay in L1 (128 rows of a 64-byte line).
pub const COLUMN_ROWS: usize = 128;

/// What a base table is, as the vector path of 8-bit codes sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Base {
    /// `base[q] = q`.
    Unsigned,
    /// `base[q] = q as i8`.
    Signed,
    /// Anything else (read from the table).
    Table,
}

/// Where a group's scale comes from (as [`Scale`], without the bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum ScaleKind {
    Floats(ScaleType),
    /// Groups per second-level scale, and the offset's bits.
    Nested {
        block: usize,
        offset: u32,
    },
    Pow2,
    /// NVFP4's e4m3 byte per group (looked up in the book, the runtime's e4m3
    /// table) divided by or times the global scale (its bits).
    F8 {
        global: u32,
        divide: bool,
    },
}

/// What follows the multiply (as [`Post`], without the bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum PostKind {
    None,
    /// The constant's bits.
    Mul(u32),
    Add(ScaleType),
}

/// How the function walks the weight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Walk {
    /// Codes run along K (column stride 1): runs along each row.
    Rows,
    /// Codes run along N (row stride 1): runs down each column.
    Columns,
    /// Neither: one element at a time.
    Elements,
}

/// What one compiled function is specialised for: a declaration without its
/// bytes, base values, offset and N, and the output type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CodedShape {
    bits: u32,
    order: BitOrder,
    row_stride: usize,
    col_stride: usize,
    group_size: usize,
    base: Base,
    scale: ScaleKind,
    post: PostKind,
    k: usize,
    out: DType,
}

impl CodedShape {
    /// The shape of `c` written as `out` (F32, F16 or BF16).
    pub fn of(c: &Coded<'_>, out: DType) -> CodedShape {
        let codes = c.codes();
        let (_, row_stride, col_stride) = c.strides();
        let base = c.base();
        let used = &base[..1 << codes.bits];
        let is = |f: fn(usize) -> f32| {
            used.iter()
                .enumerate()
                .all(|(q, &b)| b.to_bits() == f(q).to_bits())
        };
        CodedShape {
            bits: codes.bits,
            order: codes.order,
            row_stride,
            col_stride,
            group_size: c.group_size(),
            base: if is(|q| q as f32) {
                Base::Unsigned
            } else if codes.bits == 8 && is(|q| f32::from(q as u8 as i8)) {
                Base::Signed
            } else {
                Base::Table
            },
            scale: match c.scale() {
                Scale::Floats { dtype, .. } => ScaleKind::Floats(dtype),
                Scale::Nested { block, offset, .. } => ScaleKind::Nested {
                    block,
                    offset: offset.to_bits(),
                },
                Scale::Pow2 { .. } => ScaleKind::Pow2,
                Scale::F8 { global, divide, .. } => ScaleKind::F8 {
                    global: global.to_bits(),
                    divide,
                },
            },
            post: match c.post() {
                Post::None => PostKind::None,
                Post::Mul(m) => PostKind::Mul(m.to_bits()),
                Post::Add { dtype, .. } => PostKind::Add(dtype),
            },
            k: c.k(),
            out,
        }
    }

    fn walk(&self) -> Walk {
        if self.col_stride == 1 {
            Walk::Rows
        } else if self.row_stride == 1 {
            Walk::Columns
        } else {
            Walk::Elements
        }
    }
}

/// The arguments of a compiled function (one pointer to this).
#[repr(C)]
struct Args {
    codes: *const u8,
    /// 256 f32 base values.
    base: *const f32,
    /// The scales (floats or e8m0 bytes; nested: the per-group codes).
    scales: *const u8,
    /// Nested: the 256-entry second-level code book; F8: the e4m3 values.
    book: *const u8,
    /// Nested: the second-level scales.
    absmax: *const u8,
    biases: *const u8,
    out: *mut u8,
    n0: usize,
    n1: usize,
    /// The row `out` starts at.
    first: usize,
    /// The stream position of element `(0, 0)`.
    offset: usize,
}

/// The compiled function's type.
type CodedFn = unsafe extern "C" fn(args: *const Args);

/// A compiled coded shape.
pub struct CodedKernel {
    code: Compiled,
    shape: CodedShape,
}

impl Code for CodedKernel {
    fn code_mut(&mut self) -> &mut Compiled {
        &mut self.code
    }
}

impl CodedKernel {
    /// Bytes of machine code.
    pub fn code_bytes(&self) -> usize {
        self.code.code_bytes
    }

    /// The shape it computes.
    pub fn shape(&self) -> &CodedShape {
        &self.shape
    }

    /// Calls the function.
    ///
    /// # Safety
    /// `args` describe a declaration of this kernel's shape validated by
    /// `Coded::new` (with its base table), rows `n0..n1` inside its N and at
    /// least `first`, and `out` valid for writing `(n1 - first) * K` elements of
    /// the shape's output type.
    unsafe fn call(&self, args: &Args) {
        // SAFETY: the code was built for `CodedFn` by `emit::build` (one pointer
        // parameter, no result) and lives as long as `self.code`.
        let f = unsafe { core::mem::transmute::<*const u8, CodedFn>(self.code.entry()) };
        // SAFETY: the caller's contract.
        unsafe { f(args) }
    }
}

/// Compiles and caches coded functions by [`CodedShape`] (bounded, least
/// recently used evicted).
pub struct CodedJit {
    cache: Cache<CodedShape, (), CodedKernel>,
}

impl Default for CodedJit {
    fn default() -> Self {
        CodedJit::new()
    }
}

/// The process-wide coded JIT.
pub fn coded() -> &'static CodedJit {
    static JIT: OnceLock<CodedJit> = OnceLock::new();
    JIT.get_or_init(CodedJit::new)
}

impl CodedJit {
    /// An empty cache keeping at most [`DEFAULT_CAPACITY`](crate::DEFAULT_CAPACITY)
    /// functions.
    pub fn new() -> CodedJit {
        CodedJit {
            cache: Cache::new(crate::DEFAULT_CAPACITY),
        }
    }

    /// Functions compiled so far.
    pub fn compiled(&self) -> u64 {
        self.cache.stats().compiled
    }

    /// The function for `c` written as `out`, from the cache or compiled.
    ///
    /// # Errors
    /// [`JitError`] when the host is not supported or Cranelift fails.
    pub fn kernel(&self, c: &Coded<'_>, out: DType) -> Result<Arc<CodedKernel>, JitError> {
        let shape = CodedShape::of(c, out);
        self.cache.get(
            &shape,
            || Ok(()),
            |()| {
                let code = compile::compile("coded", |isa| build(&shape, isa))?;
                Ok(CodedKernel { code, shape })
            },
        )
    }

    /// The CLIF text of the function for `c` written as `out` (for review and tests).
    ///
    /// # Errors
    /// As [`kernel`](Self::kernel).
    pub fn clif(&self, c: &Coded<'_>, out: DType) -> Result<String, JitError> {
        let shape = CodedShape::of(c, out);
        Ok(compile::build(|isa| build(&shape, isa))?
            .1
            .display()
            .to_string())
    }

    /// Writes rows `rows` of `c` into `out` (row-major, `rows.len() * K`
    /// elements): the bits of [`Coded::run`].
    ///
    /// # Errors
    /// [`LinearError::Output`] when `rows` or `out`'s length do not fit;
    /// [`JitError`] when the function cannot be compiled.
    pub fn run<T: Out>(
        &self,
        c: &Coded<'_>,
        rows: Range<usize>,
        out: &mut [T],
    ) -> Result<(), LinearJitError> {
        let k = c.k();
        let fits = rows.start <= rows.end && rows.end <= c.n();
        if !fits || rows.len().checked_mul(k) != Some(out.len()) {
            return Err(LinearError::Output {
                start: rows.start,
                end: rows.end,
                n: c.n(),
                k,
                got: out.len(),
            }
            .into());
        }
        if out.is_empty() {
            return Ok(());
        }
        let kernel = self.kernel(c, T::OUT)?;
        let null = core::ptr::null();
        let (scales, book, absmax) = match c.scale() {
            Scale::Floats { bytes, .. } | Scale::Pow2 { bytes } => (bytes.as_ptr(), null, null),
            Scale::F8 { bytes, .. } => {
                let book = dq_runtime::minifloat::F8_E4M3_TABLE.as_ptr();
                (bytes.as_ptr(), book.cast(), null)
            }
            Scale::Nested {
                codes,
                book,
                absmax,
                ..
            } => (codes.as_ptr(), book.as_ptr(), absmax.as_ptr()),
        };
        let mut args = Args {
            codes: c.codes().bytes.as_ptr(),
            base: c.base().as_ptr(),
            scales,
            book,
            absmax,
            biases: match c.post() {
                Post::Add { bytes, .. } => bytes.as_ptr(),
                _ => null,
            },
            out: out.as_mut_ptr().cast(),
            n0: rows.start,
            n1: rows.end,
            first: rows.start,
            offset: c.strides().0,
        };
        let tile = match kernel.shape.walk() {
            Walk::Columns => COLUMN_ROWS,
            _ => rows.len(),
        };
        let mut n = rows.start;
        while n < rows.end {
            (args.n0, args.n1) = (n, (n + tile).min(rows.end));
            // SAFETY: `c` was validated by `Coded::new` (every position of rows
            // 0..N and inputs 0..K lies inside the codes, every group they reach
            // inside the scales, the nested codes and absmax and the biases, the
            // nested book holds 256 f32, the base table 256); `kernel` was
            // compiled for `c`'s shape with `T`'s type; the call's rows lie in
            // `rows`, checked inside 0..N above; `out` holds `rows.len() * K`
            // elements of `T` (checked above) and is borrowed mutably for the
            // call. The function reads only those buffers (its vector loads take
            // codes of one run, inside the stream) and writes only the call's
            // rows of `out` and its stack.
            unsafe { kernel.call(&args) };
            n = args.n1;
        }
        Ok(())
    }
}

/// The IR of `shape`'s function.
///
/// # Errors
/// [`JitError::UnsupportedHost`] without SSSE3 and SSE4.1.
fn build(
    shape: &CodedShape,
    isa: &cranelift_codegen::isa::OwnedTargetIsa,
) -> Result<cranelift_codegen::ir::Function, JitError> {
    if !(compile::has_pshufb(isa) && compile::has_flag(isa, "has_sse41")) {
        return Err(JitError::UnsupportedHost {
            reason: "the coded JIT needs SSSE3 and SSE4.1 (x86-64)",
        });
    }
    Ok(emit::build(shape, isa))
}
