//! `dq convert`, and `dq inspect` / `dq model` on checkpoints, end to end through the
//! binary: every output tensor's name, shape, dtype and bits against the fixtures'
//! expected outputs (gguf-py's `dequantize`, the HF packers' own dequantizers, both
//! written by the committed scripts), any thread count giving the same file, and
//! failures leaving no output behind.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use half::{bf16, f16};
use safetensors::{Dtype, SafeTensors};

use crate::support;

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

/// Raw little-endian f32 bits of an expected-output file.
fn f32_bits(path: &Path) -> Vec<u32> {
    let b = fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    b.chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// The expected f32 bits rounded to the output dtype, as little-endian bytes.
fn expected_bytes(bits: &[u32], dtype: &str) -> Vec<u8> {
    bits.iter()
        .flat_map(|&b| {
            let y = f32::from_bits(b);
            match dtype {
                "f32" => b.to_le_bytes().to_vec(),
                "f16" => f16::from_f32(y).to_le_bytes().to_vec(),
                _ => bf16::from_f32(y).to_le_bytes().to_vec(),
            }
        })
        .collect()
}

fn st_dtype(dtype: &str) -> Dtype {
    match dtype {
        "f32" => Dtype::F32,
        "f16" => Dtype::F16,
        _ => Dtype::BF16,
    }
}

/// Runs `dq convert` into a fresh folder; returns the output's bytes.
fn convert_ok(input: &Path, extra: &[&str]) -> (Vec<u8>, Output) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.safetensors");
    let mut args = vec!["convert", s(input), s(&out)];
    args.extend(extra);
    let o = dq(&args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    let entries: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(entries.len(), 1, "only the output is left: {entries:?}");
    (fs::read(&out).unwrap(), o)
}

/// Runs a `dq convert` that must fail: exit 2, one line naming `what`, and the
/// output folder exactly as before (an existing output untouched).
fn convert_fails(input: &Path, extra: &[&str], what: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    for existing in [false, true] {
        let out = dir.path().join("out.safetensors");
        if existing {
            fs::write(&out, b"old contents").unwrap();
        }
        let mut args = vec!["convert", s(input), s(&out)];
        args.extend(extra);
        let o = dq(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("dq: error: "), "{err}");
        for w in what {
            assert!(err.contains(w), "{w:?} in {err}");
        }
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        if existing {
            assert_eq!(names.len(), 1, "{names:?}");
            assert_eq!(fs::read(&out).unwrap(), b"old contents");
            fs::remove_file(&out).unwrap();
        } else {
            assert!(names.is_empty(), "nothing written: {names:?}");
        }
    }
}

// ---------------------------------------------------------------------------
// GGUF.

/// The supported tensors of a GGUF fixture: name -> (row-major shape, expected bits),
/// from the expected-output folder and the fixture README's naming.
fn gguf_expected(stem: &str) -> BTreeMap<String, Vec<u32>> {
    let dir = fixtures().join("gguf").join(stem);
    fs::read_dir(&dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let name = p.file_stem().unwrap().to_str().unwrap().to_owned();
            (name, f32_bits(&p))
        })
        .collect()
}

/// Checks a converted GGUF fixture: exactly the expected tensors, each of its
/// row-major shape (`ne` reversed, as the reader lists it), dtype and bits.
fn check_gguf(bytes: &[u8], stem: &str, dtype: &str) {
    let st = SafeTensors::deserialize(bytes).unwrap();
    let want = gguf_expected(stem);
    let got: BTreeSet<String> = st.names().into_iter().map(str::to_owned).collect();
    assert_eq!(got, want.keys().cloned().collect(), "{stem} {dtype}");
    let file = dq::formats::gguf::Gguf::open(fixtures().join(format!("gguf/{stem}.gguf"))).unwrap();
    for (name, bits) in &want {
        let t = st.tensor(name).unwrap();
        let info = file.tensor(name).unwrap();
        let mut ne: Vec<usize> = info.ne().iter().map(|&d| d as usize).collect();
        ne.reverse();
        assert_eq!(t.shape(), ne.as_slice(), "{stem} {name}");
        assert_eq!(t.shape().iter().product::<usize>(), bits.len(), "{name}");
        assert_eq!(t.dtype(), st_dtype(dtype), "{stem} {name}");
        assert!(
            t.data() == expected_bytes(bits, dtype).as_slice(),
            "{stem} {name} {dtype}: bits differ from gguf-py"
        );
    }
}

#[test]
fn gguf_convert_writes_every_tensor_bit_exact_at_each_dtype() {
    let blocks = fixtures().join("gguf/blocks.gguf");
    for dtype in ["f32", "f16", "bf16"] {
        let (bytes, o) = convert_ok(&blocks, &["--dtype", dtype, "--skip-unsupported"]);
        check_gguf(&bytes, "blocks", dtype);
        // The generated backend runs every block type's declaration: the same bits.
        let gen_args = [
            "--dtype",
            dtype,
            "--skip-unsupported",
            "--backend",
            "generated",
        ];
        check_gguf(&convert_ok(&blocks, &gen_args).0, "blocks", dtype);
        // So does the JIT: one kernel per block type (14), reused by the other 42
        // tensors.
        if cfg!(feature = "jit") {
            let jit_args = ["--dtype", dtype, "--skip-unsupported", "--backend", "jit"];
            let (jit, jo) = convert_ok(&blocks, &jit_args);
            check_gguf(&jit, "blocks", dtype);
            let summary = String::from_utf8(jo.stdout).unwrap();
            assert!(
                summary.contains("backend jit, ")
                    && summary.contains("JIT kernels 16 compiled / 42 reused"),
                "{summary}"
            );
        }
        // Every tensor of blocks.gguf is of a supported type now (its
        // `*.unsupported` tensors kept their names): nothing is skipped.
        let summary = String::from_utf8(o.stdout).unwrap();
        assert!(summary.contains("58 tensors"), "{summary}");
        assert!(!summary.contains("skipped"), "{summary}");
    }
    // Default dtype f32; a version-2 file without unsupported tensors needs no flag.
    let v2 = fixtures().join("gguf/quantized_v2.gguf");
    let (bytes, _) = convert_ok(&v2, &[]);
    check_gguf(&bytes, "quantized_v2", "f32");
    let (bytes, _) = convert_ok(&v2, &["--dtype", "bf16", "--backend", "reference"]);
    check_gguf(&bytes, "quantized_v2", "bf16");
}

/// The table-indexed and newer block types (IQ4_NL, IQ4_XS, TQ2_0, Q8_K, NVFP4,
/// the IQ2 types; the IQ3 and IQ1 types, Q8_1 and Q1_0; Q2_0): `dq convert` on each
/// backend and `dq model --verify`, bit-exact with their reference at each dtype.
#[test]
fn gguf_convert_table_types_bit_exact() {
    for stem in ["tables", "low_bit", "q2_0"] {
        convert_table_fixture(stem);
    }
}

fn convert_table_fixture(stem: &str) {
    let tables = fixtures().join(format!("gguf/{stem}.gguf"));
    let mut backends = vec!["auto", "generated", "reference"];
    if cfg!(feature = "jit") {
        backends.push("jit");
    }
    for dtype in ["f32", "f16", "bf16"] {
        for backend in &backends {
            let (bytes, _) = convert_ok(&tables, &["--dtype", dtype, "--backend", backend]);
            check_gguf(&bytes, stem, dtype);
        }
    }
    let verify = backends[1..].join(",");
    let o = dq(&["model", s(&tables), "--backend", &verify, "--verify"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("verified: every tensor"), "{text}");
}

#[test]
fn thread_counts_write_identical_files() {
    let blocks = fixtures().join("gguf/blocks.gguf");
    let hf = fixtures().join("hf/gptq-v2-4bit-g64-actorder");
    for (input, skip) in [(&blocks, "--skip-unsupported"), (&hf, "--backend=auto")] {
        for dtype in ["f32", "f16"] {
            let one = convert_ok(input, &["--threads", "1", "--dtype", dtype, skip]).0;
            let three = convert_ok(input, &["--threads", "3", "--dtype", dtype, skip]).0;
            assert!(one == three, "{} {dtype}", input.display());
        }
    }
}

/// A GGUF in `dir` with a Q8_0 tensor and an I8 one (a type dq does not decode).
fn with_unsupported(dir: &Path) -> PathBuf {
    use crate::files::{Q8_0, Tensor, gguf};
    let mut q8 = vec![0x00, 0x3C];
    q8.extend(0..32u8);
    let tensors = [
        Tensor::new("q", &[32], Q8_0, q8),
        Tensor::new("i8.unsupported", &[8], 24, vec![1; 8]),
    ];
    let path = dir.join("unsupported.gguf");
    fs::write(&path, gguf(&[], &tensors)).unwrap();
    path
}

#[test]
fn failures_leave_no_output() {
    let blocks = fixtures().join("gguf/blocks.gguf");
    let tmp = tempfile::tempdir().unwrap();
    let unsupported = with_unsupported(tmp.path());
    // An unsupported type without --skip-unsupported names the tensor and type.
    convert_fails(
        &unsupported,
        &[],
        &["i8.unsupported", "I8", "--skip-unsupported"],
    );
    // The JIT runs every supported block type; an unsupported one still fails
    // before anything is compiled or written.
    if cfg!(feature = "jit") {
        convert_fails(
            &unsupported,
            &["--backend", "jit"],
            &["i8.unsupported", "I8", "--skip-unsupported"],
        );
    }
    convert_fails(&blocks, &["--threads", "0"], &["--threads"]);
    // A truncated file.
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("cut.gguf");
    fs::write(&cut, &fs::read(&blocks).unwrap()[..20_000]).unwrap();
    convert_fails(&cut, &["--skip-unsupported"], &[s(&cut)]);
    // A missing input and a checkpoint of an unsupported bit width.
    convert_fails(&dir.path().join("missing.gguf"), &[], &["missing.gguf"]);
    convert_fails(&fixtures().join("hf/gptq-3bit"), &[], &["gptq-3bit"]);
    // An output folder that does not exist.
    let out = dir.path().join("no/such/dir/out.safetensors");
    let o = dq(&["convert", s(&blocks), s(&out), "--skip-unsupported"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
    assert!(stderr(&o).contains("no/such/dir"), "{}", stderr(&o));
    assert!(!dir.path().join("no").exists());
    // An output that is a folder.
    let o = dq(&["convert", s(&blocks), s(dir.path()), "--skip-unsupported"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("is a directory"), "{}", stderr(&o));
}

// ---------------------------------------------------------------------------
// HuggingFace checkpoints.

/// Every fixture checkpoint dq reads, with its default output dtype: config.json's
/// `torch_dtype`, else (a single file) its scales' dtype.
const HF: &[(&str, &str)] = &[
    ("gptq-v1-4bit-g64-asym", "f16"),
    ("gptq-v1-4bit-perchannel-sym", "f16"),
    ("gptq-v1-4bit-g16-actorder-bf16", "bf16"),
    ("gptq-v1-8bit-g32-asym", "f16"),
    ("gptq-v2-4bit-g64-actorder", "f16"),
    ("gptq-v2-8bit-perchannel-sym", "f16"),
    ("awq-4bit-g32", "f16"),
    ("awq-4bit-g16-sharded", "f16"),
    ("ct-4bit-group-sym", "bf16"),
    ("ct-4bit-channel-asym", "f16"),
    ("ct-8bit-group-asym", "bf16"),
    ("ct-8bit-channel-sym", "f16"),
    ("single-file/gptq-v2.safetensors", "f16"),
    // Padded last words, and the float-weight formats (f32, e8m0, e4m3 scales).
    ("gptq-v2-4bit-g32-n100", "f16"),
    ("gptq-v1-4bit-g16-actorder-n50", "f16"),
    ("gptq-v1-8bit-perchannel-n10", "f16"),
    ("awq-4bit-g16-n40", "f16"),
    ("fp8-block128-f32", "bf16"),
    ("fp8-block16x32-bf16", "bf16"),
    ("fp8-block32-e8m0", "bf16"),
    ("ct-fp8-tensor", "bf16"),
    ("ct-fp8-channel", "bf16"),
    ("ct-fp8-group", "bf16"),
    ("ct-fp8-block", "bf16"),
    ("ct-nvfp4", "bf16"),
    ("modelopt-nvfp4", "bf16"),
];

/// The input's tensors, read with the safetensors crate: name -> (dtype, shape, bytes).
fn hf_inputs(path: &Path) -> BTreeMap<String, (Dtype, Vec<usize>, Vec<u8>)> {
    let files: Vec<PathBuf> = if path.is_dir() {
        fs::read_dir(path)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "safetensors"))
            .collect()
    } else {
        vec![path.to_owned()]
    };
    let mut all = BTreeMap::new();
    for f in files {
        let bytes = fs::read(&f).unwrap();
        let st = SafeTensors::deserialize(&bytes).unwrap();
        for (name, t) in st.tensors() {
            all.insert(name, (t.dtype(), t.shape().to_vec(), t.data().to_vec()));
        }
    }
    all
}

/// The linears with expected outputs: prefix -> f32 bits of the `[N, K]` weight.
fn hf_expected(path: &Path) -> BTreeMap<String, Vec<u32>> {
    let dir = if path.is_dir() {
        path
    } else {
        path.parent().unwrap()
    };
    fs::read_dir(dir.join("expected"))
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let name = p.file_stem().unwrap().to_str().unwrap().to_owned();
            (name, f32_bits(&p))
        })
        .collect()
}

/// An input float tensor's values, as f32.
fn floats(dtype: Dtype, b: &[u8]) -> Vec<u32> {
    match dtype {
        Dtype::F16 => b
            .chunks_exact(2)
            .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32().to_bits())
            .collect(),
        Dtype::BF16 => b
            .chunks_exact(2)
            .map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f32().to_bits())
            .collect(),
        _ => b
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect(),
    }
}

/// Checks a converted checkpoint: `P.weight` `[N, K]` for each linear with the
/// reference implementations' bits; every other input tensor under its name, floats
/// converted to `dtype`, the rest copied byte for byte; nothing else.
fn check_hf(bytes: &[u8], path: &Path, dtype: &str) {
    let st = SafeTensors::deserialize(bytes).unwrap();
    let inputs = hf_inputs(path);
    let linears = hf_expected(path);
    // The tensors a quantized linear consists of (GPTQ/AWQ, compressed-tensors).
    let fields = [
        "qweight",
        "qzeros",
        "scales",
        "g_idx",
        "weight_packed",
        "weight_scale",
        "weight_zero_point",
        "weight_shape",
        "weight_g_idx",
        "weight",
        "weight_scale_inv",
        "weight_global_scale",
        "weight_scale_2",
    ];
    let member = |name: &str| {
        linears.keys().any(|p| {
            name.strip_prefix(p.as_str())
                .and_then(|r| r.strip_prefix('.'))
                .is_some_and(|f| fields.contains(&f))
        })
    };
    let others: Vec<&String> = inputs.keys().filter(|n| !member(n)).collect();
    let mut want: BTreeSet<String> = linears.keys().map(|p| format!("{p}.weight")).collect();
    want.extend(others.iter().map(|n| (*n).clone()));
    let got: BTreeSet<String> = st.names().into_iter().map(str::to_owned).collect();
    let what = format!("{} {dtype}", path.display());
    assert_eq!(got, want, "{what}");
    for (prefix, bits) in &linears {
        let t = st.tensor(&format!("{prefix}.weight")).unwrap();
        assert_eq!(t.dtype(), st_dtype(dtype), "{what} {prefix}");
        let (n, k) = (t.shape()[0], t.shape()[1]);
        assert_eq!((t.shape().len(), n * k), (2, bits.len()), "{what} {prefix}");
        assert!(
            t.data() == expected_bytes(bits, dtype).as_slice(),
            "{what} {prefix}: bits differ from the reference implementation"
        );
    }
    for name in others {
        let (in_dtype, shape, data) = &inputs[name];
        let t = st.tensor(name).unwrap();
        assert_eq!(t.shape(), shape.as_slice(), "{what} {name}");
        if matches!(in_dtype, Dtype::F16 | Dtype::BF16 | Dtype::F32) {
            assert_eq!(t.dtype(), st_dtype(dtype), "{what} {name}");
            let want = expected_bytes(&floats(*in_dtype, data), dtype);
            assert!(t.data() == want.as_slice(), "{what} {name}");
        } else {
            assert_eq!(t.dtype(), *in_dtype, "{what} {name}");
            assert!(t.data() == data.as_slice(), "{what} {name} copied");
        }
    }
}

#[test]
fn hf_convert_writes_every_linear_and_tensor() {
    for &(case, default) in HF {
        let path = fixtures().join("hf").join(case);
        let (bytes, o) = convert_ok(&path, &["--threads", "2"]);
        check_hf(&bytes, &path, default);
        let summary = String::from_utf8(o.stdout).unwrap();
        assert!(summary.starts_with("wrote "), "{summary}");
        for dtype in ["f32", "bf16", "f16"] {
            let (bytes, _) = convert_ok(&path, &["--dtype", dtype]);
            check_hf(&bytes, &path, dtype);
        }
    }
}

#[test]
#[cfg(feature = "jit")]
fn hf_convert_runs_the_jit() {
    for &(case, default) in HF {
        let path = fixtures().join("hf").join(case);
        let (bytes, o) = convert_ok(&path, &["--backend", "jit", "--threads", "3"]);
        check_hf(&bytes, &path, default);
        // A fresh process: each linear shape compiled once, for its first linear.
        let summary = String::from_utf8_lossy(&o.stdout).into_owned();
        let counts = summary.split("JIT kernels ").nth(1).unwrap_or("");
        let n: Vec<usize> = counts
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|w| w.parse().ok())
            .collect();
        // Float weights (FP8, NVFP4) run elementwise plans, whose kernels the summary's
        // linear-kernel counts do not include.
        let float = ["fp8-", "ct-fp8-", "ct-nvfp4", "modelopt-"]
            .iter()
            .any(|p| case.starts_with(p));
        assert!(n.len() >= 2 && (float || n[0] >= 1), "{case}: {summary}");
        for dtype in ["f32", "bf16", "f16"] {
            let (bytes, _) = convert_ok(&path, &["--backend", "jit", "--dtype", dtype]);
            check_hf(&bytes, &path, dtype);
        }
    }
}

// ---------------------------------------------------------------------------
// inspect and model on checkpoints.

#[test]
fn inspect_lists_quantized_linears() {
    let path = fixtures().join("hf/gptq-v1-4bit-g64-asym");
    let o = dq(&["inspect", s(&path)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    let row = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} in {text}"))
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect::<Vec<_>>()
            .join("|")
    };
    assert_eq!(
        row("model.layers.0.mlp.up_proj"),
        "model.layers.0.mlp.up_proj|GPTQ v1 4-bit|4|64|F16 [G, N]|[32, 96]"
    );
    assert_eq!(row("model.norm.weight"), "model.norm.weight|BF16|[8]|16");
    assert!(
        text.contains("2 quantized linear(s), 5 other tensor(s)"),
        "{text}"
    );

    let path = fixtures().join("hf/gptq-v2-4bit-g64-actorder");
    let o = dq(&["inspect", s(&path), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["format"], "gptq");
    let up = v["linears"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == "model.layers.0.mlp.up_proj")
        .unwrap();
    assert_eq!(up["scheme"], "GPTQ v2 4-bit");
    assert_eq!(up["bits"], 4);
    assert_eq!(up["act_order"], true);
    assert_eq!(up["groups"], 2);
    assert_eq!(up["shape"], serde_json::json!([32, 96]));

    // Float weights: format, scheme and scale layout.
    for (case, want) in [
        (
            "fp8-block128-f32",
            "FP8 e4m3|8|128|F32 per 128x128 block|[130, 136]",
        ),
        (
            "ct-fp8-channel",
            "compressed-tensors FP8 e4m3|8|channel|F32 per channel|[20, 36]",
        ),
        (
            "ct-nvfp4",
            "compressed-tensors NVFP4|4|16|F8_E4M3 per 16 inputs / global",
        ),
        (
            "modelopt-nvfp4",
            "ModelOpt NVFP4|4|16|F8_E4M3 per 16 inputs x global",
        ),
    ] {
        let o = dq(&["inspect", s(&fixtures().join("hf").join(case))]);
        assert!(o.status.success(), "{}", stderr(&o));
        let text = String::from_utf8(o.stdout).unwrap();
        let line = text
            .lines()
            .find(|l| l.starts_with("model.layers.0.mlp.up_proj"))
            .unwrap_or_else(|| panic!("{case}: {text}"));
        let cells: Vec<&str> = line
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        assert!(cells[1..].join("|").starts_with(want), "{case}: {line}");
    }

    // The per-channel case and a single file.
    let o = dq(&["inspect", s(&fixtures().join("hf/ct-8bit-channel-sym"))]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains("compressed-tensors 8-bit  8     channel"),
        "{text}"
    );
    let single = fixtures().join("hf/single-file/gptq-v2.safetensors");
    let o = dq(&["inspect", s(&single), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["linears"][0]["shape"], serde_json::json!([32, 64]));

    // A bad checkpoint: one line, exit 2.
    let o = dq(&["inspect", s(&fixtures().join("hf/gptq-2bit"))]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
    assert!(stderr(&o).contains("gptq-2bit"), "{}", stderr(&o));
}

#[test]
fn model_runs_every_tensor_of_a_file_and_verifies() {
    let sharded = fixtures().join("hf/awq-4bit-g16-sharded");
    let o = dq(&["model", s(&sharded), "--verify", "--json", "--threads", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["format"], "awq");
    assert_eq!(v["tensors"], 3);
    assert_eq!(v["elements"], 32 * 48 + 32 * 32 + 64 * 16);
    assert_eq!(v["dst_bytes"], 4 * (32 * 48 + 32 * 32 + 64 * 16));
    assert_eq!(v["verified"], true);
    let row = |b: &str| {
        v["backends"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["backend"] == b)
            .unwrap()
            .clone()
    };
    assert_eq!(
        (row("reference")["ran"].clone(), row("auto")["ran"].clone()),
        (3.into(), 3.into())
    );
    if cfg!(feature = "jit") {
        assert_eq!(
            (row("jit")["ran"].clone(), row("jit")["cannot_run"].clone()),
            (3.into(), 0.into())
        );
    }

    let blocks = fixtures().join("gguf/blocks.gguf");
    let backends = if cfg!(feature = "jit") {
        "reference,generated,jit"
    } else {
        "reference,generated"
    };
    let o = dq(&["model", s(&blocks), "--backend", backends, "--verify"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("58 tensors to dequantize"), "{text}");
    assert!(text.contains("verified: every tensor"), "{text}");
    let row = |b: &str| {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{b} ")))
            .unwrap();
        line.split_whitespace()
            .map(str::to_owned)
            .collect::<Vec<_>>()[..3]
            .to_vec()
    };
    assert_eq!(row("generated"), ["generated", "58/58", "0"]);
    if cfg!(feature = "jit") {
        assert_eq!(row("jit"), ["jit", "58/58", "0"]);
    }

    // The synthetic preset flags do not apply to a file.
    let o = dq(&["model", s(&blocks), "--preset", "tiny"]);
    assert_eq!(o.status.code(), Some(2));
}

// ---------------------------------------------------------------------------
// The library entry points under the CLI.

#[test]
fn library_dequantize_is_exact_for_any_thread_count() {
    use dq::formats::gguf::{Gguf, GgufError};
    use dq::formats::hf::{Checkpoint, HfError};
    use dq::{Backend, Options};
    let opts = |backend, threads| Options::new().with_backend(backend).with_threads(threads);

    let file = Gguf::open(fixtures().join("gguf/blocks.gguf")).unwrap();
    for (name, bits) in gguf_expected("blocks") {
        let t = file.tensor(&name).unwrap();
        for threads in [0, 1, 2, 3, 5] {
            let backends = [Backend::Reference, Backend::Auto, Backend::Jit];
            for backend in backends.into_iter().filter(|b| support::in_build(b.name())) {
                let mut out = vec![0f32; bits.len()];
                file.dequantize(t, &mut out, &opts(backend, threads))
                    .unwrap();
                let got: Vec<u32> = out.iter().map(|y| y.to_bits()).collect();
                assert_eq!(got, bits, "{name} {backend} {threads} threads");
            }
            let mut out = vec![f16::ZERO; bits.len()];
            file.dequantize(t, &mut out, &opts(Backend::Auto, threads))
                .unwrap();
            let got: Vec<u8> = out.iter().flat_map(|y| y.to_le_bytes()).collect();
            assert_eq!(
                got,
                expected_bytes(&bits, "f16"),
                "{name} f16 {threads} threads"
            );
        }
        let mut short = vec![0f32; bits.len() - 1];
        let err = file.dequantize(t, &mut short, &opts(Backend::Auto, 1));
        assert!(
            matches!(err, Err(GgufError::OutputLength { ref name, .. }) if name == t.name()),
            "{err:?}"
        );
        if cfg!(feature = "jit") {
            let mut out = vec![bf16::ZERO; bits.len()];
            file.dequantize(t, &mut out, &opts(Backend::Jit, 2))
                .unwrap();
            let got: Vec<u8> = out.iter().flat_map(|y| y.to_le_bytes()).collect();
            assert_eq!(got, expected_bytes(&bits, "bf16"), "{name} jit bf16");
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let unsupported = Gguf::open(with_unsupported(tmp.path())).unwrap();
    let t = unsupported.tensor("i8.unsupported").unwrap();
    let err = unsupported.dequantize(t, &mut [0f32; 8][..], &opts(Backend::Auto, 1));
    assert!(
        matches!(err, Err(GgufError::UnsupportedType { .. })),
        "{err:?}"
    );

    let path = fixtures().join("hf/gptq-v1-4bit-g16-actorder-bf16");
    let ckpt = Checkpoint::open(&path).unwrap();
    for (prefix, bits) in hf_expected(&path) {
        let l = ckpt.linear(&prefix).unwrap();
        for threads in [1, 3, 7, 100] {
            let mut out = vec![0f32; bits.len()];
            l.dequantize(&mut out, &opts(Backend::Auto, threads))
                .unwrap();
            let got: Vec<u32> = out.iter().map(|y| y.to_bits()).collect();
            assert_eq!(got, bits, "{prefix} {threads} threads");
            let mut out = vec![bf16::ZERO; bits.len()];
            l.dequantize(&mut out, &opts(Backend::Reference, threads))
                .unwrap();
            let got: Vec<u8> = out.iter().flat_map(|y| y.to_le_bytes()).collect();
            assert_eq!(
                got,
                expected_bytes(&bits, "bf16"),
                "{prefix} bf16 {threads} threads"
            );
        }
        let mut long = vec![0f32; bits.len() + 1];
        let err = l.dequantize(&mut long, &opts(Backend::Auto, 1));
        assert!(matches!(err, Err(HfError::OutputLength { .. })), "{err:?}");
        for threads in [1, 2, 3].into_iter().filter(|_| cfg!(feature = "jit")) {
            let mut out = vec![0f32; bits.len()];
            l.dequantize(&mut out, &opts(Backend::Jit, threads))
                .unwrap();
            let got: Vec<u32> = out.iter().map(|y| y.to_bits()).collect();
            assert_eq!(got, bits, "{prefix} jit {threads} threads");
        }
    }
}
