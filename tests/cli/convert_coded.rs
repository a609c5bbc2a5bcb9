//! `dq inspect`, `dq convert` and `dq model` on bitsandbytes, MLX and gpt-oss MXFP4
//! checkpoints: names, schemes and scale layouts listed; every output tensor bit-exact
//! with the library's values; a backend that cannot run them fails cleanly.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use half::{bf16, f16};
use safetensors::SafeTensors;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hf")
        .join(name)
}

fn dq(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dq"))
        .env("DQ_TUNING", "off")
        .args(args)
        .output()
        .expect("running the dq binary")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `(name, shape)` of each fixture's outputs with an expected file.
fn expected(dir: &Path) -> Vec<(String, Vec<u32>)> {
    let mut v: Vec<(String, Vec<u32>)> = fs::read_dir(dir.join("expected"))
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let name = p.file_stem().unwrap().to_str().unwrap().to_owned();
            let bits = fs::read(&p)
                .unwrap()
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            (name, bits)
        })
        .collect();
    v.sort();
    v
}

#[test]
fn convert_writes_each_family_bit_exact() {
    let cases = [
        ("bnb-nf4-double", &["model.layers.0.mlp.up_proj.weight"][..]),
        ("bnb-fp4", &["model.layers.0.mlp.up_proj.weight"][..]),
        ("bnb-int8", &["model.layers.0.mlp.down_proj.weight"][..]),
        (
            "mlx-3bit-g32-bf16",
            &["model.layers.0.mlp.up_proj.weight"][..],
        ),
        (
            "mxfp4-gpt-oss",
            &["model.layers.0.mlp.experts.gate_up_proj"][..],
        ),
    ];
    let backends: &[&str] = if cfg!(feature = "jit") {
        &["auto", "jit"]
    } else {
        &["auto"]
    };
    for ((case, names), backend) in cases
        .into_iter()
        .flat_map(|c| backends.iter().map(move |&b| (c, b)))
    {
        let dir = fixture(case);
        for dtype in ["f32", "bf16", "f16"] {
            let tmp = tempfile::tempdir().unwrap();
            let out = tmp.path().join("out.safetensors");
            let o = dq(&[
                "convert",
                dir.to_str().unwrap(),
                out.to_str().unwrap(),
                "--dtype",
                dtype,
                "--threads",
                "2",
                "--backend",
                backend,
            ]);
            assert!(
                o.status.success(),
                "{case} {dtype} {backend}: {}",
                stderr(&o)
            );
            let bytes = fs::read(&out).unwrap();
            let st = SafeTensors::deserialize(&bytes).unwrap();
            let mut listed: Vec<String> = st.names().into_iter().map(str::to_owned).collect();
            listed.sort();
            // Quant states, absmax, SCB, scales, biases and _scales are not copied.
            for n in &listed {
                let aux = [
                    "absmax",
                    "quant_map",
                    "quant_state",
                    "SCB",
                    "weight_format",
                    ".scales",
                    ".biases",
                    "_scales",
                    "_blocks",
                ];
                assert!(!aux.iter().any(|a| n.contains(a)), "{case}: {n} copied");
            }
            for (name, want) in expected(&dir) {
                let t = st
                    .tensor(&name)
                    .unwrap_or_else(|_| panic!("{case}: {name} in {listed:?}"));
                let got: Vec<u32> = match dtype {
                    "f32" => t
                        .data()
                        .chunks_exact(4)
                        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
                        .collect(),
                    _ => t
                        .data()
                        .chunks_exact(2)
                        .map(|c| u32::from(u16::from_le_bytes([c[0], c[1]])))
                        .collect(),
                };
                let want: Vec<u32> = want
                    .iter()
                    .map(|&b| match dtype {
                        "f32" => b,
                        "f16" => u32::from(f16::from_f32(f32::from_bits(b)).to_bits()),
                        _ => u32::from(bf16::from_f32(f32::from_bits(b)).to_bits()),
                    })
                    .collect();
                assert!(got == want, "{case} {dtype} {backend}: {name} differs");
                assert_eq!(
                    t.shape().iter().product::<usize>(),
                    want.len(),
                    "{case}: {name}"
                );
            }
            for n in names {
                assert!(
                    listed.contains(&(*n).to_owned()),
                    "{case}: {n} in {listed:?}"
                );
            }
        }
    }
    // gpt-oss' experts in transformers' orientation [E, K, N].
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("o.safetensors");
    let o = dq(&[
        "convert",
        fixture("mxfp4-gpt-oss").to_str().unwrap(),
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let bytes = fs::read(&out).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    assert_eq!(
        st.tensor("model.layers.0.mlp.experts.down_proj")
            .unwrap()
            .shape(),
        [2, 96, 64]
    );
    assert!(
        st.tensor("model.layers.0.mlp.experts.down_proj_bias")
            .is_ok()
    );
}

#[test]
fn inspect_names_scheme_and_scale_layout() {
    let rows = [
        (
            "bnb-nf4",
            "bitsandbytes NF4",
            "absmax f32 per 64 of the flat weight",
        ),
        (
            "bnb-fp4-double",
            "bitsandbytes FP4 double-quant",
            "absmax u8 per 64 of the flat weight, nested f32",
        ),
        (
            "bnb-int8",
            "bitsandbytes LLM.int8",
            "SCB f32 per row, / 127",
        ),
        (
            "mlx-6bit-g64",
            "MLX affine 6-bit",
            "scales + biases f16 per 64",
        ),
        ("mxfp4-gpt-oss", "MXFP4", "e8m0 per 32"),
    ];
    for (case, scheme, scales) in rows {
        let o = dq(&["inspect", fixture(case).to_str().unwrap(), "--json"]);
        assert!(o.status.success(), "{case}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let l = &v["linears"][0];
        assert_eq!(l["scheme"], scheme, "{case}");
        assert_eq!(l["scale_layout"], scales, "{case}");
        let o = dq(&["inspect", fixture(case).to_str().unwrap()]);
        let text = String::from_utf8(o.stdout).unwrap();
        assert!(
            text.contains(scheme) && text.contains(scales),
            "{case}: {text}"
        );
    }
    let o = dq(&[
        "inspect",
        fixture("mxfp4-gpt-oss").to_str().unwrap(),
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["format"], "mxfp4");
    let down = v["linears"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["weight"] == "model.layers.0.mlp.experts.down_proj")
        .unwrap();
    assert_eq!(down["shape"], serde_json::json!([2, 96, 64]));
}

/// Without `--dtype`, a checkpoint converts to its own dtype (config.json's
/// `torch_dtype`), else to its scales' where they are 16-bit, else bf16.
#[test]
fn convert_defaults_to_the_models_dtype() {
    let cases = [
        ("bnb-nf4", "model.layers.0.mlp.up_proj.weight", "F32"),
        ("bnb-int8", "model.layers.0.mlp.up_proj.weight", "F16"),
        (
            "mxfp4-gpt-oss",
            "model.layers.0.mlp.experts.down_proj",
            "BF16",
        ),
        // MLX writes no torch_dtype: its scales' dtype.
        ("mlx-4bit-g64", "model.layers.0.mlp.up_proj.weight", "F16"),
        (
            "mlx-3bit-g32-bf16",
            "model.layers.0.mlp.up_proj.weight",
            "BF16",
        ),
        // e8m0 scales, torch_dtype bfloat16.
        (
            "fp8-block32-e8m0",
            "model.layers.0.mlp.up_proj.weight",
            "BF16",
        ),
    ];
    for (case, name, want) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out.safetensors");
        let o = dq(&[
            "convert",
            fixture(case).to_str().unwrap(),
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{case}: {}", stderr(&o));
        let bytes = fs::read(&out).unwrap();
        let st = SafeTensors::deserialize(&bytes).unwrap();
        let t = st.tensor(name).unwrap();
        assert_eq!(format!("{:?}", t.dtype()), want, "{case}");
    }
}

#[test]
fn model_runs_and_verifies_coded_checkpoints() {
    for case in ["bnb-nf4-double", "mlx-4bit-g64", "mxfp4-gpt-oss"] {
        let o = dq(&[
            "model",
            fixture(case).to_str().unwrap(),
            "--verify",
            "--backend",
            if cfg!(feature = "jit") {
                "generated,jit"
            } else {
                "generated"
            },
            "--threads",
            "2",
        ]);
        assert!(o.status.success(), "{case}: {}", stderr(&o));
    }
}
