//! anamnesis 0.7.10 (crates.io) against dq on the same bytes, in one process:
//! GGUF block types (one tensor each), GPTQ and AWQ 4-bit linears, FP8
//! block-scaled, ModelOpt NVFP4 and bitsandbytes (NF4 double-quant, LLM.int8)
//! linears, and whole GGUF
//! files (`amn remember` against `dq convert`), bf16 and f32 output, at one thread
//! and at each tool's default, beside a memcpy yardstick; every row checks that both
//! tools wrote the same bits (a row marked MISMATCH where not).
//!
//! `bash benches/peers/run.sh --anamnesis [--json] [--min-time S]` builds and runs it
//! (see `USAGE` below for every option). Both tools build as a crates.io user gets
//! them (no `-C target-cpu`); `RUSTFLAGS` reaches both builds alike.

mod args;
#[path = "../../../checkpoints/families.rs"]
mod checkpoint_families;
mod families;
mod files;
mod gguf;
mod linears;
mod out;
mod report;
mod timing;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use args::Args;
use report::{Bits, Row};
use timing::Memcpy;

const USAGE: &str = "\
usage: dq-peer-anamnesis [options]
  --min-time S        minimum seconds per row (default 0.3)
  --json              JSON instead of a markdown table
  --elements N        elements per GGUF tensor (default 16777216 = 4096x4096)
  --types A,B         only these GGUF types (default: every type both tools read)
  --k K --n N --group G   the linears' shape (default 4096, 11008, 128; the float and
                      coded families take K x N, N x K for their [N, K])
  --threads T         dq's default threads (default: available cores)
  --skip gguf,linear,file   leave out these sections
  --base-pages        no transparent huge pages for the buffers
  --amn PATH --dq PATH    the amn and dq binaries (the whole-file rows need both)
  --model FILE        the GGUF for the whole-file rows (default: one written, see --model-gb)
  --model-gb G        size of the written model (default 1)
  --model-elements N  elements per tensor of the written model (default: --elements)
  --file-threads A,B  threads for the whole-file rows (default 1,2)
  --runs R            runs of each tool per whole-file row (default 3)
  --scratch DIR       where the whole-file outputs go (default /dev/shm)
  --write-model FILE [--model-gb G]   only write the model file";

/// Exit status 1: the tables printed, with rows marked MISMATCH; 2: bad options or
/// a setup failure (nothing timed).
fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("dq-peer-anamnesis: {e}");
            ExitCode::from(2)
        }
    }
}

/// Limits shared by the in-process sections.
struct Common {
    min_time: Duration,
    huge: bool,
    threads: usize,
}

/// Runs the rows and prints them: whether every checked row had equal bits.
fn run() -> Result<bool, String> {
    let args = Args::new(std::env::args().skip(1).collect())?;
    if args.has("--help") || args.has("-h") {
        println!("{USAGE}");
        return Ok(true);
    }
    let n = elements(&args, "--elements", 4096 * 4096)?;
    let model_n = elements(&args, "--model-elements", n)?;
    let gb: f64 = args.parse("--model-gb", 1.0)?;
    if let Some(path) = args.value("--write-model") {
        files::write_model(path.as_ref(), gb, model_n).map_err(|e| format!("{path}: {e}"))?;
        println!("wrote {path}");
        return Ok(true);
    }
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let common = Common {
        min_time: Duration::from_secs_f64(args.parse("--min-time", 0.3)?),
        huge: !args.has("--base-pages"),
        threads: args.parse("--threads", cores)?,
    };
    if common.threads == 0 {
        return Err("--threads must be at least 1".into());
    }
    let skip = args.list("--skip").unwrap_or_default();
    if let Some(s) = skip
        .iter()
        .find(|s| !["gguf", "linear", "file"].contains(&s.as_str()))
    {
        return Err(format!("--skip: {s} is none of gguf, linear, file"));
    }
    let want = |s: &str| !skip.iter().any(|x| x == s);
    let shape = linear_shape(&args)?;
    let mut header = header(&common);
    let mut rows: Vec<Row> = Vec::new();
    let gguf_out = if want("gguf") { n * 4 } else { 0 };
    let linear_out = if want("linear") {
        shape.0 * shape.1 * 4
    } else {
        0
    };
    let mut memcpy = Memcpy::new(gguf_out.max(linear_out), common.huge);
    if want("gguf") {
        rows.extend(gguf_rows(&args, n, &common, &mut memcpy, &mut header));
    }
    if want("linear") {
        rows.extend(linear_rows(shape, &common, &mut memcpy, &mut header)?);
    }
    drop(memcpy);
    if want("file") {
        file_rows(&args, gb, model_n, &mut header, &mut rows)?;
    }
    Ok(print(&args, header, &rows))
}

/// `name`'s element count: tensors of 4096 columns (fewer below that), made of
/// K-quant super-blocks of 256.
fn elements(args: &Args, name: &str, default: usize) -> Result<usize, String> {
    let n: usize = args.parse(name, default)?;
    if n > 0 && n.is_multiple_of(256) && n.is_multiple_of(4096.min(n)) {
        Ok(n)
    } else {
        Err(format!(
            "{name}: a positive multiple of 256 (and of 4096 above it)"
        ))
    }
}

/// The linears' (K, N, group).
fn linear_shape(args: &Args) -> Result<(usize, usize, usize), String> {
    let (k, n, g): (usize, usize, usize) = (
        args.parse("--k", 4096)?,
        args.parse("--n", 11008)?,
        args.parse("--group", 128)?,
    );
    let ok = |x: usize, m: usize| x > 0 && m > 0 && x.is_multiple_of(m);
    if ok(k, 8) && ok(k, g) && ok(n, 8) {
        Ok((k, n, g))
    } else {
        Err("--k, --n, --group: K a multiple of 8 and of G, N a multiple of 8".into())
    }
}

fn gguf_rows(
    args: &Args,
    n: usize,
    c: &Common,
    memcpy: &mut Memcpy,
    header: &mut Vec<String>,
) -> Vec<Row> {
    let (_, dq_only) = gguf::common_types();
    header.push(format!(
        "GGUF: {n} elements per tensor; types dq reads that anamnesis does not dequantize: {}",
        dq_only.join(", ")
    ));
    let setup = gguf::Setup {
        n,
        min_time: c.min_time,
        huge: c.huge,
        threads: c.threads,
        only: args.list("--types"),
    };
    gguf::rows(&setup, memcpy)
}

fn linear_rows(
    (k, n, group): (usize, usize, usize),
    c: &Common,
    memcpy: &mut Memcpy,
    header: &mut Vec<String>,
) -> Result<Vec<Row>, String> {
    header.push(
        "linears: anamnesis' dequantize_gptq/dequantize_awq return a new Vec per call (its times \
         include allocating it) and write [K, N]; dq writes [N, K] into a reused buffer"
            .into(),
    );
    let setup = linears::Setup {
        k,
        n,
        group,
        min_time: c.min_time,
        huge: c.huge,
        threads: c.threads,
    };
    let dir = std::env::temp_dir().join(format!("dq-peer-anamnesis-{}", std::process::id()));
    let mut result = linears::rows(&setup, &dir, memcpy);
    if k.is_multiple_of(128) && (n * k).is_multiple_of(16384) {
        header.push(format!(
            "float and coded linears: {n}x{k} (N x K); anamnesis' dequantize_fp8, \
             dequantize_nvfp4 (ModelOpt), dequantize_bnb4_double_quant, dequantize_bnb_int8 \
             return a new Vec per call; both write [N, K]. Not compared: compressed-tensors \
             NVFP4 (anamnesis multiplies by the global scale compressed-tensors divides by), \
             MLX and MXFP4 (anamnesis reads neither), bitsandbytes FP4 (anamnesis writes \
             -0.0 for code 8 on purpose, bitsandbytes +0.0)"
        ));
        if let Ok(rows) = &mut result {
            match families::rows(&setup, &dir, memcpy) {
                Ok(more) => rows.extend(more),
                Err(e) => result = Err(e),
            }
        }
    } else {
        header.push(
            "float and coded linears: left out (K a multiple of 128 and N·K of 16384)".into(),
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// Prints the table or JSON, a MISMATCH line first where rows differ: whether none did.
fn print(args: &Args, mut header: Vec<String>, rows: &[Row]) -> bool {
    let mismatches = rows
        .iter()
        .filter(|r| matches!(r.bits, Bits::Mismatch(_)))
        .count();
    if mismatches > 0 {
        header.insert(
            0,
            format!("**MISMATCH in {mismatches} rows**: the tools' bits differ there"),
        );
        eprintln!("dq-peer-anamnesis: MISMATCH in {mismatches} rows (see the bits column)");
    }
    if args.has("--json") {
        report::json(&header, rows);
    } else {
        report::table(&header, rows);
    }
    mismatches == 0
}

fn file_rows(
    args: &Args,
    gb: f64,
    n: usize,
    header: &mut Vec<String>,
    rows: &mut Vec<Row>,
) -> Result<(), String> {
    let (Some(amn), Some(dq)) = (args.value("--amn"), args.value("--dq")) else {
        header.push("whole files: left out (give --amn and --dq)".into());
        return Ok(());
    };
    let threads = args
        .list("--file-threads")
        .unwrap_or(vec!["1".into(), "2".into()]);
    let threads = threads
        .iter()
        .map(|t| t.parse().ok().filter(|&t: &usize| t > 0))
        .collect::<Option<Vec<usize>>>()
        .ok_or("--file-threads: positive integers, comma-separated")?;
    let runs: usize = args.parse("--runs", 3)?;
    if runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    let setup = files::Setup {
        amn: amn.into(),
        dq: dq.into(),
        model: args.value("--model").map(PathBuf::from),
        gb,
        n,
        threads,
        runs,
        scratch: args.value("--scratch").unwrap_or("/dev/shm").into(),
    };
    header.push(format!(
        "whole files: `amn remember --to DTYPE --threads T` vs `dq convert --dtype DTYPE --threads T` \
         (backend auto), median of {runs} alternated runs, outputs in {}; GB/s = (file + output \
         bytes) / median; bits: the tensors stored as blocks (amn keeps a float tensor's dtype)",
        setup.scratch.display()
    ));
    rows.extend(files::rows(&setup)?);
    Ok(())
}

fn header(c: &Common) -> Vec<String> {
    let (min_time, threads) = (c.min_time, c.threads);
    vec![
        format!("anamnesis 0.7.10 vs dq; CPU: {}", cpu_model()),
        format!(
            "GB/s = (source + output bytes) / median of interleaved rounds (at least {:.2} s per \
             row); memcpy: one thread copying the output's size in the same rounds, (read + \
             written) / time",
            min_time.as_secs_f64()
        ),
        format!(
            "threads: anamnesis' tensor and linear calls run on one thread (its threads split a \
             model by tensor, never one tensor), so its default is 1 there; dq's default: {threads}"
        ),
    ]
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned())
}
