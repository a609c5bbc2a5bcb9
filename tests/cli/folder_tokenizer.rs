//! `dq convert FILE.gguf OUT_DIR`'s tokenizer files against what transformers 5.24
//! saved for the same GGUF (`AutoTokenizer.from_pretrained(dir, gguf_file=...)
//! .save_pretrained(...)`, recorded by `scripts/make_folder_fixtures.py` in
//! tests/fixtures/folder/<stem>.tokenizer/), and the script's check that the folder's
//! tokenizer encodes and decodes as the GGUF's (check.json).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The fixture models: sentencepiece (llama, gemma3, gemma) and byte-level BPE
/// (qwen2, llama3). gemma (v1)'s reference is `GemmaTokenizer.from_pretrained(dir,
/// gguf_file=...)`: AutoTokenizer would need the model's config, which transformers
/// cannot read from a gemma GGUF.
const STEMS: [&str; 5] = ["llama", "gemma3", "qwen2", "llama3", "gemma"];

fn folder() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/folder")
}

fn convert(input: &Path, out: &Path) -> Output {
    let o = Command::new(env!("CARGO_BIN_EXE_dq"))
        .env("DQ_TUNING", "off")
        .args(["convert", input.to_str().unwrap(), out.to_str().unwrap()])
        .output()
        .expect("running the dq binary");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    o
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&fs::read(path).unwrap()).unwrap()
}

/// `tokenizer.json` compared as data: objects by key, `added_tokens` by id (the
/// order transformers happened to add them in is not part of the format).
fn normalized(mut v: Value) -> Value {
    if let Some(added) = v.get_mut("added_tokens").and_then(Value::as_array_mut) {
        added.sort_by_key(|t| t["id"].as_u64());
    }
    v
}

/// The keys of `tokenizer_config.json` that are not the tokenizer: set while
/// loading (`is_local`, `local_files_only`) or transformers' default
/// (`model_max_length`, int(1e30)), which dq leaves out.
fn config_without_loading_keys(mut v: Value) -> Value {
    let map = v.as_object_mut().unwrap();
    for key in ["is_local", "local_files_only"] {
        map.remove(key);
    }
    // int(1e30), which serde_json reads as the f64 1e30.
    let max = map.remove("model_max_length").and_then(|m| m.as_f64());
    assert_eq!(max, Some(1e30), "transformers' default");
    v
}

#[test]
fn the_tokenizer_files_are_those_transformers_saved() {
    let dir = tempfile::tempdir().unwrap();
    for stem in STEMS {
        let out = dir.path().join(stem);
        convert(&folder().join(format!("{stem}.gguf")), &out);
        let saved = folder().join(format!("{stem}.tokenizer"));
        let got = normalized(json(&out.join("tokenizer.json")));
        let want = normalized(json(&saved.join("tokenizer.json")));
        for key in want.as_object().unwrap().keys() {
            assert_eq!(got[key], want[key], "{stem}: tokenizer.json {key}");
        }
        assert_eq!(got, want, "{stem}: tokenizer.json");
        let want_cfg = config_without_loading_keys(json(&saved.join("tokenizer_config.json")));
        assert_eq!(
            json(&out.join("tokenizer_config.json")),
            want_cfg,
            "{stem}: tokenizer_config.json"
        );
        let template = saved.join("chat_template.jinja");
        assert_eq!(
            fs::read(out.join("chat_template.jinja")).ok(),
            fs::read(&template).ok(),
            "{stem}: chat_template.jinja"
        );
    }
}

#[test]
fn the_comparison_sees_a_wrong_merge_order_or_a_lost_added_token() {
    // The test above compares data; a swapped merge or a missing added token differs.
    let want = normalized(json(&folder().join("llama.tokenizer/tokenizer.json")));
    let mut swapped = want.clone();
    swapped["model"]["merges"]
        .as_array_mut()
        .unwrap()
        .swap(0, 1);
    assert_ne!(normalized(swapped), want);
    let mut lost = want.clone();
    lost["added_tokens"].as_array_mut().unwrap().pop();
    assert_ne!(normalized(lost), want);
}

#[test]
fn the_recorded_tokenizer_check_passed() {
    // check.json: the fixture script loaded each dq folder with
    // AutoTokenizer.from_pretrained(folder) and compared it with the GGUF's.
    let check = json(&folder().join("check.json"));
    for stem in STEMS {
        let t = &check[stem]["tokenizer"];
        for key in [
            "class_equal",
            "encodings_equal",
            "vocab_equal",
            "special_tokens_equal",
            "chat_template_equal",
            "model_max_length_equal",
            "same_as_saved_folder",
        ] {
            assert_eq!(t[key], true, "{stem}: {key}: {t}");
        }
        // transformers' Qwen2Tokenizer puts an NFC normalizer in front whenever it
        // loads a folder (the one its own save_pretrained wrote too); its GGUF loading
        // has none. Text already in NFC (all of TEXTS) encodes the same.
        let nfc_added = stem == "qwen2";
        assert_eq!(t["backend_json_equal"], !nfc_added, "{stem}: {t}");
        assert_eq!(t["decomposed_text_equal"], !nfc_added, "{stem}: {t}");
    }
}

/// A copy of `stem`.gguf with `from` (first occurrence after `after`) replaced by
/// `to` (same length).
fn patched(dir: &Path, stem: &str, after: &[u8], from: &[u8], to: &[u8]) -> PathBuf {
    let mut bytes = fs::read(folder().join(format!("{stem}.gguf"))).unwrap();
    let find = |hay: &[u8], needle: &[u8], from: usize| {
        (from..hay.len() - needle.len())
            .find(|&i| &hay[i..i + needle.len()] == needle)
            .unwrap()
    };
    let key = find(&bytes, after, 0) + after.len();
    let at = find(&bytes, from, key);
    bytes[at..at + to.len()].copy_from_slice(to);
    let path = dir.join(format!("{stem}-patched.gguf"));
    fs::write(&path, bytes).unwrap();
    path
}

fn no_tokenizer(input: &Path, out: &Path, says: &str) {
    let o = convert(input, out);
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("tokenizer")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].starts_with("dq: no tokenizer written: "), "{err}");
    assert!(lines[0].contains(says), "{err}");
    let mut files: Vec<String> = fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    assert_eq!(files, ["config.json", "model.safetensors"]);
}

#[test]
fn a_vocabulary_dq_does_not_convert_is_one_line_and_no_tokenizer() {
    let dir = tempfile::tempdir().unwrap();
    let bert = patched(
        dir.path(),
        "qwen2",
        b"tokenizer.ggml.model",
        b"gpt2",
        b"bert",
    );
    no_tokenizer(
        &bert,
        &dir.path().join("a"),
        "tokenizer.ggml.model `bert` is not one dq converts (llama, gpt2)",
    );
    // A bos id past the tokens: transformers fails there; dq says so and goes on.
    let key = b"tokenizer.ggml.bos_token_id";
    let bad = patched(dir.path(), "llama", key, &[1, 0, 0, 0], &[0, 0, 1, 0]);
    no_tokenizer(
        &bad,
        &dir.path().join("b"),
        "tokenizer.ggml.bos_token_id 65536 is past the 400 tokens",
    );
}
