//! The files beside the weights: `config.json` without its quantization, and the
//! other files of a HuggingFace input folder (tokenizer, generation config, chat
//! templates, README...), copied as they are.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// `config.json` keys that only describe the quantization of the input.
const QUANT_KEYS: &[&str] = &["quantization_config", "compression_config"];

/// Input files never copied: the weights (written anew) and quantization-only
/// configs (`quantize_config.json` of AutoGPTQ, `quant_config.json` of AutoAWQ).
fn is_weights_or_quant(name: &str) -> bool {
    const WEIGHTS: &[&str] = &[".safetensors", ".bin", ".pt", ".pth", ".gguf", ".ckpt"];
    WEIGHTS.iter().any(|e| name.ends_with(e))
        || name.ends_with(".index.json")
        || matches!(
            name,
            "config.json" | "quantize_config.json" | "quant_config.json"
        )
}

/// The torch dtype name of an output dtype (`float32`, `float16`, `bfloat16`).
pub fn torch_dtype(dtype: &str) -> &'static str {
    match dtype {
        "f16" => "float16",
        "bf16" => "bfloat16",
        _ => "float32",
    }
}

/// The input's `config.json` with the quantization keys removed and the dtype set:
/// `dtype` where the input names it so (transformers >= 4.56), `torch_dtype`
/// otherwise (every version reads it).
pub fn rewrite(mut config: Value, torch_dtype: &str) -> Value {
    if let Value::Object(map) = &mut config {
        for key in QUANT_KEYS {
            map.remove(*key);
        }
        let key = if map.contains_key("dtype") {
            "dtype"
        } else {
            "torch_dtype"
        };
        map.insert(key.to_owned(), Value::String(torch_dtype.to_owned()));
    }
    config
}

/// A JSON value as `save_pretrained` writes it: indent 2, a final newline.
pub fn to_bytes(v: &Value) -> Vec<u8> {
    let mut text = serde_json::to_string_pretty(v).unwrap_or_default();
    text.push('\n');
    text.into_bytes()
}

/// The regular files of `dir` to copy into the output (sorted): every one but the
/// weights, their index, `config.json` and quantization configs; hidden files and
/// subfolders are left out.
///
/// # Errors
/// The folder cannot be listed.
pub fn companions(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        // Symlinks are followed (the HuggingFace cache links every file).
        let is_file = std::fs::metadata(entry.path()).is_ok_and(|m| m.is_file());
        if is_file && !name.starts_with('.') && !is_weights_or_quant(name) {
            out.push(entry.path());
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_loses_its_quantization_and_gets_the_dtype() {
        let input = serde_json::json!({
            "model_type": "llama",
            "quantization_config": {"bits": 4},
            "torch_dtype": "float16",
            "hidden_size": 8,
        });
        let out = rewrite(input, "bfloat16");
        assert_eq!(
            out,
            serde_json::json!({"model_type": "llama", "torch_dtype": "bfloat16", "hidden_size": 8})
        );
        let new_style = rewrite(serde_json::json!({"dtype": "float16"}), "float32");
        assert_eq!(new_style, serde_json::json!({"dtype": "float32"}));
    }

    #[test]
    fn weights_and_quant_configs_are_not_companions() {
        let dir = tempfile::tempdir().unwrap();
        let names = [
            "model.safetensors",
            "model-00001-of-00002.safetensors",
            "model.safetensors.index.json",
            "pytorch_model.bin",
            "config.json",
            "quantize_config.json",
            ".gitattributes",
            "tokenizer.json",
            "tokenizer.model",
            "generation_config.json",
            "chat_template.jinja",
            "README.md",
            "merges.txt",
        ];
        for n in names {
            std::fs::write(dir.path().join(n), b"x").unwrap();
        }
        std::fs::create_dir(dir.path().join("original")).unwrap();
        let got: Vec<String> = companions(dir.path())
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            got,
            [
                "README.md",
                "chat_template.jinja",
                "generation_config.json",
                "merges.txt",
                "tokenizer.json",
                "tokenizer.model"
            ]
        );
    }
}
