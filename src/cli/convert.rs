//! `dq convert INPUT OUTPUT.safetensors`: every tensor of a GGUF file or a
//! HuggingFace checkpoint, dequantized, into one safetensors file.
//!
//! Everything is checked before a byte is allocated or written (types, backend,
//! output path, the largest tensor against the memory limit, the file against the
//! free disk space); the tensors are then produced one at a time as they are written
//! (memory: about the largest tensor), into a temporary file in the output's folder
//! (`.dq-convert-<pid>-*.tmp`, see [`super::cleanup`]) that is renamed onto OUTPUT at
//! the end. On any failure no OUTPUT and no temporary file exists.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{Args, ValueEnum};
use dq::formats::Element;
use dq::formats::hf::Dtype;
use dq::{Backend, Options};
use half::{bf16, f16};
use indicatif::{ProgressBar, ProgressStyle};
use safetensors::tensor::{Metadata, TensorInfo};

use super::cleanup::{self, TempFile};
use super::limits::{self, LimitError};
use super::source::{Item, ItemError, Kind, Source, SourceError};
use super::text::escape;
use super::unsupported;

/// The temporary file's name: `.dq-convert-<pid>-<random>.tmp`.
const TEMP_PREFIX: &str = ".dq-convert-";
/// The safetensors crate's cap on a header (its readers refuse a larger one).
const MAX_HEADER: usize = 100_000_000;

/// `dq convert`.
#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// A GGUF file, a HuggingFace checkpoint folder or a .safetensors file.
    pub input: PathBuf,
    /// The safetensors file to write (replaced only when everything succeeded).
    pub output: PathBuf,
    /// Output dtype of the dequantized and floating-point tensors (default: f32 for
    /// GGUF; for a HuggingFace checkpoint its config.json dtype, else its scales'
    /// dtype where 16-bit, else bf16).
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
    /// Most memory one tensor's output may take, e.g. 8G (default: the available
    /// memory, /proc/meminfo's MemAvailable).
    #[arg(long, value_name = "SIZE", value_parser = limits::parse_size)]
    pub max_memory: Option<u64>,
    /// Folder output (an OUTPUT not ending in .safetensors).
    #[command(flatten)]
    pub folder: super::folder::FolderArgs,
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
    pub(super) fn safetensors(self) -> Dtype {
        match self {
            OutDtype::F32 => Dtype::F32,
            OutDtype::F16 => Dtype::F16,
            OutDtype::Bf16 => Dtype::BF16,
        }
    }

    pub(super) fn size(self) -> usize {
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
    /// Tensors of GGUF types dq does not decode (without `--skip-unsupported`).
    #[error(
        "{path}: unsupported GGUF types block the conversion: {types} (--skip-unsupported leaves them out)",
        path = path.display()
    )]
    Blocked {
        /// The input.
        path: PathBuf,
        /// Each type with its tensor count and first tensor.
        types: String,
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
    /// The kernel could not read the mapped input while writing it out (`EFAULT`):
    /// the file was truncated meanwhile.
    #[error("{path}: input file changed or shrank while being read", path = path.display())]
    InputChanged {
        /// The input.
        path: PathBuf,
    },
    /// A folder output failed (see [`super::folder`]).
    #[error(transparent)]
    Folder(#[from] super::folder::FolderError),
    /// The output's header cannot be made (safetensors' rules).
    #[error("{path}: {source}", path = path.display())]
    Header {
        /// The output.
        path: PathBuf,
        /// What is wrong.
        source: safetensors::SafeTensorError,
    },
    /// A tensor would not fit in memory, or the file on its disk.
    #[error("{path}: {source}", path = path.display())]
    Limit {
        /// The input.
        path: PathBuf,
        /// Which limit.
        source: LimitError,
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
    let jit_before = dq::formats::jit_compiled();
    if super::folder::is_folder(&a.output) {
        return super::folder::convert(a, &opts);
    }
    super::folder::refuse_flags(a)?;
    let source = Source::open(&a.input)?;
    let all = source.items();
    let items = select(&a.input, all, &opts, a.skip_unsupported)?;
    let dtype = a.dtype.unwrap_or_else(|| default_dtype(&source, &items));
    if a.output.is_dir() {
        return Err(ConvertError::OutputIsDir {
            path: a.output.clone(),
        });
    }
    let dir = folder(&a.output);
    cleanup::sweep(dir, TEMP_PREFIX);
    let refs: Vec<&Item<'_>> = items.kept.iter().collect();
    let layout = Layout::new(&refs, dtype).map_err(|source| ConvertError::Header {
        path: a.output.clone(),
        source,
    })?;
    check_limits(a, &items.kept, dtype, &layout)?;
    let (temp, file) = TempFile::new(dir, TEMP_PREFIX).map_err(|source| ConvertError::Io {
        path: a.output.clone(),
        source,
    })?;
    for name in &items.skipped {
        eprintln!("dq: skipped {} (--skip-unsupported)", escape(name));
    }
    let (written, skipped) = (items.kept.len(), items.skipped.len());
    let paths = (a.input.as_path(), a.output.as_path());
    let bytes = write(temp, file, paths, &items.kept, &layout, dtype, &opts)?;
    let s = Summary {
        tensors: written,
        skipped,
        read: items.kept.iter().map(|i| i.src_bytes as u64).sum(),
        written: bytes,
        seconds: start.elapsed().as_secs_f64(),
        jit: (a.backend == Backend::Jit).then(|| {
            // One kernel per GGUF block type or linear shape, compiled for its first
            // tensor; every other tensor of the type or shape reuses it.
            let now = dq::formats::jit_compiled();
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
pub(super) struct Selected<'a> {
    pub(super) kept: Vec<Item<'a>>,
    /// `NAME: unsupported GGUF type T` of each tensor left out.
    pub(super) skipped: Vec<String>,
}

/// Checks every tensor against the backend; with `--skip-unsupported`, drops the
/// unsupported ones (and says which).
pub(super) fn select<'a>(
    input: &Path,
    items: Vec<Item<'a>>,
    opts: &Options,
    skip: bool,
) -> Result<Selected<'a>, ConvertError> {
    let blocked = (items.iter()).filter_map(|i| match &i.kind {
        Kind::Unsupported(ty) => Some((i.name.as_str(), ty.clone())),
        _ => None,
    });
    let blocked = unsupported::count(blocked);
    if !skip && !blocked.is_empty() {
        return Err(ConvertError::Blocked {
            path: input.to_owned(),
            types: unsupported::summary(&blocked, true),
        });
    }
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

/// f32 for GGUF; for a HuggingFace checkpoint, the model's own dtype
/// (`config.json`'s `dtype` / `torch_dtype`), else its first linear's scales'
/// dtype where that is f16 or bf16 (GPTQ, AWQ, MLX keep scales in the model's
/// dtype), else bf16 (FP8, NVFP4, MXFP4, bitsandbytes: f32, f8 or e8m0 scales
/// say nothing of it).
pub(super) fn default_dtype(source: &Source, items: &Selected<'_>) -> OutDtype {
    let Source::Hf(ckpt) = source else {
        return OutDtype::F32;
    };
    if let Some(d) = ckpt.dtype().and_then(OutDtype::of) {
        return d;
    }
    let scales = items.kept.iter().find_map(|i| match &i.kind {
        Kind::Linear(l) => Some(l.scales().dtype()),
        _ => None,
    });
    match scales {
        Some(Dtype::F16) => OutDtype::F16,
        _ => OutDtype::Bf16,
    }
}

/// The folder of `output` (`.` for a bare file name).
pub(super) fn folder(output: &Path) -> &Path {
    match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// The input's bytes of `item`, when they are written as they are.
pub(super) fn as_is<'a>(item: &Item<'a>, dtype: OutDtype) -> Option<&'a [u8]> {
    match &item.kind {
        Kind::Copy(t) => Some(t.data()),
        Kind::Float(t) if t.dtype() == dtype.safetensors() => Some(t.data()),
        _ => None,
    }
}

/// The output dtype of `item`.
fn out_dtype(item: &Item<'_>, dtype: OutDtype) -> Dtype {
    match &item.kind {
        Kind::Copy(t) => t.dtype(),
        _ => dtype.safetensors(),
    }
}

/// Bytes of `item` in the output; `None` when that overflows.
pub(super) fn out_len(item: &Item<'_>, dtype: OutDtype) -> Option<u64> {
    match as_is(item, dtype) {
        Some(b) => Some(b.len() as u64),
        None => (item.shape.iter()).try_fold(dtype.size() as u64, |n, &d| n.checked_mul(d as u64)),
    }
}

/// The output file's layout: its header, and the tensors in the order written
/// (safetensors' order: dtype alignment descending, then name).
pub(super) struct Layout {
    pub(super) header: Vec<u8>,
    pub(super) order: Vec<usize>,
    pub(super) data_len: u64,
}

impl Layout {
    pub(super) fn new(
        items: &[&Item<'_>],
        dtype: OutDtype,
    ) -> Result<Layout, safetensors::SafeTensorError> {
        let overflow = || safetensors::SafeTensorError::ValidationOverflow;
        let mut order: Vec<usize> = (0..items.len()).collect();
        order.sort_by(|&a, &b| {
            let (a, b) = (items[a], items[b]);
            (out_dtype(b, dtype).cmp(&out_dtype(a, dtype))).then(a.name.cmp(&b.name))
        });
        let mut offset = 0usize;
        let mut infos = Vec::with_capacity(items.len());
        for &i in &order {
            let item = items[i];
            let len = out_len(item, dtype)
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(overflow)?;
            let end = offset.checked_add(len).ok_or_else(overflow)?;
            let info = TensorInfo {
                dtype: out_dtype(item, dtype),
                shape: item.shape.clone(),
                data_offsets: (offset, end),
            };
            infos.push((item.name.clone(), info));
            offset = end;
        }
        let format = HashMap::from([("format".to_owned(), "pt".to_owned())]);
        let metadata = Metadata::new(Some(format), infos)?;
        let mut header =
            serde_json::to_vec(&metadata).map_err(safetensors::SafeTensorError::JsonError)?;
        header.resize(header.len().next_multiple_of(8), b' ');
        if header.len() > MAX_HEADER {
            return Err(safetensors::SafeTensorError::HeaderTooLarge);
        }
        Ok(Layout {
            header,
            order,
            data_len: offset as u64,
        })
    }

    /// Bytes of the whole file.
    pub(super) fn file_len(&self) -> u64 {
        8 + self.header.len() as u64 + self.data_len
    }
}

/// Before anything is allocated or written: the largest tensor produced in memory
/// fits the memory limit, and the file the free space of its folder.
fn check_limits(
    a: &ConvertArgs,
    items: &[Item<'_>],
    dtype: OutDtype,
    layout: &Layout,
) -> Result<(), ConvertError> {
    let limit = |source| ConvertError::Limit {
        path: a.input.clone(),
        source,
    };
    let produced = items.iter().filter(|i| as_is(i, dtype).is_none());
    if let Some(item) = produced.max_by_key(|i| out_len(i, dtype).unwrap_or(u64::MAX)) {
        let need = out_len(item, dtype).ok_or_else(|| {
            limit(LimitError::Overflow {
                tensor: item.name.clone(),
            })
        })?;
        limits::check_memory(&item.name, need, a.max_memory).map_err(limit)?;
    }
    limits::check_disk(&a.output, folder(&a.output), layout.file_len()).map_err(limit)
}

/// The bytes of `item` in the output: borrowed from the input, or produced.
pub(super) fn produce<'a>(
    item: &Item<'a>,
    dtype: OutDtype,
    opts: &Options,
) -> Result<Cow<'a, [u8]>, ItemError> {
    if let Some(b) = as_is(item, dtype) {
        return Ok(Cow::Borrowed(b));
    }
    let n = item.elements();
    let bytes = match dtype {
        OutDtype::F32 => bytes_of::<f32>(item, n, opts),
        OutDtype::F16 => bytes_of::<f16>(item, n, opts),
        OutDtype::Bf16 => bytes_of::<bf16>(item, n, opts),
    }?;
    Ok(Cow::Owned(bytes))
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

/// Writes `items` to `temp` in `layout`'s order, then renames it onto `output`;
/// returns the bytes of tensor data written. On failure `temp` is deleted.
fn write(
    temp: TempFile,
    file: std::fs::File,
    (input, output): (&Path, &Path),
    items: &[Item<'_>],
    layout: &Layout,
    dtype: OutDtype,
    opts: &Options,
) -> Result<u64, ConvertError> {
    let io = |source| ConvertError::Io {
        path: output.to_owned(),
        source,
    };
    let bar = progress_bar();
    bar.set_length(layout.data_len);
    let mut w = BufWriter::with_capacity(1 << 20, &file);
    w.write_all(&(layout.header.len() as u64).to_le_bytes())
        .map_err(io)?;
    w.write_all(&layout.header).map_err(io)?;
    for &i in &layout.order {
        let item = &items[i];
        let bytes = produce(item, dtype, opts).map_err(|source| ConvertError::Item {
            path: output.to_owned(),
            source,
            hint: "",
        })?;
        w.write_all(&bytes).map_err(|e| {
            // Bytes borrowed from a map that was cut short: the kernel's copy faults.
            if e.raw_os_error() == Some(libc::EFAULT) {
                ConvertError::InputChanged {
                    path: input.to_owned(),
                }
            } else {
                io(e)
            }
        })?;
        bar.inc(bytes.len() as u64);
        bar.set_message(escape(&item.name).into_owned());
    }
    w.flush().map_err(io)?;
    drop(w);
    bar.finish_and_clear();
    // The temporary file was created private (0600); the output is an ordinary file.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::Permissions::from_mode(0o644);
        std::fs::set_permissions(temp.path(), mode).map_err(io)?;
    }
    temp.persist(output).map_err(io)?;
    Ok(layout.data_len)
}

/// A byte progress bar on a terminal (stderr); hidden otherwise.
pub(super) fn progress_bar() -> ProgressBar {
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
        escape(&output.display().to_string()),
        s.tensors,
        s.read,
        s.written,
        dtype.safetensors().to_string().to_lowercase(),
        s.seconds,
        gbps,
        opts.backend(),
        opts.threads(),
    );
    if let Some(line) = super::choices::auto_line() {
        println!("{line}");
    }
}
