//! `dq run` with SPEC §10 float sources: `--src-type f8_e4m3|f8_e5m2|f4_e2m1` and
//! `--scales-type e8m0` with a raw `.bin` of scale bytes, against the float
//! conformance vectors; and each float-type error (exit 2, one line, nothing written).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support;
use support::conformance::assert_same_values;

fn dq(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dq"))
        .env("DQ_TUNING", "off")
        .args(args)
        .output()
        .expect("running the dq binary")
}

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance_float")
}

/// `dq run` flags of a float conformance vector (its case.json).
fn flags(dir: &Path) -> Vec<String> {
    let j: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("case.json")).unwrap()).unwrap();
    let s = |k: &str| j[k].as_str().unwrap().to_string();
    let xs = |k: &str| {
        j[k].as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap().to_string())
            .collect::<Vec<_>>()
            .join("x")
    };
    let mut f = vec![
        "run".into(),
        "--op".into(),
        "dynamic".into(),
        "--src-type".into(),
        s("src_type"),
        "--dst-type".into(),
        s("dst_type"),
        "--scales-type".into(),
        s("scales_type"),
        "--shape".into(),
        xs("shape"),
        "--qtype".into(),
        s("qtype"),
        "--input".into(),
        dir.join("src.bin").to_str().unwrap().into(),
        "--scales".into(),
        dir.join("scales.bin").to_str().unwrap().into(),
    ];
    if let Some(a) = j.get("axis") {
        f.extend(["--axis".into(), a.as_i64().unwrap().to_string()]);
    }
    if j.get("group_shape").is_some() {
        f.extend(["--group-shape".into(), xs("group_shape")]);
    }
    f
}

#[test]
fn run_float_vectors_on_every_backend() {
    let tmp = tempfile::tempdir().unwrap();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(vectors_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("case.json").exists())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 9);
    for dir in dirs {
        let j = std::fs::read_to_string(dir.join("case.json")).unwrap();
        let dst: dq::DType = serde_json::from_str::<serde_json::Value>(&j).unwrap()["dst_type"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let want = std::fs::read(dir.join("dst.bin")).unwrap();
        for backend in ["reference", "generated", "jit", "auto"]
            .into_iter()
            .filter(|b| support::in_build(b))
        {
            let out = tmp.path().join("y.bin");
            let mut args = flags(&dir);
            args.extend([
                "--backend".into(),
                backend.into(),
                "--threads".into(),
                "2".into(),
                "--output".into(),
                out.to_str().unwrap().into(),
            ]);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let o = dq(&args);
            assert!(
                o.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            let got = std::fs::read(&out).unwrap();
            let what = format!("{} with --backend {backend}", dir.display());
            assert_same_values(dst, &got, &want, &what);
            std::fs::remove_file(&out).unwrap();
        }
    }
}

/// Runs `args` (a base MXFP4 case with `edits` applied) and expects exit 2 with one
/// line containing `message`, and no output file.
fn fails(edits: &[(&str, Option<&str>)], message: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let w = |name: &str, bytes: &[u8]| {
        let p = tmp.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p.to_str().unwrap().to_string()
    };
    let src = w("src.bin", &[0x21; 32]);
    let scales = w("scales.bin", &[127; 2]);
    let zps = w("zps.bin", &[1; 2]);
    let out = tmp.path().join("y.bin");
    let mut args: Vec<(String, Option<String>)> = [
        ("--op", Some("dynamic")),
        ("--src-type", Some("f4_e2m1")),
        ("--dst-type", Some("bf16")),
        ("--scales-type", Some("e8m0")),
        ("--shape", Some("2x32")),
        ("--qtype", Some("per_group")),
        ("--group-shape", Some("1x32")),
        ("--input", Some(src.as_str())),
        ("--scales", Some(scales.as_str())),
        ("--output", Some(out.to_str().unwrap())),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
    .collect();
    for &(k, v) in edits {
        let v = v.map(|v| {
            if v == "ZPS" {
                zps.clone()
            } else {
                v.to_string()
            }
        });
        match args.iter_mut().find(|(a, _)| a == k) {
            Some(slot) => slot.1 = v,
            None => args.push((k.to_string(), v)),
        }
    }
    let mut flat = vec!["run".to_string()];
    for (k, v) in args {
        if let Some(v) = v {
            flat.extend([k, v]);
        }
    }
    let flat: Vec<&str> = flat.iter().map(String::as_str).collect();
    let o = dq(&flat);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{flat:?}: {err}");
    assert_eq!(err.lines().count(), 1, "one line: {err:?}");
    assert!(err.contains(message), "expected {message:?} in {err:?}");
    assert!(!out.exists(), "output written on error");
}

#[test]
fn the_base_case_runs() {
    // The base of `fails` is valid: MXFP4 [2, 32] with two e8m0 scales.
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("s.bin"), [0x21u8; 32]).unwrap();
    std::fs::write(tmp.path().join("c.bin"), [127u8, 128]).unwrap();
    let out = tmp.path().join("y.bin");
    let p = |n: &str| tmp.path().join(n).to_str().unwrap().to_string();
    let o = dq(&[
        "run",
        "--op",
        "dynamic",
        "--src-type",
        "f4_e2m1",
        "--dst-type",
        "f32",
        "--scales-type",
        "e8m0",
        "--shape",
        "2x32",
        "--qtype",
        "per_group",
        "--group-shape",
        "1x32",
        "--input",
        &p("s.bin"),
        "--scales",
        &p("c.bin"),
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let y: Vec<f32> = std::fs::read(&out)
        .unwrap()
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    // 0x21: nibbles 1 (0.5) then 2 (1.0); row 0 scale 2^0, row 1 scale 2^1.
    assert_eq!(&y[..4], [0.5, 1.0, 0.5, 1.0]);
    assert_eq!(&y[32..36], [1.0, 2.0, 1.0, 2.0]);
}

#[test]
fn float_errors_exit_2_with_one_line() {
    fails(
        &[("--zps", Some("ZPS")), ("--zps-type", Some("u8"))],
        "src dtype f4_e2m1 is a float type and takes no zero points",
    );
    fails(
        &[
            ("--op", Some("axes")),
            ("--src-type", Some("s8")),
            ("--qtype", None),
            ("--group-shape", None),
            ("--shape", Some("64")),
            ("--zps", Some("ZPS")),
        ],
        "e8m0 scales are only allowed for DynamicDequantize",
    );
    fails(
        &[
            ("--op", Some("dequantize")),
            ("--src-type", Some("f8_e4m3")),
            ("--dst-type", Some("f32")),
            ("--qtype", Some("per_tensor")),
            ("--group-shape", None),
            ("--scales", Some("0.5")),
        ],
        "e8m0 scales are only allowed for DynamicDequantize",
    );
    fails(
        &[("--scales-type", Some("f16"))],
        "scales dtype f16 is neither the dst dtype bf16 nor e8m0",
    );
}
