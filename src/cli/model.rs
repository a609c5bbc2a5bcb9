//! `dq model`: the main job. Dequantizes every weight tensor of a built-in model
//! preset with each backend, as a model loader does, and reports the cost; with a
//! FILE or DIR, the same on a real checkpoint ([`super::model_file`]).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use dq::Backend;
use dq::model::{self, ModelConfig, ModelReport, PRESETS, Scheme};

use super::error::CliError;

/// `dq model`.
#[derive(Debug, Args)]
pub struct ModelArgs {
    /// A GGUF file, a HuggingFace checkpoint folder or a .safetensors file (default: a
    /// synthetic model preset).
    pub file: Option<PathBuf>,
    /// Model preset: llama2-7b, llama-1b or tiny.
    #[arg(long, default_value = "llama2-7b", conflicts_with = "file")]
    pub preset: String,
    /// Quantization: u4-bf16, u4-f16 (u4 zero points), s4-bf16, s4-f16 (symmetric), s8-f32 (per channel).
    #[arg(long, default_value = "u4-bf16", conflicts_with = "file")]
    pub scheme: String,
    /// Group size along the input dimension (int4 schemes): 32, 64, 128, ...
    #[arg(long, default_value_t = 128, conflicts_with = "file")]
    pub group: usize,
    /// Backends, comma separated (default: jit and generated, where built in; every
    /// backend built in for a FILE).
    #[arg(long, value_delimiter = ',', value_parser = |s: &str| s.parse::<Backend>())]
    pub backend: Vec<Backend>,
    /// Worker threads per tensor (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Decoder layers to load (default: the preset's count; more repeats the layer).
    #[arg(long, conflicts_with = "file")]
    pub layers: Option<usize>,
    /// Also run the reference and check every backend bit for bit.
    #[arg(long)]
    pub verify: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Seed of the synthetic weights.
    #[arg(long, default_value_t = 1, conflicts_with = "file")]
    pub seed: u64,
    /// With a FILE: most memory one tensor's outputs may take, e.g. 8G (default: the
    /// available memory, /proc/meminfo's MemAvailable).
    #[arg(long, value_name = "SIZE", value_parser = super::limits::parse_size, requires = "file")]
    pub max_memory: Option<u64>,
}

/// Runs `dq model`: exit 0, or 1 when `--verify` found a difference.
///
/// # Errors
/// Unknown preset or scheme, unavailable backend, invalid group.
pub fn model(a: &ModelArgs) -> Result<ExitCode, CliError> {
    let cfg = config(a)?;
    let bar = progress_bar(a.json);
    let rep = model::run(&cfg, |done, total, name| {
        if let Some(b) = &bar {
            b.set_length(total as u64);
            b.set_position(done as u64);
            b.set_message(name.to_string());
        }
    })?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&rep).expect("report serializes")
        );
    } else {
        print_table(&cfg, &rep);
    }
    Ok(if rep.verified == Some(false) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn config(a: &ModelArgs) -> Result<ModelConfig, CliError> {
    let names = || {
        PRESETS
            .iter()
            .map(|p| p.name)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let preset = model::preset(&a.preset).ok_or_else(|| CliError::BadList {
        flag: "preset",
        reason: format!(
            "unknown preset `{}` (expected one of {})",
            a.preset,
            names()
        ),
    })?;
    let scheme = Scheme::parse(&a.scheme).ok_or_else(|| CliError::BadList {
        flag: "scheme",
        reason: format!(
            "unknown scheme `{}` (expected one of {})",
            a.scheme,
            Scheme::ALL.map(|s| s.name()).join(", ")
        ),
    })?;
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    Ok(ModelConfig {
        preset,
        scheme,
        group: a.group,
        layers: a.layers.unwrap_or(preset.layers),
        backends: if a.backend.is_empty() {
            default_backends()
        } else {
            a.backend.clone()
        },
        threads,
        verify: a.verify,
        seed: a.seed,
    })
}

/// JIT and generated where built in; `auto` otherwise.
fn default_backends() -> Vec<Backend> {
    let b = dq::backends();
    let mut v = Vec::new();
    for backend in [Backend::Jit, Backend::Generated] {
        if b.get(backend).is_some() {
            v.push(backend);
        }
    }
    if v.is_empty() {
        v.push(Backend::Auto);
    }
    v
}

/// A progress bar on a terminal (stderr), none otherwise or with `--json`.
fn progress_bar(json: bool) -> Option<indicatif::ProgressBar> {
    if json || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(0);
    let style = indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} tensors {msg}")
        .expect("static template");
    bar.set_style(style);
    Some(bar)
}

fn print_table(cfg: &ModelConfig, r: &ModelReport) {
    let gb = |b: u64| b as f64 / 1e9;
    println!("dq model: {} ({})", cfg.preset.name, cfg.preset.about);
    let group = if cfg.scheme.grouped() {
        format!(", group {}", r.group)
    } else {
        String::new()
    };
    println!(
        "scheme {}{group}, {} layer(s), {} thread(s)",
        r.scheme, r.layers, r.threads
    );
    println!(
        "{} tensors, {} elements, read {:.3} GB, written {:.3} GB per backend",
        r.tensors,
        r.elements,
        gb(r.src_bytes),
        gb(r.dst_bytes)
    );
    println!();
    println!(
        "{:<10} {:>9} {:>7} {:>11} {:>11} {:>8}",
        "backend", "compiled", "reused", "compile ms", "dequant s", "GB/s"
    );
    for b in &r.backends {
        let jit = b.compiles;
        let cell = |v: u64| if jit { v.to_string() } else { "-".into() };
        let ms = if jit {
            format!("{:.2}", b.compile_ms)
        } else {
            "-".into()
        };
        println!(
            "{:<10} {:>9} {:>7} {:>11} {:>11.3} {:>8.2}",
            b.backend,
            cell(b.kernels_compiled),
            cell(b.kernels_reused),
            ms,
            b.dequant_s,
            b.gbps
        );
    }
    match r.verified {
        Some(true) => println!("\nverified: every backend matched the reference bit for bit"),
        Some(false) => println!("\nVERIFY FAILED on: {}", r.mismatches.join(", ")),
        None => {}
    }
}
