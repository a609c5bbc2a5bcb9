//! `dq convert INPUT OUTPUT.safetensors`: every tensor of a GGUF file or a
//! HuggingFace checkpoint, dequantized, into one safetensors file.
//!
//! Everything is checked before a byte is written (types, backend, output path);
//! the tensors are then produced one at a time as the `safetensors` crate writes
//! them (memory: about the largest tensor), into a temporary file in the output's
//! folder that is renamed onto OUTPUT at the end. On any failure no OUTPUT exists.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{Args, ValueEnum};
use dq::formats::Element;
use dq::formats::hf::Dtype;
use dq::{Backend, Options};
use half::{bf16, f16};
use indicatif::{ProgressBar, ProgressStyle};
use safetensors::tensor::View;

use super::source::{Item, ItemError, Kind, Source, SourceError};

/// `dq convert`.
#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// A GGUF file, a HuggingFace checkpoint folder or a .safetensors file.
    pub input: PathBuf,
    /// The safetensors file to write (replaced only when everything succeeded).
    pub output: PathBuf,
    /// Output dtype of the dequantized and floating-point tensors (default: f32 for
    /// GGUF, the scales' dtype for a HuggingFace checkpoint).
    #[arg(long, value_enum)]
    pub dtype: Option<OutDtype>,
    /// Backend: reference, generated, jit or auto.
    #[arg(long, default_value = "auto", value_parser = |s: &str| s.parse::<Backend>())]
    pub backend: Backend,
    /// Worker threads per tensor (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Leave out GGUF tensors of types dq does not decode (each is named on stderr).
    #[arg(long)]
    pub skip_unsupported: bool,
}

/// The output dtypes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OutDtype {
    /// 32-bit float.
    F32,
    /// IEEE half.
    F16,
    /// bfloat16.
    Bf16,
}

impl OutDtype {
    fn safetensors(self) -> Dtype {
        match self {
            OutDtype::F32 => Dtype::F32,
            OutDtype::F16 => Dtype::F16,
            OutDtype::Bf16 => Dtype::BF16,
        }
    }

    fn size(self) -> usize {
        match self {
            OutDtype::F32 => 4,
            OutDtype::F16 | OutDtype::Bf16 => 2,
        }
    }

    fn of(d: Dtype) -> Option<OutDtype> {
        match d {
            Dtype::F32 => Some(OutDtype::F32),
            Dtype::F16 => Some(OutDtype::F16),
            Dtype::BF16 => Some(OutDtype::Bf16),
            _ => None,
        }
    }
}

/// Why `dq convert` failed: one line; no output file exists then.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// The input cannot be opened or is invalid.
    #[error(transparent)]
    Open(#[from] SourceError),
    /// `--threads 0`.
    #[error("--threads must be at least 1")]
    ZeroThreads,
    /// A tensor that cannot be converted (unsupported type, backend).
    #[error("{path}: {source}{hint}", path = path.display())]
    Item {
        /// The input.
        path: PathBuf,
        /// What is wrong.
        source: ItemError,
        /// How to go on, if there is a way.
        hint: &'static str,
    },
    /// Two output tensors of the same name.
    #[error("{path}: two output tensors are named {name}", path = path.display())]
    DuplicateName {
        /// The input.
        path: PathBuf,
        /// The name.
        name: String,
    },
    /// OUTPUT is a folder.
    #[error("{path}: is a directory (expected a .safetensors file name)", path = path.display())]
    OutputIsDir {
        /// The output.
        path: PathBuf,
    },
    /// The output (or its temporary file) cannot be written.
    #[error("{path}: {source}", path = path.display())]
    Io {
        /// The output.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The safetensors writer failed.
    #[error("{path}: {source}", path = path.display())]
    Write {
        /// The output.
        path: PathBuf,
        /// The writer's error.
        source: safetensors::SafeTensorError,
    },
}

/// What was written.
struct Summary {
    tensors: usize,
    skipped: usize,
    read: u64,
    written: u64,
    seconds: f64,
    /// With `--backend jit`: block kernels compiled, and tensors that reused one.
    jit: Option<(usize, usize)>,
}

/// Runs `dq convert`.
///
/// # Errors
/// Invalid input, an unsupported tensor (without `--skip-unsupported`), a backend
/// that cannot run a tensor, an output that cannot be written.
pub fn convert(a: &ConvertArgs) -> Result<(), ConvertError> {
    let threads = match a.threads {
        Some(0) => return Err(ConvertError::ZeroThreads),
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let opts = Options::new().with_backend(a.backend).with_threads(threads);
    let start = Instant::now();
    let jit_before = dq_jit::block::stats().compiled + dq_jit::linear().stats().compiled as usize;
    let source = Source::open(&a.input)?;
    let all = source.items();
    let items = select(&a.input, all, &opts, a.skip_unsupported)?;
    let dtype = a.dtype.unwrap_or_else(|| default_dtype(&items));
    if a.output.is_dir() {
        return Err(ConvertError::OutputIsDir {
            path: a.output.clone(),
        });
    }
    let temp = reserve(&a.output)?;
    for name in &items.skipped {
        eprintln!("dq: skipped {name} (--skip-unsupported)");
    }
    let (written, skipped) = (items.kept.len(), items.skipped.len());
    let bytes = write(temp, &a.output, &items.kept, dtype, &opts)?;
    let s = Summary {
        tensors: written,
        skipped,
        read: items.kept.iter().map(|i| i.src_bytes as u64).sum(),
        written: bytes,
        seconds: start.elapsed().as_secs_f64(),
        jit: (a.backend == Backend::Jit).then(|| {
            // One kernel per GGUF block type or linear shape, compiled for its first
            // tensor; every other tensor of the type or shape reuses it.
            let now = dq_jit::block::stats().compiled + dq_jit::linear().stats().compiled as usize;
            let compiled = now - jit_before;
            let jitted = (items.kept.iter())
                .filter(|i| matches!(i.kind, Kind::Gguf(..) | Kind::Linear(_)))
                .count();
            (compiled, jitted.saturating_sub(compiled))
        }),
    };
    print_summary(&a.output, dtype, &opts, &s);
    Ok(())
}

/// The tensors to write, after the checks.
struct Selected<'a> {
    kept: Vec<Item<'a>>,
    /// `NAME: unsupported GGUF type T` of each tensor left out.
    skipped: Vec<String>,
}

/// Checks every tensor against the backend; with `--skip-unsupported`, drops the
/// unsupported ones (and says which).
fn select<'a>(
    input: &Path,
    items: Vec<Item<'a>>,
    opts: &Options,
    skip: bool,
) -> Result<Selected<'a>, ConvertError> {
    let mut kept = Vec::with_capacity(items.len());
    let mut skipped = Vec::new();
    let mut names = BTreeSet::new();
    for item in items {
        if let Kind::Unsupported(ty) = &item.kind
            && skip
        {
            skipped.push(format!("{}: unsupported GGUF type {ty}", item.name));
            continue;
        }
        item.check(opts.backend()).map_err(|source| {
            let hint = match item.kind {
                Kind::Unsupported(_) => " (--skip-unsupported leaves it out)",
                _ => "",
            };
            ConvertError::Item {
                path: input.to_owned(),
                source,
                hint,
            }
        })?;
        if !names.insert(item.name.clone()) {
            return Err(ConvertError::DuplicateName {
                path: input.to_owned(),
                name: item.name,
            });
        }
        kept.push(item);
    }
    Ok(Selected { kept, skipped })
}

/// f32 for GGUF; for a checkpoint, the dtype of the first linear's scales.
fn default_dtype(items: &Selected<'_>) -> OutDtype {
    items
        .kept
        .iter()
        .find_map(|i| match &i.kind {
            Kind::Linear(l) => OutDtype::of(l.scales().dtype()),
            _ => None,
        })
        .unwrap_or(OutDtype::F32)
}

/// Shared by the lazy tensors while the file is written.
struct Ctx<'a> {
    dtype: OutDtype,
    opts: &'a Options,
    bar: ProgressBar,
    failed: RefCell<Option<ItemError>>,
}

/// A tensor whose bytes are produced when the writer asks for them.
struct Lazy<'a> {
    item: &'a Item<'a>,
    ctx: &'a Ctx<'a>,
}

impl Lazy<'_> {
    /// The input's bytes, when they are written as they are.
    fn as_is(&self) -> Option<&[u8]> {
        match &self.item.kind {
            Kind::Copy(t) => Some(t.data()),
            Kind::Float(t) if t.dtype() == self.ctx.dtype.safetensors() => Some(t.data()),
            _ => None,
        }
    }

    fn produce(&self) -> Result<Vec<u8>, ItemError> {
        let (n, opts) = (self.item.elements(), self.ctx.opts);
        match self.ctx.dtype {
            OutDtype::F32 => bytes_of::<f32>(self.item, n, opts),
            OutDtype::F16 => bytes_of::<f16>(self.item, n, opts),
            OutDtype::Bf16 => bytes_of::<bf16>(self.item, n, opts),
        }
    }
}

/// The item's elements as little-endian `T` bytes (decoded in place when the byte
/// buffer is aligned for `T`, as the allocator gives it in practice).
fn bytes_of<T: Element>(item: &Item<'_>, n: usize, opts: &Options) -> Result<Vec<u8>, ItemError> {
    let mut bytes: Vec<u8> = dq::buffer::zeroed(n * size_of::<T>());
    match bytemuck::try_cast_slice_mut::<u8, T>(&mut bytes) {
        Ok(out) if cfg!(target_endian = "little") => item.fill(out, opts)?,
        _ => {
            let mut out = vec![T::zeroed(); n];
            item.fill(&mut out, opts)?;
            for (b, y) in bytes.chunks_exact_mut(size_of::<T>()).zip(&out) {
                let mut le = bytemuck::bytes_of(y).to_vec();
                if cfg!(target_endian = "big") {
                    le.reverse();
                }
                b.copy_from_slice(&le);
            }
        }
    }
    Ok(bytes)
}

impl View for Lazy<'_> {
    fn dtype(&self) -> Dtype {
        match &self.item.kind {
            Kind::Copy(t) => t.dtype(),
            _ => self.ctx.dtype.safetensors(),
        }
    }

    fn shape(&self) -> &[usize] {
        &self.item.shape
    }

    fn data(&self) -> Cow<'_, [u8]> {
        let bytes = if let Some(b) = self.as_is() {
            Cow::Borrowed(b)
        } else if self.ctx.failed.borrow().is_some() {
            Cow::Owned(vec![0; self.data_len()])
        } else {
            match self.produce() {
                Ok(b) => Cow::Owned(b),
                Err(e) => {
                    // `View::data` cannot fail: the error is kept, zeros written, and
                    // the temporary file deleted after the writer returns.
                    *self.ctx.failed.borrow_mut() = Some(e);
                    Cow::Owned(vec![0; self.data_len()])
                }
            }
        };
        self.ctx.bar.inc(bytes.len() as u64);
        self.ctx.bar.set_message(self.item.name.clone());
        bytes
    }

    fn data_len(&self) -> usize {
        match self.as_is() {
            Some(b) => b.len(),
            None => self.item.elements() * self.ctx.dtype.size(),
        }
    }
}

/// A temporary file in `output`'s folder (which shows that the folder is writable).
fn reserve(output: &Path) -> Result<tempfile::TempPath, ConvertError> {
    let dir = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    tempfile::Builder::new()
        .prefix(".dq-convert-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map(tempfile::NamedTempFile::into_temp_path)
        .map_err(|source| ConvertError::Io {
            path: output.to_owned(),
            source,
        })
}

/// Writes `items` to `temp`, then renames it onto `output`; returns the bytes of
/// tensor data written. On failure `temp` is deleted.
fn write(
    temp: tempfile::TempPath,
    output: &Path,
    items: &[Item<'_>],
    dtype: OutDtype,
    opts: &Options,
) -> Result<u64, ConvertError> {
    let io = |source| ConvertError::Io {
        path: output.to_owned(),
        source,
    };
    let ctx = Ctx {
        dtype,
        opts,
        bar: progress_bar(),
        failed: RefCell::new(None),
    };
    let tensors: Vec<(&str, Lazy<'_>)> = items
        .iter()
        .map(|item| (item.name.as_str(), Lazy { item, ctx: &ctx }))
        .collect();
    let total: u64 = tensors.iter().map(|(_, t)| t.data_len() as u64).sum();
    ctx.bar.set_length(total);
    let metadata = HashMap::from([("format".to_owned(), "pt".to_owned())]);
    safetensors::serialize_to_file(tensors, Some(metadata), &temp).map_err(|source| {
        ConvertError::Write {
            path: output.to_owned(),
            source,
        }
    })?;
    ctx.bar.finish_and_clear();
    if let Some(source) = ctx.failed.into_inner() {
        // `temp` is deleted when it goes out of scope.
        return Err(ConvertError::Item {
            path: output.to_owned(),
            source,
            hint: "",
        });
    }
    // The writer's temporary file was created private (0600); the output is an
    // ordinary file.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&temp, std::fs::Permissions::from_mode(0o644)).map_err(io)?;
    }
    temp.persist(output).map_err(|e| io(e.error))?;
    Ok(total)
}

/// A byte progress bar on a terminal (stderr); hidden otherwise.
fn progress_bar() -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(0);
    let style =
        ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {binary_bytes_per_sec} {msg}")
            .expect("static template");
    bar.set_style(style);
    bar
}

fn print_summary(output: &Path, dtype: OutDtype, opts: &Options, s: &Summary) {
    let skipped = if s.skipped > 0 {
        format!(" ({} skipped)", s.skipped)
    } else {
        String::new()
    };
    let gbps = (s.read + s.written) as f64 / 1e9 / s.seconds.max(1e-9);
    let jit = s.jit.map_or(String::new(), |(c, r)| {
        format!(", JIT kernels {c} compiled / {r} reused")
    });
    println!(
        "wrote {}: {} tensors{skipped}, {} bytes read, {} bytes written ({}), {:.3} s, {:.2} GB/s (read + written), backend {}, {} thread(s){jit}",
        output.display(),
        s.tensors,
        s.read,
        s.written,
        dtype.safetensors().to_string().to_lowercase(),
        s.seconds,
        gbps,
        opts.backend(),
        opts.threads(),
    );
}
