//! Dequantizing one tensor into a caller's f32, f16 or bf16 buffer, on a chosen
//! backend and number of threads.

use std::sync::Arc;

use crate::formats::jit::{self, BlockJit};
use dq_runtime::Backend;
use dq_runtime::block::{self, BlockKernel};

use super::error::{GgufError, Result};
use super::tensor::TensorInfo;
use super::types::GgmlType;
use super::{Gguf, reference};
use crate::Options;
use crate::formats::element::{self, Element};
use crate::formats::race::{self, Pick};

/// Checks that `backend` can decode GGUF type `ty` for tensor `name`.
///
/// `Reference` runs the scalar decoders of [`mod@reference`]; `Generated` runs the
/// type's declaration ([`dq_runtime::block::gguf`]) through the generated block
/// driver; `Jit` runs it through the JIT's block kernel (`dq_jit::block`),
/// compiled here on first use (once per type and process); `Auto` races the two
/// per type and output ([`race`](crate::formats::race)), and runs the generated
/// driver where the JIT cannot compile.
///
/// # Errors
/// [`GgufError::UnsupportedType`] for a type dq does not decode;
/// [`GgufError::Jit`] when the JIT cannot compile the type's kernel.
pub fn check_backend(backend: Backend, ty: GgmlType, name: &str) -> Result<()> {
    if !ty.is_supported() {
        return Err(GgufError::UnsupportedType {
            name: name.to_owned(),
            ty: ty.name().to_owned(),
        });
    }
    match backend {
        Backend::Reference | Backend::Auto | Backend::Generated => Ok(()),
        Backend::Jit => jit_kernel(ty, name).map(drop),
    }
}

/// The generated block kernel of a supported type.
fn kernel(ty: GgmlType) -> Option<&'static BlockKernel> {
    block::gguf::kernel(ty.name())
}

/// The JIT block kernel of a supported type (compiled on first use, then reused).
fn jit_kernel(ty: GgmlType, name: &str) -> Result<Arc<BlockJit>> {
    jit::block_kernel(ty.name()).map_err(|source| GgufError::Jit {
        ty,
        name: name.to_owned(),
        source: Box::new(source),
    })
}

/// The kernel a backend decodes with.
enum Decoder {
    Reference,
    Generated(&'static BlockKernel),
    Jit(Arc<BlockJit>),
}

impl<B: AsRef<[u8]>> Gguf<B> {
    /// Dequantizes tensor `t` into `out` (its element count, row-major): the f32
    /// values of SPEC §11, or their round-to-nearest-even for f16/bf16.
    ///
    /// `opts.threads()` threads (0 is taken as 1) each decode a run of whole blocks;
    /// the bits do not depend on the count. `opts.backend()` must be able to run the
    /// type (see [`check_backend`]).
    ///
    /// ```
    /// use dq::formats::gguf::Gguf;
    /// use dq::{Backend, Options};
    /// use half::bf16;
    /// let file = Gguf::open("tests/fixtures/gguf/blocks.gguf")?;
    /// let t = file.tensor("q4_k.r3").expect("listed");
    /// let mut f32s = vec![0f32; t.element_count() as usize];
    /// let opts = Options::new().with_backend(Backend::Auto).with_threads(2);
    /// file.dequantize(t, &mut f32s, &opts)?;
    /// let mut bf16s = vec![bf16::ZERO; f32s.len()];
    /// file.dequantize(t, &mut bf16s, &opts)?;
    /// assert_eq!(bf16s[7], bf16::from_f32(f32s[7]));
    /// // The generated backend runs the type's declaration: the same bits.
    /// let mut generated = vec![0f32; f32s.len()];
    /// file.dequantize(t, &mut generated, &Options::new().with_backend(Backend::Generated).with_threads(1))?;
    /// assert_eq!(generated.iter().map(|y| y.to_bits()).collect::<Vec<_>>(),
    ///            f32s.iter().map(|y| y.to_bits()).collect::<Vec<_>>());
    /// // The JIT backend (cargo feature `jit`) compiles the declaration once per
    /// // type: the same bits too.
    /// # #[cfg(feature = "jit")] {
    /// let mut jit = vec![0f32; f32s.len()];
    /// file.dequantize(t, &mut jit, &Options::new().with_backend(Backend::Jit).with_threads(3))?;
    /// assert_eq!(jit.iter().map(|y| y.to_bits()).collect::<Vec<_>>(),
    ///            f32s.iter().map(|y| y.to_bits()).collect::<Vec<_>>());
    /// # }
    /// # Ok::<(), dq::formats::gguf::GgufError>(())
    /// ```
    ///
    /// # Errors
    /// [`GgufError::UnsupportedType`], [`GgufError::Jit`], or
    /// [`GgufError::OutputLength`] when `out` is not the tensor's element count;
    /// nothing is written then.
    pub fn dequantize<T: Element>(
        &self,
        t: &TensorInfo,
        out: &mut [T],
        opts: &Options,
    ) -> Result<()> {
        let ty = t.ggml_type().ok_or_else(|| t.unsupported())?;
        check_backend(opts.backend(), ty, t.name())?;
        if out.len() as u64 != t.element_count() {
            return Err(GgufError::OutputLength {
                name: t.name().to_owned(),
                expected: t.element_count(),
                got: out.len(),
            });
        }
        run(ty, t.name(), self.tensor_data(t)?, out, opts)
    }
}

/// Dequantizes `data`, whole blocks of GGUF type `ty` outside any file, into `out`
/// (their element count) as [`Gguf::dequantize`] does a tensor: the same backends,
/// threads and bits. The Python package's `dq.gguf.dequantize` runs this.
///
/// ```
/// use dq::formats::gguf::{GgmlType, dequantize_blocks};
/// use dq::Options;
/// // One Q8_0 block: f16 scale 0.5, then 32 signed bytes.
/// let mut block = vec![0x00, 0x38];
/// block.extend((0..32).map(|i| (i as i8 - 16) as u8));
/// let mut out = vec![0f32; 32];
/// dequantize_blocks(GgmlType::Q8_0, &block, &mut out, &Options::new())?;
/// assert_eq!((out[0], out[31]), (-8.0, 7.5));
/// # Ok::<(), dq::formats::gguf::GgufError>(())
/// ```
///
/// # Errors
/// [`GgufError::UnsupportedType`] and [`GgufError::Jit`] as [`check_backend`];
/// [`GgufError::Length`] when `data` is not whole blocks or `out` not their
/// element count. Nothing is written then.
pub fn dequantize_blocks<T: Element>(
    ty: GgmlType,
    data: &[u8],
    out: &mut [T],
    opts: &Options,
) -> Result<()> {
    check_backend(opts.backend(), ty, "data")?;
    let (block, size) = (ty.block_size(), ty.type_size());
    if !data.len().is_multiple_of(size) || data.len() / size * block != out.len() {
        return Err(GgufError::Length {
            ty,
            bytes: data.len(),
            elements: out.len(),
        });
    }
    run(ty, "data", data, out, opts)
}

/// Decodes the checked blocks `data` of tensor `name` with the backend `opts` picks.
fn run<T: Element>(
    ty: GgmlType,
    name: &str,
    data: &[u8],
    out: &mut [T],
    opts: &Options,
) -> Result<()> {
    let (pick, timed) = match opts.backend() {
        Backend::Reference => {
            decode(ty, data, out, opts, &Decoder::Reference);
            return Ok(());
        }
        Backend::Jit => (Pick::Jit, false),
        Backend::Auto if out.len() >= race::MIN_ELEMENTS => race::next(&race_key::<T>(ty)),
        _ => (Pick::Generated, false),
    };
    let generated = kernel(ty).map_or(Decoder::Reference, Decoder::Generated);
    let decoder = match pick {
        Pick::Jit => match jit_kernel(ty, name) {
            Ok(k) => Decoder::Jit(k),
            // `auto` falls back to the generated driver where the JIT cannot compile.
            Err(_) if opts.backend() == Backend::Auto => generated,
            Err(e) => return Err(e),
        },
        Pick::Generated => generated,
    };
    let start = std::time::Instant::now();
    decode(ty, data, out, opts, &decoder);
    if timed {
        let pick = if matches!(decoder, Decoder::Jit(_)) {
            Pick::Jit
        } else {
            Pick::Generated
        };
        let ns = start.elapsed().as_nanos() as f64 / out.len() as f64;
        race::report(&race_key::<T>(ty), pick, ns);
    }
    Ok(())
}

/// Decodes `data`, the blocks of type `ty`, into `out` with `decoder`: the
/// generated kernels write `T` themselves, the others f32 (then rounded).
fn decode<T: Element>(ty: GgmlType, data: &[u8], out: &mut [T], opts: &Options, decoder: &Decoder) {
    let size = ty.type_size();
    if let Decoder::Generated(k) = decoder {
        let direct = |blocks: std::ops::Range<usize>, part: &mut [T]| {
            let bytes = &data[blocks.start * size..blocks.end * size];
            k.run(bytes, part).expect("whole blocks");
        };
        return opts.scope(|| element::split_direct(out, ty.block_size(), opts.threads(), &direct));
    }
    let decode = |blocks: std::ops::Range<usize>, buf: &mut [f32]| {
        let bytes = &data[blocks.start * size..blocks.end * size];
        // Whole blocks into their elements: the lengths match by construction.
        match decoder {
            Decoder::Generated(k) => k.run(bytes, buf).expect("whole blocks"),
            Decoder::Jit(k) => k.run(bytes, buf).expect("whole blocks"),
            Decoder::Reference => reference::decode(ty, bytes, buf),
        }
    };
    opts.scope(|| element::split(out, ty.block_size(), opts.threads(), &decode));
}

/// The kind `auto` races per: block type and output type.
fn race_key<T: Element>(ty: GgmlType) -> String {
    format!("gguf {} {}", ty.name(), T::DTYPE)
}
