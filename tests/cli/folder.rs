//! `dq convert INPUT OUT_DIR`: a HuggingFace folder. GGUF names, values and config
//! against what transformers' own GGUF loader made of the same files
//! (`scripts/make_folder_fixtures.py`, tests/fixtures/folder/); shard boundaries at
//! `--max-shard-size` (HuggingFace's rule); `--part`/`--finish` byte-identical to
//! one run; checkpoints' config and companion files; atomic failure.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use safetensors::SafeTensors;
use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn dq(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dq"))
        .env("DQ_TUNING", "off")
        .args(args)
        .output()
        .expect("running the dq binary")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn ok(args: &[&str]) -> Output {
    let o = dq(args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    o
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&fs::read(path).unwrap()).unwrap()
}

/// Every tensor of the folder's shards: name -> (dtype, shape, bytes, file).
type Tensors = BTreeMap<String, (String, Vec<usize>, Vec<u8>, String)>;

fn folder_tensors(dir: &Path) -> Tensors {
    let mut out = BTreeMap::new();
    for name in names(dir).iter().filter(|n| n.ends_with(".safetensors")) {
        let bytes = fs::read(dir.join(name)).unwrap();
        let (_, meta) = SafeTensors::read_metadata(&bytes).unwrap();
        let format = meta
            .metadata()
            .as_ref()
            .and_then(|m| m.get("format").cloned());
        assert_eq!(format.as_deref(), Some("pt"), "{name}: __metadata__");
        let st = SafeTensors::deserialize(&bytes).unwrap();
        for (t, view) in st.tensors() {
            let v = (
                format!("{:?}", view.dtype()),
                view.shape().to_vec(),
                view.data().to_vec(),
                name.clone(),
            );
            assert!(out.insert(t, v).is_none());
        }
    }
    out
}

// ---------------------------------------------------------------------------
// GGUF -> HuggingFace, against transformers.

/// The folder of `stem`.gguf: transformers' names, shapes and f32 bits (its
/// state dict, recorded), its config keys and values, and the dtype.
fn gguf_matches_transformers(stem: &str) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("model");
    let input = fixtures().join(format!("folder/{stem}.gguf"));
    let o = ok(&["convert", s(&input), s(&out)]);
    assert!(
        !stderr(&o).contains("no tokenizer written"),
        "{}",
        stderr(&o)
    );
    // The tokenizer files are those transformers saved (tests/cli/folder_tokenizer.rs).
    let mut want_files = names(&fixtures().join(format!("folder/{stem}.tokenizer")));
    want_files.extend(["config.json".to_owned(), "model.safetensors".to_owned()]);
    want_files.sort();
    assert_eq!(names(&out), want_files);
    let got = folder_tensors(&out);
    let want_bytes =
        fs::read(fixtures().join(format!("folder/{stem}.expected.safetensors"))).unwrap();
    let want = SafeTensors::deserialize(&want_bytes).unwrap();
    let mut want_names: Vec<String> = want.names().into_iter().map(str::to_owned).collect();
    want_names.sort();
    assert_eq!(
        got.keys().cloned().collect::<Vec<_>>(),
        want_names,
        "{stem}: names"
    );
    for (name, (dtype, shape, bytes, _)) in &got {
        let w = want.tensor(name).unwrap();
        assert_eq!(dtype, "F32", "{name}");
        assert_eq!(shape, w.shape(), "{name}: shape");
        assert!(
            bytes == w.data(),
            "{stem}: {name}: bits differ from transformers'"
        );
    }
    let config = json(&out.join("config.json"));
    let recorded = json(&fixtures().join(format!("folder/{stem}.config.json")));
    for (key, value) in recorded.as_object().unwrap() {
        let mine = &config[key];
        match (value.as_f64(), mine.as_f64()) {
            (Some(a), Some(b)) if value.is_f64() => assert_eq!(a, b, "{stem}: {key}"),
            _ => assert_eq!(mine, value, "{stem}: config {key}"),
        }
    }
    assert_eq!(config["torch_dtype"], "float32");
    assert!(config.get("quantization_config").is_none());
}

#[test]
fn a_llama_gguf_folder_is_what_transformers_loads() {
    gguf_matches_transformers("llama");
}

#[test]
fn a_gemma3_gguf_folder_is_what_transformers_loads() {
    gguf_matches_transformers("gemma3");
}

#[test]
fn a_gemma_v1_gguf_folder_is_the_hf_model_it_was_made_from() {
    // transformers loads no gemma (v1) GGUF; the fixture's reference is the HF model
    // the script wrote the file from, as llama.cpp's converter does.
    gguf_matches_transformers("gemma");
    let check = json(&fixtures().join("folder/check.json"));
    let refused = check["gemma_transformers_gguf_error"].as_str().unwrap();
    assert!(
        refused.contains("architecture gemma is not supported"),
        "{refused}"
    );
}

#[test]
fn a_qwen2_gguf_folder_is_what_transformers_loads() {
    gguf_matches_transformers("qwen2");
}

#[test]
fn a_llama3_gguf_folder_is_what_transformers_loads() {
    gguf_matches_transformers("llama3");
}

#[test]
fn the_recorded_transformers_check_passed() {
    // Written by the fixture script with --dq: the dq folders loaded in transformers.
    let check = json(&fixtures().join("folder/check.json"));
    for stem in ["llama", "gemma3", "qwen2", "llama3", "gemma"] {
        let c = &check[stem];
        assert_eq!(c["missing_keys"], serde_json::json!([]), "{stem}: {c}");
        assert_eq!(c["unexpected_keys"], serde_json::json!([]), "{stem}: {c}");
        assert_eq!(c["logits_equal"], true, "{stem}: {c}");
    }
}

#[test]
fn a_bf16_folder_rounds_transformers_f32_values_once() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m");
    let input = fixtures().join("folder/gemma3.gguf");
    ok(&["convert", s(&input), s(&out), "--dtype", "bf16"]);
    assert_eq!(json(&out.join("config.json"))["torch_dtype"], "bfloat16");
    let want_bytes = fs::read(fixtures().join("folder/gemma3.expected.safetensors")).unwrap();
    let want = SafeTensors::deserialize(&want_bytes).unwrap();
    for (name, (dtype, _, bytes, _)) in folder_tensors(&out) {
        assert_eq!(dtype, "BF16");
        let expect: Vec<u8> = (want.tensor(&name).unwrap().data().chunks_exact(4))
            .flat_map(|c| {
                let f = f32::from_le_bytes(c.try_into().unwrap());
                half::bf16::from_f32(f).to_le_bytes()
            })
            .collect();
        assert!(bytes == expect, "{name}");
    }
}

#[test]
fn other_architectures_are_refused_unless_gguf_names_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixtures().join("gguf/quantized_v2.gguf");
    let out = dir.path().join("m");
    let o = dq(&["convert", s(&input), s(&out)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("llama (and mistral), qwen2, qwen3, gemma, gemma2, gemma3"),
        "{err}"
    );
    assert!(err.contains("--names gguf"), "{err}");
    assert!(names(dir.path()).is_empty(), "nothing written");
    ok(&["convert", s(&input), s(&out), "--names", "gguf"]);
    let single = dir.path().join("one.safetensors");
    ok(&["convert", s(&input), s(&single)]);
    let got = folder_tensors(&out);
    let one = fs::read(&single).unwrap();
    let one = SafeTensors::deserialize(&one).unwrap();
    assert_eq!(got.len(), one.len());
    for (name, (_, _, bytes, _)) in got {
        assert!(bytes == one.tensor(&name).unwrap().data(), "{name}");
    }
    assert!(!out.join("config.json").exists());
}

// ---------------------------------------------------------------------------
// HuggingFace checkpoints: config, companions, shards.

/// A copy of a fixture checkpoint with companion files beside it.
fn checkpoint_with_companions(dir: &Path) -> PathBuf {
    let src = fixtures().join("hf/awq-4bit-g16-sharded");
    let ck = dir.join("ck");
    fs::create_dir(&ck).unwrap();
    for n in names(&src) {
        if src.join(&n).is_file() {
            fs::copy(src.join(&n), ck.join(&n)).unwrap();
        }
    }
    for (n, body) in [
        ("tokenizer.json", "{\"t\": 1}"),
        ("generation_config.json", "{}"),
        ("README.md", "hi"),
        ("quantize_config.json", "{\"bits\": 4}"),
    ] {
        fs::write(ck.join(n), body).unwrap();
    }
    ck
}

#[test]
fn a_checkpoint_folder_has_its_config_without_quantization_and_its_files() {
    let dir = tempfile::tempdir().unwrap();
    let ck = checkpoint_with_companions(dir.path());
    let out = dir.path().join("out");
    ok(&["convert", s(&ck), s(&out)]);
    assert_eq!(
        names(&out),
        [
            "README.md",
            "config.json",
            "generation_config.json",
            "model.safetensors",
            "tokenizer.json"
        ]
    );
    assert_eq!(fs::read(out.join("tokenizer.json")).unwrap(), b"{\"t\": 1}");
    let config = json(&out.join("config.json"));
    assert!(config.get("quantization_config").is_none(), "{config}");
    assert_eq!(config["torch_dtype"], "float16");
    assert_eq!(config["model_type"], "llama");
    // The tensors are those of a single-file convert: linears [out, in], no companions.
    let single = dir.path().join("one.safetensors");
    ok(&["convert", s(&ck), s(&single)]);
    let one = fs::read(&single).unwrap();
    let one = SafeTensors::deserialize(&one).unwrap();
    let got = folder_tensors(&out);
    assert_eq!(got.len(), one.len());
    for (name, (_, shape, bytes, _)) in &got {
        let t = one.tensor(name).unwrap();
        assert_eq!(shape, t.shape());
        assert!(bytes == t.data(), "{name}");
        assert!(
            !name.ends_with("qzeros") && !name.ends_with("scales"),
            "{name}"
        );
    }
}

#[test]
fn shards_split_at_max_shard_size_as_huggingface_does() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixtures().join("folder/llama.gguf");
    let out = dir.path().join("m");
    let max = 40_000u64;
    ok(&["convert", s(&input), s(&out), "--max-shard-size", "40kB"]);
    let index = json(&out.join("model.safetensors.index.json"));
    let map = index["weight_map"].as_object().unwrap();
    let got = folder_tensors(&out);
    assert_eq!(map.len(), got.len());
    let mut per_file: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut total = 0;
    for (name, (_, _, bytes, file)) in &got {
        assert_eq!(map[name], file.as_str(), "{name}");
        per_file
            .entry(file.clone())
            .or_default()
            .push(bytes.len() as u64);
        total += bytes.len() as u64;
    }
    assert_eq!(index["metadata"]["total_size"], total);
    let n = per_file.len();
    assert!(n > 2, "{n} shards");
    let files: Vec<&String> = per_file.keys().collect();
    for (i, f) in files.iter().enumerate() {
        assert_eq!(**f, format!("model-{:05}-of-{n:05}.safetensors", i + 1));
        let sizes = &per_file[*f];
        let sum: u64 = sizes.iter().sum();
        assert!(
            sum <= max || sizes.len() == 1,
            "{f}: {sum} bytes in {} tensors",
            sizes.len()
        );
    }
    // Greedy: no shard could have taken the next shard's first tensor. The tensors
    // are written in natural name order, so the next shard's first is its smallest name.
    let firsts: Vec<u64> = files
        .iter()
        .map(|f| {
            let (_, (_, _, b, _)) = got
                .iter()
                .filter(|(_, v)| &v.3 == *f)
                .min_by(|a, b| natural(a.0).cmp(&natural(b.0)))
                .unwrap();
            b.len() as u64
        })
        .collect();
    for i in 0..n - 1 {
        let sum: u64 = per_file[files[i]].iter().sum();
        assert!(
            sum + firsts[i + 1] > max,
            "shard {} could hold the next tensor",
            i + 1
        );
    }
}

/// Digit runs compared as numbers (dq's shard order).
fn natural(name: &str) -> Vec<(u8, u64, String)> {
    let mut key = Vec::new();
    let mut rest = name;
    while !rest.is_empty() {
        let d = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (head, tail) = if d > 0 {
            rest.split_at(d)
        } else {
            rest.split_at(
                rest.find(|c: char| c.is_ascii_digit())
                    .unwrap_or(rest.len()),
            )
        };
        key.push(if d > 0 {
            (0, head.parse().unwrap(), head.to_owned())
        } else {
            (1, 0, head.to_owned())
        });
        rest = tail;
    }
    key
}

#[test]
fn parts_and_finish_make_the_same_bytes_as_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let ck = checkpoint_with_companions(dir.path());
    let one = dir.path().join("one");
    let parts = dir.path().join("parts");
    let size = ["--max-shard-size", "1000"];
    let with = |extra: &[&str], out: &Path| {
        let mut a = vec!["convert", s(&ck), s(out)];
        a.extend(size);
        a.extend(extra);
        ok(&a)
    };
    with(&[], &one);
    assert!(names(&one).len() > 6, "{:?}", names(&one));
    // Finish before every part ran: refused, naming the missing shard.
    with(&["--part", "2/3"], &parts);
    let mut a = vec!["convert", s(&ck), s(&parts), "--finish"];
    a.extend(size);
    let o = dq(&a);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("missing (run its --part again)"),
        "{}",
        stderr(&o)
    );
    assert!(!parts.join("config.json").exists());
    with(&["--part", "3/3"], &parts);
    with(&["--part", "1/3"], &parts);
    with(&["--finish"], &parts);
    assert_eq!(names(&one), names(&parts));
    for n in names(&one) {
        assert!(
            fs::read(one.join(&n)).unwrap() == fs::read(parts.join(&n)).unwrap(),
            "{n}"
        );
    }
    // A shard that is not what this input makes is refused.
    let first = parts.join(
        names(&parts)
            .iter()
            .find(|n| n.starts_with("model-0"))
            .unwrap(),
    );
    let mut b = fs::read(&first).unwrap();
    b[9] ^= 1;
    fs::write(&first, b).unwrap();
    let o = dq(&a);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("not the header this input makes"),
        "{}",
        stderr(&o)
    );
}

// ---------------------------------------------------------------------------
// Atomicity.

/// Runs dq with a file-size limit (RLIMIT_FSIZE): with `ignore`, writes past it
/// fail (EFBIG); without, the process is killed by SIGXFSZ mid-write.
fn dq_fsize(args: &[&str], limit: u64, ignore: bool) -> Output {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dq"));
    cmd.env("DQ_TUNING", "off");
    cmd.args(args);
    // SAFETY: the closure only calls setrlimit and signal, both async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if ignore {
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            }
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.output().unwrap()
}

#[test]
fn a_failed_or_killed_run_leaves_no_folder_and_the_next_run_cleans_up() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixtures().join("folder/llama.gguf");
    let out = dir.path().join("m");
    let args = ["convert", s(&input), s(&out)];
    // A write error mid-shard: one line, exit 2, nothing left.
    let o = dq_fsize(&args, 50_000, true);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(
        stderr(&o)
            .lines()
            .filter(|l| l.starts_with("dq: error"))
            .count(),
        1
    );
    assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));
    // Killed mid-shard: a temporary folder is left, and no OUT_DIR.
    let o = dq_fsize(&args, 50_000, false);
    assert_eq!(o.status.code(), None, "killed by SIGXFSZ");
    let left = names(dir.path());
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(
        left[0].starts_with(".dq-convert-") && left[0].ends_with(".tmp"),
        "{left:?}"
    );
    // The next run deletes it.
    ok(&args);
    assert_eq!(names(dir.path()), ["m"]);
}

#[test]
fn an_existing_folder_is_replaced_only_with_force() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixtures().join("folder/gemma3.gguf");
    let out = dir.path().join("m");
    fs::create_dir(&out).unwrap();
    fs::write(out.join("old.txt"), b"old").unwrap();
    let o = dq(&["convert", s(&input), s(&out)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--force replaces it"), "{}", stderr(&o));
    assert_eq!(names(&out), ["old.txt"]);
    // A failed --force run leaves the old folder as it was.
    let o = dq_fsize(&["convert", s(&input), s(&out), "--force"], 30_000, true);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(names(&out), ["old.txt"]);
    assert_eq!(names(dir.path()), ["m"]);
    ok(&["convert", s(&input), s(&out), "--force"]);
    assert_eq!(
        names(&out),
        [
            "chat_template.jinja",
            "config.json",
            "model.safetensors",
            "tokenizer.json",
            "tokenizer_config.json"
        ]
    );
    assert_eq!(names(dir.path()), ["m"]);
    // A file in the way is refused; the input folder as OUT_DIR too.
    let file = dir.path().join("f");
    fs::write(&file, b"x").unwrap();
    let o = dq(&["convert", s(&input), s(&file), "--force"]);
    assert!(stderr(&o).contains("is not a folder"), "{}", stderr(&o));
    let ck = fixtures().join("hf/awq-4bit-g32");
    let o = dq(&["convert", s(&ck), s(&ck), "--force"]);
    assert!(stderr(&o).contains("is the input folder"), "{}", stderr(&o));
}
