//! `dq convert INPUT OUT_DIR`: a HuggingFace model folder that
//! `from_pretrained(OUT_DIR)` opens: `model.safetensors` or shards of at most
//! `--max-shard-size` with `model.safetensors.index.json` (HuggingFace's splitting
//! rule, [`shards`]), `config.json` without its quantization ([`config`]), the input
//! folder's other files copied; for GGUF, HuggingFace names and the config as
//! transformers' GGUF loader makes them ([`gguf_hf`]).
//!
//! The folder is written into `.dq-convert-<pid>-<random>.tmp/` beside OUT_DIR and
//! renamed onto it at the end ([`write`]): on any error there is no OUT_DIR (an
//! existing one untouched); the temporary folders of killed runs are deleted by the
//! next run. `--part I/N` writes only its shards straight into OUT_DIR (each through
//! a temporary file) and `--finish` checks them and writes the rest: the same bytes
//! as one run.

pub mod config;
pub mod gguf_hf;
pub mod shards;
mod tokenizer;
mod write;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use dq::Options;
use serde_json::Value;

use super::convert::{self, ConvertArgs, ConvertError, OutDtype};
use super::source::{Item, Source};
use super::text::escape;
use gguf_hf::{HfPlan, NamesError, Transform};

/// The flags of folder output.
#[derive(Debug, Args)]
pub struct FolderArgs {
    /// Folder output: largest shard file, e.g. 5GB (default), 500MB, 2GiB.
    #[arg(long, value_name = "SIZE", value_parser = shards::parse_shard_size)]
    pub max_shard_size: Option<u64>,
    /// Folder output: replace an existing OUT_DIR (only once everything is written).
    #[arg(long)]
    pub force: bool,
    /// Folder output: write only part I of N of the shards (round-robin), straight
    /// into OUT_DIR; `--finish` completes the folder.
    #[arg(long, value_name = "I/N", value_parser = shards::parse_part, conflicts_with = "finish")]
    pub part: Option<(usize, usize)>,
    /// Folder output: check the shards the parts wrote, then write the index,
    /// config.json and the other files.
    #[arg(long)]
    pub finish: bool,
    /// Folder output of a GGUF file: HuggingFace tensor names (default) or the GGUF
    /// names as they are.
    #[arg(long, value_enum, default_value = "hf")]
    pub names: Names,
}

/// `--names`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Names {
    /// transformers' names, values and config (llama, qwen2, qwen3, gemma, gemma2, gemma3).
    Hf,
    /// The GGUF names, values as decoded, no config.json.
    Gguf,
}

/// Why a folder output failed: one line; OUT_DIR is then as it was.
#[derive(Debug, thiserror::Error)]
pub enum FolderError {
    /// OUT_DIR exists (without `--force`, `--part` or `--finish`).
    #[error("{path}: is a directory that already exists (--force replaces it)", path = path.display())]
    Exists {
        /// OUT_DIR.
        path: PathBuf,
    },
    /// OUT_DIR is a file.
    #[error("{path}: exists and is not a folder", path = path.display())]
    NotADir {
        /// OUT_DIR.
        path: PathBuf,
    },
    /// OUT_DIR is the input folder.
    #[error("{path}: is the input folder", path = path.display())]
    IsInput {
        /// OUT_DIR.
        path: PathBuf,
    },
    /// A folder flag with a `.safetensors` OUTPUT.
    #[error("{flag} needs a folder OUTPUT (one not ending in .safetensors)")]
    FolderOnly {
        /// The flag.
        flag: &'static str,
    },
    /// A file cannot be read or written.
    #[error("{path}: {source}", path = path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A shard `--finish` expects is missing or not what this input makes.
    #[error("{path}: {what} (run its --part again)", path = path.display())]
    BadShard {
        /// The shard.
        path: PathBuf,
        /// What is wrong.
        what: &'static str,
    },
    /// The input's `config.json` is not JSON.
    #[error("{path}: {source}", path = path.display())]
    Config {
        /// The file.
        path: PathBuf,
        /// The parser's error.
        source: serde_json::Error,
    },
    /// GGUF names that cannot be mapped.
    #[error("{path}: {source}", path = path.display())]
    Names {
        /// The input.
        path: PathBuf,
        /// What is wrong.
        source: NamesError,
    },
}

/// Whether `output` asks for folder output (it does not end in `.safetensors`).
pub fn is_folder(output: &Path) -> bool {
    output.extension().is_none_or(|e| e != "safetensors")
}

/// With a `.safetensors` OUTPUT: the folder flags that would be ignored.
///
/// # Errors
/// `--max-shard-size`, `--force`, `--part`, `--finish` or `--names gguf` given.
pub fn refuse_flags(a: &ConvertArgs) -> Result<(), FolderError> {
    let f = &a.folder;
    let given = [
        (f.max_shard_size.is_some(), "--max-shard-size"),
        (f.force, "--force"),
        (f.part.is_some(), "--part"),
        (f.finish, "--finish"),
        (f.names == Names::Gguf, "--names"),
    ];
    match given.iter().find(|(on, _)| *on) {
        Some((_, flag)) => Err(FolderError::FolderOnly { flag }),
        None => Ok(()),
    }
}

/// One output tensor: its item (renamed) and what is done to its values.
struct Tensor<'a> {
    item: Item<'a>,
    transform: Transform,
}

/// Everything to write, in output order, and the files beside the weights.
pub(super) struct Plan<'a> {
    tensors: Vec<Tensor<'a>>,
    /// Per shard: its range of `tensors`.
    shards: Vec<std::ops::Range<usize>>,
    /// `config.json`, when there is one.
    config: Option<Value>,
    /// Input files copied as they are.
    companions: Vec<PathBuf>,
    /// Files made here (a GGUF vocabulary's tokenizer): name and bytes.
    generated: Vec<(String, Vec<u8>)>,
    dtype: OutDtype,
}

/// Runs `dq convert INPUT OUT_DIR`.
///
/// # Errors
/// As [`convert::convert`], and the folder's own ([`FolderError`]).
pub fn convert(a: &ConvertArgs, opts: &Options) -> Result<(), ConvertError> {
    let start = std::time::Instant::now();
    check_output(a)?;
    let source = Source::open(&a.input)?;
    let selected = convert::select(&a.input, source.items(), opts, a.skip_unsupported)?;
    let dtype = a
        .dtype
        .unwrap_or_else(|| convert::default_dtype(&source, &selected));
    for name in &selected.skipped {
        eprintln!("dq: skipped {} (--skip-unsupported)", escape(name));
    }
    let plan = plan(a, &source, selected.kept, dtype)?;
    let written = write::run(a, &plan, opts)?;
    let what = match a.folder.part {
        Some((i, n)) => format!(" (part {i}/{n})"),
        None if a.folder.finish => " (finished)".to_owned(),
        None => String::new(),
    };
    println!(
        "wrote {}{what}: {} tensors in {} shard(s), {} bytes of tensors written ({}), {:.3} s, backend {}, {} thread(s)",
        escape(&a.output.display().to_string()),
        plan.tensors.len(),
        plan.shards.len(),
        written,
        dtype.safetensors().to_string().to_lowercase(),
        start.elapsed().as_secs_f64(),
        opts.backend(),
        opts.threads(),
    );
    if let Some(line) = crate::cli::choices::auto_line() {
        println!("{line}");
    }
    Ok(())
}

/// OUT_DIR before anything is read: not a file, not the input; existing only with
/// `--force`, `--part` or `--finish`.
fn check_output(a: &ConvertArgs) -> Result<(), FolderError> {
    let out = &a.output;
    let Ok(meta) = std::fs::metadata(out) else {
        return Ok(());
    };
    if !meta.is_dir() {
        return Err(FolderError::NotADir { path: out.clone() });
    }
    let same = |p: &Path| std::fs::canonicalize(p).ok();
    if same(out).is_some() && same(out) == same(&a.input) {
        return Err(FolderError::IsInput { path: out.clone() });
    }
    if !(a.folder.force || a.folder.part.is_some() || a.folder.finish) {
        return Err(FolderError::Exists { path: out.clone() });
    }
    Ok(())
}

/// Names, transforms, order, shards and companion files.
fn plan<'a>(
    a: &ConvertArgs,
    source: &'a Source,
    items: Vec<Item<'a>>,
    dtype: OutDtype,
) -> Result<Plan<'a>, ConvertError> {
    let torch = config::torch_dtype(&dtype.safetensors().to_string().to_lowercase());
    let mut generated = Vec::new();
    let (mut tensors, config, companions) = match source {
        Source::Gguf(g) if a.folder.names == Names::Hf => {
            let names = |source| FolderError::Names {
                path: a.input.clone(),
                source,
            };
            let hf = HfPlan::new(g).map_err(names)?;
            let mut tensors = Vec::with_capacity(items.len());
            for mut item in items {
                let Some(name) = hf.name(&item.name) else {
                    eprintln!(
                        "dq: left out {} (transformers does not load it)",
                        escape(&item.name)
                    );
                    continue;
                };
                let rows = item.shape.first().copied().unwrap_or(1);
                let transform = hf.transform(&item.name, rows).map_err(names)?;
                item.name = name;
                tensors.push(Tensor { item, transform });
            }
            let mut config = hf.config;
            config.insert("torch_dtype".into(), torch.into());
            let model_type = config.get("model_type").and_then(Value::as_str);
            match tokenizer::files(g, model_type.unwrap_or("")) {
                Ok(files) => generated = files,
                Err(missing) => eprintln!("dq: no tokenizer written: {}", escape(&missing)),
            }
            (tensors, Some(Value::Object(config)), Vec::new())
        }
        Source::Gguf(_) => (plain(items), None, Vec::new()),
        Source::Hf(c) => {
            let (config, companions) = hf_files(c.path(), torch)?;
            (plain(items), config, companions)
        }
    };
    tensors.sort_by_key(|x| natural(&x.item.name));
    check_unique(a, &tensors)?;
    let sizes: Vec<u64> = tensors
        .iter()
        .map(|t| convert::out_len(&t.item, dtype).unwrap_or(u64::MAX))
        .collect();
    let max = a.folder.max_shard_size.unwrap_or(shards::DEFAULT_MAX_SHARD);
    // The rule can put a large tensor's shard before an earlier tensor's: the
    // tensors are reordered shard by shard.
    let groups = shards::split(&sizes, max);
    let mut slots: Vec<Option<Tensor<'a>>> = tensors.into_iter().map(Some).collect();
    let mut tensors = Vec::with_capacity(slots.len());
    let mut shards = Vec::with_capacity(groups.len());
    for g in &groups {
        let start = tensors.len();
        tensors.extend(g.iter().filter_map(|&i| slots[i].take()));
        shards.push(start..tensors.len());
    }
    Ok(Plan {
        tensors,
        shards,
        config,
        companions,
        generated,
        dtype,
    })
}

/// Items written as decoded, under their own names.
fn plain(items: Vec<Item<'_>>) -> Vec<Tensor<'_>> {
    (items.into_iter())
        .map(|item| Tensor {
            item,
            transform: Transform::None,
        })
        .collect()
}

/// Two output tensors of one name (after renaming).
fn check_unique(a: &ConvertArgs, tensors: &[Tensor<'_>]) -> Result<(), ConvertError> {
    for w in tensors.windows(2) {
        if w[0].item.name == w[1].item.name {
            return Err(ConvertError::DuplicateName {
                path: a.input.clone(),
                name: w[0].item.name.clone(),
            });
        }
    }
    Ok(())
}

/// A checkpoint folder's `config.json` (rewritten) and companion files; nothing for
/// a single `.safetensors` file.
fn hf_files(path: &Path, torch: &str) -> Result<(Option<Value>, Vec<PathBuf>), FolderError> {
    if !path.is_dir() {
        return Ok((None, Vec::new()));
    }
    let io = |p: &Path| {
        let p = p.to_owned();
        move |source| FolderError::Io { path: p, source }
    };
    let cfg = path.join("config.json");
    let config = match std::fs::read(&cfg) {
        Ok(bytes) => {
            let v: Value =
                serde_json::from_slice(&bytes).map_err(|source| FolderError::Config {
                    path: cfg.clone(),
                    source,
                })?;
            Some(config::rewrite(v, torch))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io(&cfg)(e)),
    };
    let companions = config::companions(path).map_err(io(path))?;
    Ok((config, companions))
}

/// A sort key comparing digit runs as numbers (`layers.2` before `layers.10`), so
/// that a layer's tensors are neighbours in the shards.
fn natural(name: &str) -> Vec<(u8, u64, String)> {
    let mut key = Vec::new();
    let mut rest = name;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits > 0 {
            let (d, r) = rest.split_at(digits);
            key.push((0, d.parse().unwrap_or(u64::MAX), d.to_owned()));
            rest = r;
        } else {
            let text = rest
                .find(|c: char| c.is_ascii_digit())
                .unwrap_or(rest.len());
            let (t, r) = rest.split_at(text);
            key.push((1, 0, t.to_owned()));
            rest = r;
        }
    }
    key
}

/// The weight map of the index: tensor name to shard file.
fn weight_map(plan: &Plan<'_>) -> BTreeMap<String, String> {
    let n = plan.shards.len();
    let mut map = BTreeMap::new();
    for (s, range) in plan.shards.iter().enumerate() {
        for t in &plan.tensors[range.clone()] {
            map.insert(t.item.name.clone(), shards::file_name(s, n));
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_order_puts_layer_2_before_10() {
        let mut names = ["l.10.w", "l.2.w", "l.1.w", "emb", "l.2.b"];
        names.sort_by_key(|n| natural(n));
        assert_eq!(names, ["emb", "l.1.w", "l.2.b", "l.2.w", "l.10.w"]);
        assert!(is_folder(Path::new("out")) && is_folder(Path::new("out.d/")));
        assert!(!is_folder(Path::new("a/out.safetensors")));
    }
}
