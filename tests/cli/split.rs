//! GGUF split sets through the binary (`tests/fixtures/gguf/split`, gguf-py's own
//! splitting): `dq convert` of any part writes the unsplit model's bytes, `dq
//! inspect` shows the whole set or one part, `dq model` runs the set, a broken set
//! is one line and exit 2 with nothing written; and the unsupported types named by
//! `dq inspect` and `dq convert`.
#![cfg(unix)]

use std::fs;
use std::path::{Path, PathBuf};

use dq::formats::gguf::GgmlType;

use crate::files::{self, Kv, Tensor, assert_refused, dq, text};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn split_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gguf/split")
}

fn part(stem: &str, k: u32) -> PathBuf {
    split_dir().join(format!("{stem}-{k:05}-of-00003.gguf"))
}

/// `dq convert INPUT` with `args`: the output's bytes.
fn convert(input: &Path, args: &[&str]) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.safetensors");
    let o = dq(&[&["convert", s(input), s(&out)], args].concat());
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("7 tensors"), "{}", text(&o.stdout));
    fs::read(out).unwrap()
}

#[test]
fn any_part_converts_to_the_unsplit_models_bytes() {
    for dtype in ["f32", "bf16"] {
        for backend in ["auto", "reference"] {
            let args = ["--dtype", dtype, "--backend", backend];
            let whole = convert(&split_dir().join("model.gguf"), &args);
            let names = safetensors::SafeTensors::deserialize(&whole)
                .unwrap()
                .names()
                .len();
            assert_eq!(names, 7);
            for p in [part("model", 1), part("model", 3), part("lean", 2)] {
                assert!(convert(&p, &args) == whole, "{} {args:?}", p.display());
            }
        }
    }
}

#[test]
fn model_runs_and_verifies_the_whole_set() {
    let o = dq(&[
        "model",
        s(&part("lean", 3)),
        "--verify",
        "--json",
        "--threads",
        "2",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["tensors"], 7);
    assert_eq!(v["verified"], true);
}

#[test]
fn inspect_shows_the_set_or_one_part() {
    let o = dq(&["inspect", s(&part("model", 2))]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains(", 7 tensors, "), "{out}");
    assert!(
        out.contains(
            "split set: 3 parts read whole, metadata from part 1: model-00001-of-00003.gguf, \
             model-00002-of-00003.gguf, model-00003-of-00003.gguf"
        ),
        "{out}"
    );
    assert!(out.contains("general.name"), "part 1's metadata: {out}");
    let row = out
        .lines()
        .find(|l| l.starts_with("output.weight"))
        .unwrap();
    assert!(
        row.contains("BF16") && row.ends_with("yes        3"),
        "{row}"
    );
    assert!(out.contains("7 of 7 tensors of supported types"), "{out}");
    assert!(!out.contains("unsupported types"), "{out}");

    let o = dq(&["inspect", "--part-only", s(&part("model", 2))]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains(
            "split set: part 2 of 3, read alone (its own metadata and 3 of the set's 7 tensors)"
        ),
        "{out}"
    );
    assert!(out.contains(", 3 tensors, 3 metadata keys"), "{out}");

    let json = |args: &[&str]| -> serde_json::Value {
        let o = dq(&[&["inspect", "--json"], args].concat());
        assert!(o.status.success(), "{}", text(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let v = json(&[s(&part("lean", 3))]);
    assert_eq!(v["split"]["read"], "set");
    assert_eq!(v["split"]["count"], 3);
    assert_eq!(v["split"]["files"][0], "lean-00001-of-00003.gguf");
    assert_eq!(v["tensors"][0]["part"], 2, "lean's part 1 holds no tensor");
    assert_eq!(v["tensor_count"], 7);
    let v = json(&["--part-only", s(&part("lean", 3))]);
    assert_eq!(v["split"]["read"], "part");
    assert_eq!(v["split"]["part"], 3);
    assert_eq!(v["tensor_count"], 3);
    let v = json(&[s(&split_dir().join("model.gguf"))]);
    assert_eq!(v["split"], serde_json::Value::Null);
    assert_eq!(v["unsupported_types"], serde_json::json!([]));
}

#[test]
fn broken_sets_are_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let (inp, out) = (dir.path().join("in"), dir.path().join("out"));
    fs::create_dir_all(&inp).unwrap();
    fs::create_dir_all(&out).unwrap();
    for k in [1, 3] {
        let name = format!("m-{k:05}-of-00003.gguf");
        fs::copy(part("model", k), inp.join(name)).unwrap();
    }
    let given = inp.join("m-00003-of-00003.gguf");
    let o_st = out.join("o.safetensors");
    for args in [
        vec!["inspect", s(&given)],
        vec!["inspect", "--json", s(&given)],
        vec!["convert", s(&given), s(&o_st)],
        vec!["model", s(&given), "--verify"],
    ] {
        let err = assert_refused(&dq(&args));
        assert!(err.contains("split part 2 of 3: "), "{args:?}: {err}");
        assert!(err.contains("m-00002-of-00003.gguf"), "{err}");
    }
    assert!(files::entries(&out).is_empty());
    // The part alone still inspects.
    let o = dq(&["inspect", "--part-only", s(&given)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // A part named outside gguf-split's pattern: the set cannot be found.
    let renamed = inp.join("renamed.gguf");
    fs::copy(part("model", 2), &renamed).unwrap();
    let err = assert_refused(&dq(&["convert", s(&renamed), s(&o_st)]));
    assert!(err.contains("part 2 of a 3-part split set"), "{err}");
    assert!(files::entries(&out).is_empty());
}

/// A file of Q8_0, unknown (ids 4 and 99) and, if any is left, a defined but
/// unsupported type; and the expected summary of its unsupported types.
fn unsupported_file(dir: &Path) -> (PathBuf, String, String) {
    let mut q8 = vec![0x00, 0x3C];
    q8.extend(0..32u8);
    let mut tensors = Vec::new();
    let (mut short, mut long) = (Vec::new(), Vec::new());
    if let Some(ty) = GgmlType::ALL.into_iter().find(|t| !t.is_supported()) {
        let data = vec![0; ty.type_size()];
        tensors.push(Tensor::new("x", &[ty.block_size() as u64], ty.id(), data));
        short.push(format!("{} (1 tensor)", ty.name()));
        long.push(format!("{} (1 tensor, first x)", ty.name()));
    }
    tensors.push(Tensor::new("a", &[8], 4, Vec::new()));
    tensors.push(Tensor::new("q", &[32], files::Q8_0, q8));
    tensors.push(Tensor::new("b", &[8, 2], 4, Vec::new()));
    tensors.push(Tensor::new("c", &[1], 99, Vec::new()));
    short.extend(["id 4 (2 tensors)".into(), "id 99 (1 tensor)".into()]);
    long.extend([
        "id 4 (2 tensors, first a)".into(),
        "id 99 (1 tensor, first c)".into(),
    ]);
    let path = dir.join("u.gguf");
    fs::write(
        &path,
        files::gguf(&[Kv::string("general.architecture", "x")], &tensors),
    )
    .unwrap();
    (path, short.join(", "), long.join(", "))
}

#[test]
fn unsupported_types_are_named_by_inspect_and_convert() {
    let dir = tempfile::tempdir().unwrap();
    let (path, short, long) = unsupported_file(dir.path());
    let o = dq(&["inspect", s(&path)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains(&format!("\nunsupported types: {short}\n")),
        "{out}"
    );
    let row = out.lines().find(|l| l.starts_with("c ")).unwrap();
    assert!(row.contains("id 99") && row.ends_with("no"), "{row}");

    let o = dq(&["inspect", "--json", s(&path)]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let blocked = v["unsupported_types"].as_array().unwrap();
    let last = &blocked[blocked.len() - 2..];
    assert_eq!(last[0], serde_json::json!({"type": "id 4", "tensors": 2}));
    assert_eq!(last[1], serde_json::json!({"type": "id 99", "tensors": 1}));

    let out = dir.path().join("o.safetensors");
    let err = assert_refused(&dq(&["convert", s(&path), s(&out)]));
    assert!(
        err.contains(&format!(
            "unsupported GGUF types block the conversion: {long} (--skip-unsupported leaves them out)"
        )),
        "{err}"
    );
    assert!(!out.exists());
    let o = dq(&["convert", s(&path), s(&out), "--skip-unsupported"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("1 tensors ("),
        "{}",
        text(&o.stdout)
    );
}
