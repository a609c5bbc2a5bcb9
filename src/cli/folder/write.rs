//! Writing the folder: the shard files tensor by tensor (memory: the largest tensor
//! plus a 1 MiB write buffer; two copies of it for a gemma norm, produced in f32),
//! the index, config.json and companions; atomically into a temporary folder, or
//! one part's shards, or `--finish`'s check and the rest.

use std::io::{BufWriter, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};

use dq::Options;
use dq::formats::Element;
use half::{bf16, f16};
use indicatif::{ProgressBar, ProgressStyle};

use super::gguf_hf::{Transform, unpermuted_row};
use super::{FolderError, Plan, Tensor, shards, weight_map};
use crate::cli::cleanup;
use crate::cli::convert::{self, ConvertArgs, ConvertError, Layout, OutDtype};
use crate::cli::limits::{self, LimitError};
use crate::cli::source::ItemError;
use crate::cli::text::escape;

/// Temporary folders beside OUT_DIR: `.dq-convert-<pid>-<random>.tmp`.
const TEMP_PREFIX: &str = ".dq-convert-";
/// A part's shard being written into OUT_DIR: `.dq-part-<file>.tmp`.
const PART_PREFIX: &str = ".dq-part-";

/// Writes what `a` asks of `plan`; returns the bytes of tensor data written.
pub(super) fn run(a: &ConvertArgs, plan: &Plan<'_>, opts: &Options) -> Result<u64, ConvertError> {
    let layouts = layouts(a, plan)?;
    let out = a.output.as_path();
    if a.folder.finish {
        finish(a, plan, &layouts)?;
        return Ok(0);
    }
    let mine: Vec<usize> = (0..plan.shards.len())
        .filter(|&s| a.folder.part.is_none_or(|p| shards::in_part(s, p)))
        .collect();
    check_limits(a, plan, &layouts, &mine)?;
    let total = mine.iter().map(|&s| layouts[s].data_len).sum();
    let bar = progress_bar(total);
    let n = plan.shards.len();
    if a.folder.part.is_some() {
        match std::fs::create_dir(out) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(io(out)(e))?,
            _ => {}
        }
        for &s in &mine {
            let name = shards::file_name(s, n);
            let temp = out.join(format!("{PART_PREFIX}{name}.tmp"));
            let tensors = &plan.tensors[plan.shards[s].clone()];
            let done =
                write_shard(&temp, tensors, &layouts[s], plan.dtype, opts, &bar).and_then(|()| {
                    std::fs::rename(&temp, out.join(&name)).map_err(|e| io(&temp)(e).into())
                });
            if done.is_err() {
                let _ = std::fs::remove_file(&temp);
            }
            done?;
        }
        bar.finish_and_clear();
        return Ok(total);
    }
    let parent = convert::folder(out);
    sweep(parent);
    let temp = tempfile::Builder::new()
        .prefix(&format!("{TEMP_PREFIX}{}-", std::process::id()))
        .suffix(".tmp")
        .tempdir_in(parent)
        .map_err(io(out))?;
    for (s, layout) in layouts.iter().enumerate() {
        let path = temp.path().join(shards::file_name(s, n));
        let tensors = &plan.tensors[plan.shards[s].clone()];
        write_shard(&path, tensors, layout, plan.dtype, opts, &bar)?;
    }
    write_rest(temp.path(), plan, &layouts)?;
    bar.finish_and_clear();
    publish(temp, out)?;
    Ok(total)
}

/// Each shard's layout (header and tensor order, as a single-file convert has it).
fn layouts(a: &ConvertArgs, plan: &Plan<'_>) -> Result<Vec<Layout>, ConvertError> {
    let mut out = Vec::with_capacity(plan.shards.len());
    for range in &plan.shards {
        let items: Vec<_> = plan.tensors[range.clone()]
            .iter()
            .map(|t| &t.item)
            .collect();
        let layout = Layout::new(&items, plan.dtype).map_err(|source| ConvertError::Header {
            path: a.output.clone(),
            source,
        })?;
        out.push(layout);
    }
    Ok(out)
}

/// The largest tensor produced in memory against the memory limit, this run's
/// files against the free space.
fn check_limits(
    a: &ConvertArgs,
    plan: &Plan<'_>,
    layouts: &[Layout],
    mine: &[usize],
) -> Result<(), ConvertError> {
    let limit = |source| ConvertError::Limit {
        path: a.input.clone(),
        source,
    };
    for t in &plan.tensors {
        let bytes = convert::out_len(&t.item, plan.dtype).ok_or_else(|| {
            limit(LimitError::Overflow {
                tensor: t.item.name.clone(),
            })
        })?;
        // A gemma norm is produced in f32, then converted.
        let need = match t.transform {
            Transform::MinusOne => bytes + 4 * t.item.elements() as u64,
            _ if convert::as_is(&t.item, plan.dtype).is_some() => 0,
            _ => bytes,
        };
        limits::check_memory(&t.item.name, need, a.max_memory).map_err(limit)?;
    }
    let need: u64 = mine.iter().map(|&s| layouts[s].file_len()).sum();
    let dir = if a.folder.part.is_some() && a.output.is_dir() {
        a.output.as_path()
    } else {
        convert::folder(&a.output)
    };
    limits::check_disk(&a.output, dir, need).map_err(limit)
}

/// One shard file: the header, then each tensor as produced.
fn write_shard(
    path: &Path,
    tensors: &[Tensor<'_>],
    layout: &Layout,
    dtype: OutDtype,
    opts: &Options,
    bar: &ProgressBar,
) -> Result<(), ConvertError> {
    let file = std::fs::File::create(path).map_err(io(path))?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    w.write_all(&(layout.header.len() as u64).to_le_bytes())
        .map_err(io(path))?;
    w.write_all(&layout.header).map_err(io(path))?;
    for &i in &layout.order {
        let t = &tensors[i];
        let item_err = |source| ConvertError::Item {
            path: path.to_owned(),
            source,
            hint: "",
        };
        let write_err = |e: std::io::Error| {
            // Bytes borrowed from a map that was cut short: the kernel's copy faults.
            if e.raw_os_error() == Some(libc::EFAULT) {
                ConvertError::InputChanged {
                    path: path.to_owned(),
                }
            } else {
                io(path)(e).into()
            }
        };
        match t.transform {
            Transform::None => {
                let bytes = convert::produce(&t.item, dtype, opts).map_err(item_err)?;
                w.write_all(&bytes).map_err(write_err)?;
            }
            Transform::Unpermute { heads } => {
                let bytes = convert::produce(&t.item, dtype, opts).map_err(item_err)?;
                let rows = t.item.shape.first().copied().unwrap_or(1).max(1);
                let row = bytes.len() / rows;
                for r in 0..rows {
                    let from = unpermuted_row(r, rows, heads) * row;
                    w.write_all(&bytes[from..from + row]).map_err(write_err)?;
                }
            }
            Transform::MinusOne => {
                let bytes = minus_one(t, dtype, opts).map_err(item_err)?;
                w.write_all(&bytes).map_err(write_err)?;
            }
        }
        bar.inc(convert::out_len(&t.item, dtype).unwrap_or(0));
        bar.set_message(escape(&t.item.name).into_owned());
    }
    w.flush().map_err(io(path))?;
    let file = w.into_inner().map_err(|e| io(path)(e.into_error()))?;
    file.sync_all().map_err(io(path))?;
    Ok(())
}

/// A gemma norm: decoded to f32, `w - 1` in f32 (as transformers' numpy does), then
/// rounded once to the output dtype.
fn minus_one(t: &Tensor<'_>, dtype: OutDtype, opts: &Options) -> Result<Vec<u8>, ItemError> {
    let mut v = vec![0f32; t.item.elements()];
    t.item.fill(&mut v, opts)?;
    for x in &mut v {
        *x -= 1.0;
    }
    Ok(match dtype {
        OutDtype::F32 => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        OutDtype::F16 => le::<f16>(&v),
        OutDtype::Bf16 => le::<bf16>(&v),
    })
}

fn le<T: Element + bytemuck::Pod>(v: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * size_of::<T>());
    for &x in v {
        let mut b = bytemuck::bytes_of(&T::from_f32(x)).to_vec();
        if cfg!(target_endian = "big") {
            b.reverse();
        }
        out.extend_from_slice(&b);
    }
    out
}

/// The index (more than one shard), `config.json` and the companion files, written
/// into `dir` (each through a temporary file, so that `--finish` is atomic per file).
fn write_rest(dir: &Path, plan: &Plan<'_>, layouts: &[Layout]) -> Result<(), FolderError> {
    if plan.shards.len() > 1 {
        let total = layouts.iter().map(|l| l.data_len).sum();
        let index = shards::index_json(total, &weight_map(plan));
        put(dir, "model.safetensors.index.json", &index)?;
    }
    if let Some(config) = &plan.config {
        put(dir, "config.json", &super::config::to_bytes(config))?;
    }
    for (name, bytes) in &plan.generated {
        put(dir, name, bytes)?;
    }
    for src in &plan.companions {
        let name = src.file_name().unwrap_or_default();
        let mut bytes = Vec::new();
        std::fs::File::open(src)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .map_err(io(src))?;
        put(dir, &name.to_string_lossy(), &bytes)?;
    }
    Ok(())
}

/// Writes `dir/name` through `dir/.dq-part-name.tmp`.
fn put(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), FolderError> {
    let temp = dir.join(format!("{PART_PREFIX}{name}.tmp"));
    let done = std::fs::write(&temp, bytes)
        .and_then(|()| std::fs::rename(&temp, dir.join(name)))
        .map_err(io(&temp));
    if done.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    done
}

/// `--finish`: every shard present with this input's size and header; then the rest.
fn finish(a: &ConvertArgs, plan: &Plan<'_>, layouts: &[Layout]) -> Result<(), ConvertError> {
    let out = a.output.as_path();
    let n = plan.shards.len();
    for (s, layout) in layouts.iter().enumerate() {
        let path = out.join(shards::file_name(s, n));
        let bad = |what| FolderError::BadShard {
            path: path.clone(),
            what,
        };
        let len = std::fs::metadata(&path).map_err(|_| bad("missing"))?.len();
        if len != layout.file_len() {
            return Err(bad("not the size this input makes").into());
        }
        let mut head = vec![0u8; 8 + layout.header.len()];
        std::fs::File::open(&path)
            .and_then(|mut f| f.read_exact(&mut head))
            .map_err(io(&path))?;
        if head[8..] != layout.header[..] || head[..8] != (layout.header.len() as u64).to_le_bytes()
        {
            return Err(bad("not the header this input makes").into());
        }
    }
    write_rest(out, plan, layouts)?;
    Ok(())
}

/// Renames the finished temporary folder onto `out`; an existing `out` (`--force`)
/// is swapped with it atomically where the OS can, then deleted.
fn publish(temp: tempfile::TempDir, out: &Path) -> Result<(), ConvertError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::Permissions::from_mode(0o755);
        std::fs::set_permissions(temp.path(), mode).map_err(io(out))?;
    }
    if !out.exists() {
        let path = temp.keep();
        return std::fs::rename(&path, out).map_err(|e| {
            let _ = std::fs::remove_dir_all(&path);
            io(out)(e).into()
        });
    }
    exchange(temp.path(), out).map_err(io(out))?;
    // `temp` now holds the old folder; dropping it deletes it.
    drop(temp);
    Ok(())
}

/// Swaps two paths (`renameat2(RENAME_EXCHANGE)`); elsewhere, or where the file
/// system refuses, the old one is renamed aside first.
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::ffi::CString;
        use std::os::unix::ffi::OsStrExt;
        let ca = CString::new(a.as_os_str().as_bytes())?;
        let cb = CString::new(b.as_os_str().as_bytes())?;
        // SAFETY: both paths are NUL-terminated C strings that outlive the call; the
        // syscall only reads them.
        let r = unsafe {
            libc::syscall(
                libc::SYS_renameat2,
                libc::AT_FDCWD,
                ca.as_ptr(),
                libc::AT_FDCWD,
                cb.as_ptr(),
                libc::RENAME_EXCHANGE,
            )
        };
        if r == 0 {
            return Ok(());
        }
    }
    let aside = a.with_extension("old.tmp");
    std::fs::rename(b, &aside)?;
    std::fs::rename(a, b)?;
    std::fs::rename(&aside, a)
}

/// Deletes the temporary folders (`.dq-convert-<pid>-*.tmp`) of runs that were
/// killed (their process no longer runs).
fn sweep(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let pid = name
            .to_str()
            .and_then(|n| n.strip_prefix(TEMP_PREFIX)?.strip_suffix(".tmp"))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<libc::pid_t>().ok());
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if let Some(pid) = pid
            && is_dir
            && pid > 0
            && !cleanup::alive(pid)
        {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A byte progress bar over the whole output, with ETA, on a terminal (stderr).
fn progress_bar(total: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    let style = ProgressStyle::with_template(
        "{bar:40} {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta} {msg}",
    )
    .expect("static template");
    bar.set_style(style);
    bar
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> FolderError + '_ {
    move |source| FolderError::Io {
        path: PathBuf::from(path),
        source,
    }
}
