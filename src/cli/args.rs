//! The command line, declared with clap's derive API.
//!
//! The case flags are shared by `dq run` and `dq bench`; `run` marks the ones it
//! needs as required at start-up (see [`command`]), `bench` fills in defaults.

use std::path::PathBuf;

use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};
use dq::rules::{self, Rule, Zps};
use dq::{Backend, DType, OpKind, Qtype};

/// Bit-exact, fast dequantization (oneDNN Graph Dequantize semantics).
#[derive(Debug, Parser)]
#[command(name = "dq", version, about, arg_required_else_help = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Dequantize one tensor read from files and write the result to a file.
    Run(RunArgs),
    /// Time every available backend on generated data beside a memcpy yardstick.
    Bench(BenchArgs),
    /// Run built-in default cases, time them and check them against the reference.
    Demo(DemoArgs),
    /// The main job: dequantize every weight of a model preset (or of a GGUF file or
    /// HuggingFace checkpoint) with each backend.
    Model(super::model::ModelArgs),
    /// List a GGUF file's tensors and metadata, or a HuggingFace checkpoint's
    /// quantized linears and other tensors.
    Inspect(super::inspect::InspectArgs),
    /// Dequantize every tensor of a GGUF file or HuggingFace checkpoint into a
    /// .safetensors file.
    Convert(super::convert::ConvertArgs),
}

/// The three operations, as spelled on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OpName {
    /// Static oneDNN `Dequantize`: scales and zero points are lists (attributes).
    Dequantize,
    /// oneDNN `DynamicDequantize`: scales and zero points are files.
    Dynamic,
    /// nGraph `Dequantize` with `--axes`: scales and zero points are files.
    Axes,
}

impl OpName {
    /// The CLI spelling.
    pub fn name(self) -> &'static str {
        match self {
            OpName::Dequantize => "dequantize",
            OpName::Dynamic => "dynamic",
            OpName::Axes => "axes",
        }
    }

    /// The operation it names.
    pub fn kind(self) -> OpKind {
        match self {
            OpName::Dequantize => OpKind::Dequantize,
            OpName::Dynamic => OpKind::Dynamic,
            OpName::Axes => OpKind::Axes,
        }
    }

    /// The dtype rules of the operation.
    pub fn rule(self) -> &'static Rule {
        rules::rule(self.kind())
    }
}

/// The flags that describe one dequantization case.
#[derive(Clone, Debug, Args)]
pub struct CaseArgs {
    /// Operation: dequantize (static), dynamic or axes.
    #[arg(long, value_enum)]
    pub op: Option<OpName>,
    /// Src dtype (the ones each op allows: see `dtype_help`).
    #[arg(long, value_parser = parse_dtype)]
    pub src_type: Option<DType>,
    /// Dst dtype (the ones each op allows: see `dtype_help`).
    #[arg(long, value_parser = parse_dtype)]
    pub dst_type: Option<DType>,
    /// Shape, e.g. 4096x4096; `scalar` for rank 0; zero-sized dims are legal.
    #[arg(long, value_parser = parse_shape)]
    pub shape: Option<Shape>,
    /// Granularity: per_tensor (default), per_channel or per_group.
    #[arg(long, value_parser = parse_qtype)]
    pub qtype: Option<Qtype>,
    /// Channel axis for per_channel (may be negative; default 1).
    #[arg(long, allow_negative_numbers = true)]
    pub axis: Option<i64>,
    /// Group shape for per_group, e.g. 1x128 (one entry per dim); `scalar` for rank 0.
    #[arg(long, value_parser = parse_ilist_x)]
    pub group_shape: Option<IntList>,
    /// Axes set for --op axes, e.g. 0,2 (`none` or empty: per tensor).
    #[arg(long, value_parser = parse_axes)]
    pub axes: Option<IntList>,
    /// Zero-point dtype of a .bin zps file (the ones each op allows: see `dtype_help`).
    #[arg(long, value_parser = parse_dtype)]
    pub zps_type: Option<DType>,
    /// Scales dtype: the dst dtype (default), or e8m0 (--op dynamic: a .bin of raw
    /// bytes, one per scale).
    #[arg(long, value_parser = parse_dtype)]
    pub scales_type: Option<DType>,
    /// Src strides in elements (nibbles for 4-bit), e.g. 1x4096.
    #[arg(long, value_parser = parse_shape)]
    pub src_strides: Option<Shape>,
    /// Dst strides in elements, e.g. 1x4096 (the output file then holds the whole span).
    #[arg(long, value_parser = parse_shape)]
    pub dst_strides: Option<Shape>,
    /// Worker threads.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
}

/// `dq run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The case.
    #[command(flatten)]
    pub case: CaseArgs,
    /// Input file (.bin raw little-endian, 4-bit packed; or .npy).
    #[arg(long)]
    pub input: Option<PathBuf>,
    /// Scales: a comma list for --op dequantize (`""`: empty), else a .bin (dst dtype,
    /// or --scales-type) or .npy file.
    #[arg(long, allow_hyphen_values = true)]
    pub scales: Option<String>,
    /// Zero points: a comma list for --op dequantize (`""`: empty), else a .bin
    /// (--zps-type) or .npy file.
    #[arg(long, allow_hyphen_values = true)]
    pub zps: Option<String>,
    /// Backend: reference, generated, jit or auto.
    #[arg(long, default_value = "auto", value_parser = parse_backend)]
    pub backend: Backend,
    /// Output file (.bin or .npy); written only when everything succeeded.
    #[arg(long)]
    pub output: Option<PathBuf>,
}

/// `dq bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The case (default: dynamic u4 -> bf16 per_group 1x128 on 4096x4096, u4 zps).
    #[command(flatten)]
    pub case: CaseArgs,
    /// Backends to time, comma separated (default: every available one).
    #[arg(long, value_delimiter = ',', value_parser = parse_backend)]
    pub backend: Vec<Backend>,
    /// Minimum timed rounds (every backend once per round).
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
    /// Keep repeating rounds until this many seconds were spent per backend.
    #[arg(long, default_value_t = 0.2)]
    pub min_time: f64,
    /// Seed of the generated data.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Time on 4 KiB pages: no huge-page advice for the src, dst and memcpy
    /// buffers (by default they are advised as NumPy advises its large arrays).
    #[arg(long)]
    pub base_pages: bool,
    /// Put each dst this many bytes (0-63) past a 64-byte line, to time a given
    /// alignment (by default dst is where the allocator puts it: for large
    /// buffers on Linux, 16 bytes past a line).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..64))]
    pub dst_offset: Option<u8>,
    /// Leave out the yardsticks (memcpy and the write roofline): time the
    /// backends alone, as a peer's driver times itself (a copy timed between them
    /// leaves the caches and the memory busy with its lines; the peers script has
    /// its own yardstick).
    #[arg(long)]
    pub no_memcpy: bool,
}

/// `dq demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Backend to demonstrate: reference, generated, jit or auto.
    #[arg(long, default_value = "auto", value_parser = parse_backend)]
    pub backend: Backend,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Rows and columns of the demo matrices.
    #[arg(long, default_value_t = 4096)]
    pub size: usize,
}

/// A parsed `AxB` list of sizes (empty for `scalar`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape(pub Vec<usize>);

/// A parsed list of signed integers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IntList(pub Vec<i64>);

/// The clap command, with `dq run`'s case flags marked required and the dtype
/// flags' help taken from the rule table.
pub fn command() -> clap::Command {
    Cli::command()
        .mut_subcommand("run", |c| {
            [
                "op", "src_type", "dst_type", "shape", "input", "scales", "output",
            ]
            .into_iter()
            .fold(c, |c, id| c.mut_arg(id, |a| a.required(true)))
        })
        .mut_subcommand("run", dtype_help)
        .mut_subcommand("bench", dtype_help)
}

/// Sets the help of `--src-type`, `--dst-type` and `--zps-type`: per op, the
/// dtypes [`dq::rules`] allows.
fn dtype_help(c: clap::Command) -> clap::Command {
    let ops = [OpName::Dequantize, OpName::Dynamic, OpName::Axes];
    let per_op = |what: &str, f: fn(&Rule) -> Option<String>| {
        let parts: Vec<String> = ops
            .iter()
            .filter_map(|&o| f(o.rule()).map(|t| format!("{t} ({})", o.name())))
            .collect();
        format!("{what}: {}", parts.join("; "))
    };
    let src = per_op("Src dtype", |r| Some(r.src.text().into()));
    let dst = per_op("Dst dtype", |r| Some(r.dst.text().into()));
    let zps = per_op("Zero-point dtype of a .bin zps file", |r| match r.zps {
        Zps::OneOf(set) => Some(set.text().into()),
        Zps::SrcDType => Some("the src dtype".into()),
        Zps::Held(_) => None,
    });
    c.mut_arg("src_type", |a| a.help(src))
        .mut_arg("dst_type", |a| a.help(dst))
        .mut_arg("zps_type", |a| a.help(zps))
}

fn parse_dtype(s: &str) -> Result<DType, String> {
    s.parse().map_err(|e: dq::Error| e.to_string())
}

fn parse_qtype(s: &str) -> Result<Qtype, String> {
    s.parse().map_err(|e: dq::Error| e.to_string())
}

fn parse_backend(s: &str) -> Result<Backend, String> {
    s.parse()
}

/// `4096x4096`, `7`, `0x5` or `scalar`.
pub fn parse_shape(s: &str) -> Result<Shape, String> {
    if s == "scalar" {
        return Ok(Shape(Vec::new()));
    }
    s.split('x')
        .map(|d| {
            d.trim()
                .parse::<usize>()
                .map_err(|_| format!("`{d}` is not a size (expected e.g. 4096x4096 or scalar)"))
        })
        .collect::<Result<_, _>>()
        .map(Shape)
}

/// `1x128` (signed, so that `0` or `-1` reach validation and are reported there), or
/// `scalar` for the empty group shape of a rank-0 src.
fn parse_ilist_x(s: &str) -> Result<IntList, String> {
    if s == "scalar" {
        return Ok(IntList(Vec::new()));
    }
    parse_ints(s, 'x').map(IntList)
}

/// `0,2`, or `none` / empty for the empty set.
fn parse_axes(s: &str) -> Result<IntList, String> {
    if s.is_empty() || s == "none" {
        return Ok(IntList(Vec::new()));
    }
    parse_ints(s, ',').map(IntList)
}

/// Integers separated by `sep`.
pub fn parse_ints(s: &str, sep: char) -> Result<Vec<i64>, String> {
    s.split(sep)
        .map(|v| {
            v.trim()
                .parse::<i64>()
                .map_err(|_| format!("`{v}` is not an integer"))
        })
        .collect()
}
