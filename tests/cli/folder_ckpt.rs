//! `dq convert CHECKPOINT OUT_DIR` for a tiny FP8 block-scaled and a tiny GPTQ
//! checkpoint against what transformers 5.24 loads from them on CPU
//! (`scripts/folder_ckpt.py`, run by `scripts/make_folder_fixtures.py`): tensor
//! names, dtypes, shapes and FNV-1a 64 hashes of their bytes, the config, the files
//! beside the weights; and the script's loading check (check.json).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use safetensors::SafeTensors;
use serde_json::Value;

fn folder() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/folder")
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&fs::read(path).unwrap()).unwrap()
}

/// FNV-1a 64 (the script's `fnv1a64`).
fn fnv1a64(data: &[u8]) -> String {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for &b in data {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01B3);
    }
    format!("{h:016x}")
}

/// The checkpoints and the dtype each is converted to (the one transformers
/// dequantizes it in: FP8 into the model's f32, GPTQ in its scales' f16).
const CHECKPOINTS: [(&str, &str, &str); 2] =
    [("fp8", "f32", "float32"), ("gptq", "f16", "float16")];

fn converted(name: &str, dtype: &str, out: &Path) {
    let input = folder().join(name);
    let o = Command::new(env!("CARGO_BIN_EXE_dq"))
        .env("DQ_TUNING", "off")
        .args(["convert", input.to_str().unwrap(), out.to_str().unwrap()])
        .args(["--dtype", dtype])
        .output()
        .expect("running the dq binary");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn fnv_is_the_scripts() {
    assert_eq!(fnv1a64(b""), "cbf29ce484222325");
    assert_eq!(fnv1a64(b"a"), "af63dc4c8601ec8c");
}

#[test]
fn a_quantized_checkpoint_folder_holds_what_transformers_loads() {
    let dir = tempfile::tempdir().unwrap();
    for (name, dtype, torch) in CHECKPOINTS {
        let out = dir.path().join(name);
        converted(name, dtype, &out);
        let want = json(&folder().join(format!("{name}.expected.json")));
        let mut files: Vec<String> = fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        files.sort();
        assert_eq!(
            files,
            [
                "config.json",
                "generation_config.json",
                "model.safetensors",
                "tokenizer.json",
                "tokenizer_config.json"
            ],
            "{name}"
        );
        // The config transformers' model carries, less the quantization.
        assert_eq!(json(&out.join("config.json")), want["config"], "{name}");
        let bytes = fs::read(out.join("model.safetensors")).unwrap();
        let st = SafeTensors::deserialize(&bytes).unwrap();
        let tensors = want["tensors"].as_object().unwrap();
        let mut got: Vec<String> = st.names().into_iter().map(str::to_owned).collect();
        got.sort();
        let names: Vec<String> = tensors.keys().cloned().collect();
        assert_eq!(
            got, names,
            "{name}: no companions (scales, zeros, g_idx), nothing missing"
        );
        for (t, w) in tensors {
            let view = st.tensor(t).unwrap();
            assert_eq!(w["dtype"], torch, "{name}: {t}");
            assert_eq!(
                format!("{:?}", view.dtype()),
                dtype.to_uppercase(),
                "{name}: {t}"
            );
            let shape: Vec<u64> = view.shape().iter().map(|&d| d as u64).collect();
            assert_eq!(w["shape"], serde_json::json!(shape), "{name}: {t}");
            assert_eq!(w["fnv1a64"], fnv1a64(view.data()), "{name}: {t}: bytes");
        }
        for f in [
            "tokenizer.json",
            "tokenizer_config.json",
            "generation_config.json",
        ] {
            assert_eq!(
                fs::read(out.join(f)).unwrap(),
                fs::read(folder().join(name).join(f)).unwrap(),
                "{name}: {f} copied"
            );
        }
    }
}

#[test]
fn the_recorded_checkpoint_check_passed() {
    // check.json: the fixture script loaded dq's folders in transformers.
    let check = json(&folder().join("check.json"));
    for (name, _, _) in CHECKPOINTS {
        let c = &check[name];
        assert_eq!(c["missing_keys"], serde_json::json!([]), "{name}: {c}");
        assert_eq!(c["unexpected_keys"], serde_json::json!([]), "{name}: {c}");
        assert_eq!(c["weights_equal"], true, "{name}: {c}");
        assert_eq!(c["logits_equal_float_reference"], true, "{name}: {c}");
    }
    // FP8: transformers dequantizes on CPU into a plain model: the same logits.
    assert_eq!(check["fp8"]["logits_equal"], true);
    // GPTQ: gptqmodel's CPU kernel multiplies in its own order (f16 logits within
    // a few ULPs); the weights are its dequantize_weight's bit for bit.
    assert!(check["gptq"]["logits_max_abs_diff"].as_f64().unwrap() < 0.01);
}
