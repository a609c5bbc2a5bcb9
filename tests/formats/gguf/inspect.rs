//! `dq inspect` on the fixtures (text and `--json`) and on bad files.

use std::path::Path;
use std::process::{Command, Output};

use super::{fixture, fixtures};

/// Runs the dq binary.
fn dq(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dq"))
        .env("DQ_TUNING", "off")
        .args(args)
        .output()
        .expect("running the dq binary")
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn inspect_prints_tensors_and_metadata() {
    let path = fixtures().join("metadata.gguf");
    let o = dq(&["inspect", path_str(&path)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains(
            "GGUF version 3, architecture dq-fixture, 3 tensors, 27 metadata keys, alignment 64"
        ),
        "{text}"
    );
    let row = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} in {text}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(row("small.q8_0"), "small.q8_0 Q8_0 [1, 32] 34 yes");
    assert_eq!(row("small.f16"), "small.f16 F16 [1, 3] 6 yes");
    assert!(text.contains("[string; 100]"), "{text}");
    assert!(text.contains("\"tok7\", ... 92 more]"), "{text}");

    let o = dq(&["inspect", path_str(&fixtures().join("blocks.gguf"))]);
    let text = String::from_utf8(o.stdout).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("tq1_0.unsupported"))
        .unwrap();
    assert!(line.ends_with(" yes"), "{line}");
    assert!(
        text.contains("58 of 58 tensors of supported types"),
        "{text}"
    );
}

#[test]
fn inspect_json_is_machine_readable() {
    let path = fixtures().join("metadata.gguf");
    let o = dq(&["inspect", path_str(&path), "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["version"], 3);
    assert_eq!(v["alignment"], 64);
    assert_eq!(v["architecture"], "dq-fixture");
    assert_eq!(v["tensor_count"], 3);
    assert_eq!(v["metadata_count"], 27);
    let t = &v["tensors"][1];
    assert_eq!(t["name"], "small.q8_0");
    assert_eq!(t["type"], "Q8_0");
    assert_eq!(t["shape"], serde_json::json!([1, 32]));
    assert_eq!(t["bytes"], 34);
    assert_eq!(t["offset"], 64);
    assert_eq!(t["supported"], true);
    let meta = v["metadata"].as_array().unwrap();
    let entry = |k: &str| meta.iter().find(|e| e["key"] == k).unwrap().clone();
    assert_eq!(entry("test.u64")["value"], u64::MAX);
    assert_eq!(entry("test.f32")["value"], -1.5);
    assert_eq!(entry("test.string")["value"], "h\u{e9}llo \u{2713}");
    let tokens = entry("tokenizer.ggml.tokens");
    assert_eq!(tokens["type"], "array");
    assert_eq!(tokens["element_type"], "string");
    assert_eq!(tokens["len"], 100);
    assert_eq!(tokens["truncated"], true);
    assert_eq!(tokens["value"].as_array().unwrap().len(), 8);
    assert_eq!(
        entry("test.nested")["value"],
        serde_json::json!([[1, 2], [3], [4, 5, 6]])
    );
}

#[test]
fn inspect_rejects_a_bad_file_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("cut.gguf");
    std::fs::write(&bad, &fixture("metadata")[..100]).unwrap();
    let missing = dir.path().join("missing.gguf");
    for (path, what) in [(&bad, "truncated"), (&missing, "No such file")] {
        for json in [false, true] {
            let mut args = vec!["inspect", path_str(path)];
            if json {
                args.push("--json");
            }
            let o = dq(&args);
            assert_eq!(o.status.code(), Some(2));
            assert!(o.stdout.is_empty());
            let err = String::from_utf8(o.stderr).unwrap();
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(err.starts_with("dq: error: "), "{err}");
            assert!(err.contains(path_str(path)) && err.contains(what), "{err}");
        }
    }
}
