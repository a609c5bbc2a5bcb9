//! GGUF to HuggingFace, as transformers' own GGUF loader does it
//! (`modeling_gguf_pytorch_utils.load_gguf_checkpoint`, `integrations/ggml.py`), which
//! is the reference: the tensor names (gguf-py's name map, reversed), llama.cpp's
//! Q/K row permutation undone for `llama`, the `+1` llama.cpp stores in gemma2/gemma3
//! norms undone, tied embeddings (no `output.weight`: `tie_word_embeddings`), and
//! `config.json` from the metadata keys transformers maps.
//!
//! transformers 5.24 does not load `gemma` (v1) GGUF files; dq maps them as gemma2's
//! keys with llama's two norms, `+1` undone (llama.cpp's `GemmaModel` conversion
//! adds it), checked against the HF model such a file was made from
//! (`scripts/make_folder_fixtures.py`).

use dq::formats::gguf::{Gguf, MetaValue};
use serde_json::{Map, Value};

/// What is done to a tensor's values on the way out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transform {
    /// Written as decoded.
    None,
    /// Rows reordered: llama.cpp's Q/K permutation undone (`heads` groups).
    Unpermute {
        /// The head count the rows are grouped by.
        heads: usize,
    },
    /// `w - 1` in f32 (gemma2/gemma3 norms), then rounded to the output dtype.
    MinusOne,
}

/// One supported GGUF architecture.
struct Arch {
    gguf: &'static str,
    class: &'static str,
    /// Key-value names of `general.architecture`'s metadata that transformers maps.
    keys: &'static [(&'static str, &'static str)],
    /// The layer norms.
    norms: Norms,
}

/// An architecture's layer norms.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Norms {
    /// Two per layer (attention, feed-forward), stored as they are.
    Llama,
    /// gemma: llama's two, stored `+1`.
    Gemma,
    /// gemma2/gemma3: four per layer (before and after each block), stored `+1`.
    Gemma2,
}

const LLAMA_KEYS: &[(&str, &str)] = &[
    ("context_length", "max_position_embeddings"),
    ("block_count", "num_hidden_layers"),
    ("feed_forward_length", "intermediate_size"),
    ("embedding_length", "hidden_size"),
    ("rope.dimension_count", "head_dim"),
    ("rope.freq_base", "rope_theta"),
    ("attention.head_count", "num_attention_heads"),
    ("attention.head_count_kv", "num_key_value_heads"),
    ("attention.layer_norm_rms_epsilon", "rms_norm_eps"),
    ("vocab_size", "vocab_size"),
];

const QWEN_KEYS: &[(&str, &str)] = &[
    ("context_length", "max_position_embeddings"),
    ("block_count", "num_hidden_layers"),
    ("feed_forward_length", "intermediate_size"),
    ("embedding_length", "hidden_size"),
    ("rope.freq_base", "rope_theta"),
    ("attention.head_count", "num_attention_heads"),
    ("attention.head_count_kv", "num_key_value_heads"),
    ("attention.layer_norm_rms_epsilon", "rms_norm_eps"),
    ("vocab_size", "vocab_size"),
];

const GEMMA_KEYS: &[(&str, &str)] = &[
    ("context_length", "max_position_embeddings"),
    ("block_count", "num_hidden_layers"),
    ("feed_forward_length", "intermediate_size"),
    ("embedding_length", "hidden_size"),
    ("rope.freq_base", "rope_theta"),
    ("attention.key_length", "head_dim"),
    ("attention.head_count", "num_attention_heads"),
    ("attention.head_count_kv", "num_key_value_heads"),
    ("attention.layer_norm_rms_epsilon", "rms_norm_eps"),
    ("attention.sliding_window", "sliding_window"),
    ("vocab_size", "vocab_size"),
];

/// `tokenizer.ggml.*` keys transformers puts in the config.
const TOKEN_IDS: &[(&str, &str)] = &[
    ("bos_token_id", "bos_token_id"),
    ("eos_token_id", "eos_token_id"),
    ("unknown_token_id", "unk_token_id"),
    ("padding_token_id", "pad_token_id"),
];

const ARCHS: &[Arch] = &[
    Arch {
        gguf: "llama",
        class: "LlamaForCausalLM",
        keys: LLAMA_KEYS,
        norms: Norms::Llama,
    },
    Arch {
        gguf: "qwen2",
        class: "Qwen2ForCausalLM",
        keys: QWEN_KEYS,
        norms: Norms::Llama,
    },
    Arch {
        gguf: "qwen3",
        class: "Qwen3ForCausalLM",
        keys: QWEN_KEYS,
        norms: Norms::Llama,
    },
    Arch {
        gguf: "gemma",
        class: "GemmaForCausalLM",
        keys: GEMMA_KEYS,
        norms: Norms::Gemma,
    },
    Arch {
        gguf: "gemma2",
        class: "Gemma2ForCausalLM",
        keys: GEMMA_KEYS,
        norms: Norms::Gemma2,
    },
    Arch {
        gguf: "gemma3",
        class: "Gemma3ForCausalLM",
        keys: GEMMA_KEYS,
        norms: Norms::Gemma2,
    },
];

/// The architectures named in the error for any other.
pub const SUPPORTED: &str = "llama (and mistral), qwen2, qwen3, gemma, gemma2, gemma3";

/// A GGUF file mapped to HuggingFace: the config, and per GGUF tensor its HF name
/// and transform (`None`: transformers does not load it, e.g. `rope_freqs.weight`).
pub struct HfPlan {
    /// `config.json` (without the dtype, set by the writer).
    pub config: Map<String, Value>,
    arch: &'static Arch,
    /// `num_attention_heads`, `num_key_value_heads`.
    heads: Option<(usize, usize)>,
}

/// Why a GGUF file has no HuggingFace form here.
#[derive(Debug, thiserror::Error)]
pub enum NamesError {
    /// An architecture outside [`SUPPORTED`].
    #[error(
        "GGUF architecture `{0}` has no HuggingFace names in dq (supported: {SUPPORTED}); --names gguf keeps the GGUF names"
    )]
    Unsupported(String),
    /// Q/K rows that do not split into the heads.
    #[error("{name}: {rows} rows do not split into {heads} heads of 2 halves")]
    Heads {
        /// The tensor.
        name: String,
        /// Its rows.
        rows: usize,
        /// The head count.
        heads: usize,
    },
}

impl HfPlan {
    /// The plan for `g`.
    ///
    /// # Errors
    /// An architecture dq does not map.
    pub fn new(g: &Gguf) -> Result<HfPlan, NamesError> {
        let name = g.architecture().unwrap_or("").to_owned();
        let arch = ARCHS
            .iter()
            .find(|a| a.gguf == name)
            .ok_or_else(|| NamesError::Unsupported(name.clone()))?;
        let config = config(g, arch);
        let count = |k: &str| config.get(k).and_then(Value::as_u64).map(|v| v as usize);
        let heads = count("num_attention_heads").zip(count("num_key_value_heads"));
        Ok(HfPlan {
            config,
            arch,
            heads,
        })
    }

    /// The HF name of GGUF tensor `name`; `None` when transformers leaves it out.
    pub fn name(&self, name: &str) -> Option<String> {
        let (stem, suffix) = name.rsplit_once('.')?;
        if !matches!(suffix, "weight" | "bias") {
            return None;
        }
        let hf = match stem {
            "token_embd" => "model.embed_tokens".to_owned(),
            "output_norm" => "model.norm".to_owned(),
            "output" => "lm_head".to_owned(),
            _ => {
                let rest = stem.strip_prefix("blk.")?;
                let (layer, part) = rest.split_once('.')?;
                let layer: usize = layer.parse().ok()?;
                format!("model.layers.{layer}.{}", self.layer_part(part)?)
            }
        };
        Some(format!("{hf}.{suffix}"))
    }

    /// The HF module of a layer's GGUF tensor (`attn_q` -> `self_attn.q_proj`).
    fn layer_part(&self, part: &str) -> Option<&'static str> {
        let common = match part {
            "attn_norm" => "input_layernorm",
            "attn_q" => "self_attn.q_proj",
            "attn_k" => "self_attn.k_proj",
            "attn_v" => "self_attn.v_proj",
            "attn_output" => "self_attn.o_proj",
            "attn_q_norm" => "self_attn.q_norm",
            "attn_k_norm" => "self_attn.k_norm",
            "ffn_gate" => "mlp.gate_proj",
            "ffn_up" => "mlp.up_proj",
            "ffn_down" => "mlp.down_proj",
            _ => "",
        };
        if !common.is_empty() {
            return Some(common);
        }
        let four = self.arch.norms == Norms::Gemma2;
        match (part, four) {
            ("ffn_norm", false) => Some("post_attention_layernorm"),
            ("post_attention_norm", true) => Some("post_attention_layernorm"),
            ("ffn_norm", true) => Some("pre_feedforward_layernorm"),
            ("post_ffw_norm", true) => Some("post_feedforward_layernorm"),
            _ => None,
        }
    }

    /// What is done to GGUF tensor `name` of `rows` rows.
    ///
    /// # Errors
    /// Q/K rows that do not split into the heads (numpy's reshape fails there).
    pub fn transform(&self, name: &str, rows: usize) -> Result<Transform, NamesError> {
        if self.arch.norms != Norms::Llama {
            let norm = name.contains("norm.weight");
            return Ok(if norm {
                Transform::MinusOne
            } else {
                Transform::None
            });
        }
        let (Some((q_heads, kv_heads)), "llama") = (self.heads, self.arch.gguf) else {
            return Ok(Transform::None);
        };
        let heads = if name.contains(".attn_q.") {
            q_heads
        } else if name.contains(".attn_k.") {
            kv_heads
        } else {
            return Ok(Transform::None);
        };
        if heads == 0 || !rows.is_multiple_of(2 * heads) {
            return Err(NamesError::Heads {
                name: name.to_owned(),
                rows,
                heads,
            });
        }
        Ok(Transform::Unpermute { heads })
    }
}

/// The input row of output row `r` when llama.cpp's permutation is undone
/// (`reshape(heads, dim, 2, ...).swapaxes(1, 2)`): output `(h, a, b)` takes input
/// `(h, b, a)`, with `dim = rows / heads / 2`.
pub fn unpermuted_row(r: usize, rows: usize, heads: usize) -> usize {
    let dim = rows / heads / 2;
    let (h, within) = (r / (2 * dim), r % (2 * dim));
    let (a, b) = (within / dim, within % dim);
    h * 2 * dim + b * 2 + a
}

/// `config.json` as transformers builds it from the metadata.
fn config(g: &Gguf, arch: &Arch) -> Map<String, Value> {
    let name = g
        .get("general.name")
        .and_then(|v| v.as_str().map(str::to_owned));
    // transformers tests `"mistral" in [general.name]`: the name must be exactly that.
    let model_type = match (arch.gguf, name.as_deref()) {
        ("llama", Some("mistral")) => "mistral",
        ("gemma3", _) => "gemma3_text",
        (a, _) => a,
    };
    let class = if model_type == "mistral" {
        "MistralForCausalLM"
    } else {
        arch.class
    };
    let mut c = Map::new();
    c.insert("architectures".into(), Value::from(vec![class]));
    c.insert("model_type".into(), model_type.into());
    let tied = g.tensor("output.weight").is_none();
    c.insert("tie_word_embeddings".into(), tied.into());
    if let Some(n) = name {
        c.insert("_model_name_or_path".into(), n.into());
    }
    for (key, hf) in arch.keys {
        if let Some(v) = g.get(&format!("{}.{key}", arch.gguf)).and_then(json) {
            c.insert((*hf).into(), v);
        }
    }
    for (key, hf) in TOKEN_IDS {
        if let Some(v) = g.get(&format!("tokenizer.ggml.{key}")).and_then(json) {
            c.insert((*hf).into(), v);
        }
    }
    if !c.contains_key("vocab_size")
        && let Some(tokens) = g.get("tokenizer.ggml.tokens").and_then(|v| v.as_array())
    {
        c.insert("vocab_size".into(), tokens.len().into());
    }
    c
}

/// A metadata value as transformers parses it: ints, floats (the f32's value as a
/// double), bools, strings; a one-element array is its element.
fn json(v: MetaValue<'_>) -> Option<Value> {
    Some(match v {
        MetaValue::F32(x) => Value::from(f64::from(x)),
        MetaValue::F64(x) => Value::from(x),
        MetaValue::Bool(b) => Value::from(b),
        MetaValue::String(_) => Value::from(v.as_str()?),
        MetaValue::I8(x) => Value::from(x),
        MetaValue::I16(x) => Value::from(x),
        MetaValue::I32(x) => Value::from(x),
        MetaValue::I64(x) => Value::from(x),
        MetaValue::Array(a) => {
            let items: Vec<Value> = a.iter().filter_map(json).collect();
            match <[Value; 1]>::try_from(items) {
                Ok([one]) => one,
                Err(items) => Value::from(items),
            }
        }
        other => Value::from(other.as_u64()?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpermute_matches_numpy_swapaxes() {
        // 2 heads of dim 3: numpy gives rows [0,2,4,1,3,5, 6,8,10,7,9,11].
        let rows: Vec<usize> = (0..12).map(|r| unpermuted_row(r, 12, 2)).collect();
        assert_eq!(rows, [0, 2, 4, 1, 3, 5, 6, 8, 10, 7, 9, 11]);
    }
}
