//! `dq model FILE|DIR`: the main job on a real checkpoint. Every tensor that needs
//! dequantizing (GGUF tensors of supported types, quantized linears) is decoded to
//! f32 by each backend that can run it, timed, and with `--verify` compared bit for
//! bit with the reference.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use dq::{Backend, Options};
use serde::Serialize;

use super::limits::{self, LimitError};
use super::model::ModelArgs;
use super::source::{Item, Kind, Source, SourceError};
use super::text::{escape, escape_json};

/// Why `dq model FILE` failed: one line.
#[derive(Debug, thiserror::Error)]
pub enum ModelFileError {
    /// The input cannot be opened or is invalid.
    #[error(transparent)]
    Open(#[from] SourceError),
    /// `--threads 0`.
    #[error("--threads must be at least 1")]
    ZeroThreads,
    /// A tensor's outputs would not fit in memory.
    #[error("{path}: {source}", path = path.display())]
    Limit {
        /// The input.
        path: std::path::PathBuf,
        /// The limit.
        source: LimitError,
    },
}

/// One backend's row.
#[derive(Debug, Serialize)]
pub struct BackendRow {
    /// The backend.
    pub backend: String,
    /// Tensors it dequantized.
    pub ran: usize,
    /// Tensors it cannot run (yet).
    pub cannot_run: usize,
    /// Why, for the first one it cannot run.
    pub reason: Option<String>,
    /// Bytes read and written by the tensors it ran.
    pub bytes: u64,
    /// Seconds spent dequantizing.
    pub dequant_s: f64,
    /// `bytes / dequant_s / 1e9`.
    pub gbps: f64,
}

/// A tensor dq does not decode.
#[derive(Debug, Serialize)]
pub struct Unsupported {
    /// The tensor.
    pub name: String,
    /// Its type.
    #[serde(rename = "type")]
    pub ty: String,
}

/// The report (`--json` prints it as is).
#[derive(Debug, Serialize)]
pub struct FileReport {
    /// The input.
    pub file: String,
    /// `gguf`, `gptq`, `awq` or `compressed-tensors`.
    pub format: String,
    /// Tensors to dequantize.
    pub tensors: usize,
    /// Their elements.
    pub elements: u64,
    /// Their bytes in the input.
    pub src_bytes: u64,
    /// Their f32 bytes.
    pub dst_bytes: u64,
    /// Tensors of types dq does not decode (left out).
    pub unsupported: Vec<Unsupported>,
    /// Worker threads per tensor.
    pub threads: usize,
    /// One row per backend.
    pub backends: Vec<BackendRow>,
    /// With `--verify`: whether every backend matched the reference on every tensor
    /// it ran.
    pub verified: Option<bool>,
    /// `backend: tensor` for each difference.
    pub mismatches: Vec<String>,
}

/// Runs `dq model FILE`: exit 0, or 1 when `--verify` found a difference.
///
/// # Errors
/// An input that cannot be opened or is invalid; `--threads 0`.
pub fn run(a: &ModelArgs, path: &Path) -> Result<ExitCode, ModelFileError> {
    let threads = match a.threads {
        Some(0) => return Err(ModelFileError::ZeroThreads),
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let backends = if a.backend.is_empty() {
        // Every backend built in (a build without the `jit` feature has no JIT).
        let built = dq::backends();
        let all = Backend::ALL.into_iter();
        all.filter(|&b| matches!(b, Backend::Reference | Backend::Auto) || built.get(b).is_some())
            .collect()
    } else {
        a.backend.clone()
    };
    let source = Source::open(path)?;
    let items = source.items();
    check_memory(path, &items, a)?;
    let rep = measure(path, &source, &items, &backends, threads, a.verify);
    if a.json {
        let json = serde_json::to_string_pretty(&rep).expect("report serializes");
        println!("{}", escape_json(&json));
    } else {
        print_table(&rep);
    }
    Ok(if rep.verified == Some(false) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The largest tensor's f32 outputs (two with `--verify`) fit the memory limit.
fn check_memory(path: &Path, items: &[Item<'_>], a: &ModelArgs) -> Result<(), ModelFileError> {
    let copies = if a.verify { 8 } else { 4 };
    let need =
        |i: &Item<'_>| (i.shape.iter()).try_fold(copies, |n: u64, &d| n.checked_mul(d as u64));
    let largest = items
        .iter()
        .filter(|i| i.is_dequant())
        .max_by_key(|i| need(i).unwrap_or(u64::MAX));
    let Some(item) = largest else {
        return Ok(());
    };
    let limit = |source| ModelFileError::Limit {
        path: path.to_owned(),
        source,
    };
    let need = need(item).ok_or_else(|| {
        limit(LimitError::Overflow {
            tensor: item.name.clone(),
        })
    })?;
    limits::check_memory(&item.name, need, a.max_memory).map_err(limit)
}

fn measure(
    path: &Path,
    source: &Source,
    items: &[Item<'_>],
    backends: &[Backend],
    threads: usize,
    verify: bool,
) -> FileReport {
    let work: Vec<&Item<'_>> = items.iter().filter(|i| i.is_dequant()).collect();
    let mut rows: Vec<BackendRow> = backends.iter().map(|b| row(*b)).collect();
    let mut mismatches = Vec::new();
    let bar = progress_bar(work.len());
    let (mut out, mut want) = (Vec::new(), Vec::new());
    for item in &work {
        bar.set_message(escape(&item.name).into_owned());
        let n = item.elements();
        let bytes = (item.src_bytes + 4 * n) as u64;
        if verify {
            want.resize(n, 0f32);
            // The reference runs every supported tensor.
            let _ = item.fill(&mut want, &opts(Backend::Reference, threads));
        }
        for (r, &b) in rows.iter_mut().zip(backends) {
            if let Err(e) = item.check(b) {
                r.cannot_run += 1;
                r.reason.get_or_insert_with(|| e.to_string());
                continue;
            }
            out.clear();
            out.resize(n, 0f32);
            let t = Instant::now();
            let ok = item.fill(&mut out, &opts(b, threads)).is_ok();
            r.dequant_s += t.elapsed().as_secs_f64();
            r.ran += usize::from(ok);
            r.bytes += bytes;
            if verify && !(ok && same_bits(&out, &want)) {
                mismatches.push(format!("{b}: {}", item.name));
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    for r in &mut rows {
        r.gbps = if r.dequant_s > 0.0 {
            r.bytes as f64 / r.dequant_s / 1e9
        } else {
            0.0
        };
    }
    let unsupported = items
        .iter()
        .filter_map(|i| match &i.kind {
            Kind::Unsupported(ty) => Some(Unsupported {
                name: i.name.clone(),
                ty: ty.clone(),
            }),
            _ => None,
        })
        .collect();
    FileReport {
        file: path.display().to_string(),
        format: source.format(),
        tensors: work.len(),
        elements: work.iter().map(|i| i.elements() as u64).sum(),
        src_bytes: work.iter().map(|i| i.src_bytes as u64).sum(),
        dst_bytes: work.iter().map(|i| 4 * i.elements() as u64).sum(),
        unsupported,
        threads,
        backends: rows,
        verified: verify.then_some(mismatches.is_empty()),
        mismatches,
    }
}

fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.iter()
        .map(|y| y.to_bits())
        .eq(b.iter().map(|y| y.to_bits()))
}

fn opts(backend: Backend, threads: usize) -> Options {
    Options::new().with_backend(backend).with_threads(threads)
}

fn row(b: Backend) -> BackendRow {
    BackendRow {
        backend: b.to_string(),
        ran: 0,
        cannot_run: 0,
        reason: None,
        bytes: 0,
        dequant_s: 0.0,
        gbps: 0.0,
    }
}

/// A tensor progress bar on a terminal (stderr); hidden otherwise.
fn progress_bar(total: usize) -> indicatif::ProgressBar {
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total as u64);
    let style = indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} tensors {msg}")
        .expect("static template");
    bar.set_style(style);
    bar
}

fn print_table(r: &FileReport) {
    println!("dq model: {} ({})", escape(&r.file), r.format);
    println!(
        "{} tensors to dequantize, {} elements, read {} bytes, write {} bytes (f32) per backend, {} thread(s)",
        r.tensors, r.elements, r.src_bytes, r.dst_bytes, r.threads
    );
    if !r.unsupported.is_empty() {
        let names: Vec<String> = r
            .unsupported
            .iter()
            .map(|u| format!("{} ({})", escape(&u.name), u.ty))
            .collect();
        println!("unsupported, left out: {}", names.join(", "));
    }
    println!();
    println!(
        "{:<10} {:>8} {:>10} {:>10} {:>8}",
        "backend", "ran", "cannot run", "dequant s", "GB/s"
    );
    for b in &r.backends {
        let (s, gbps) = if b.ran > 0 {
            (format!("{:.4}", b.dequant_s), format!("{:.2}", b.gbps))
        } else {
            ("-".into(), "-".into())
        };
        println!(
            "{:<10} {:>8} {:>10} {:>10} {:>8}",
            b.backend,
            format!("{}/{}", b.ran, r.tensors),
            b.cannot_run,
            s,
            gbps
        );
    }
    for b in r.backends.iter().filter(|b| b.cannot_run > 0) {
        if let Some(reason) = &b.reason {
            println!("  {}: {}", b.backend, escape(reason));
        }
    }
    match r.verified {
        Some(true) => {
            println!("\nverified: every tensor every backend ran matched the reference bit for bit")
        }
        Some(false) => println!("\nVERIFY FAILED on: {}", escape(&r.mismatches.join(", "))),
        None => {}
    }
}
