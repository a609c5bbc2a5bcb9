//! The tokenizer files of a GGUF file's folder output: `tokenizer.json`,
//! `tokenizer_config.json` and `chat_template.jinja`, as
//! `AutoTokenizer.from_pretrained(dir, gguf_file=...).save_pretrained(out)` writes
//! them with transformers 5.24 (`integrations/gguf/gguf_tokenizer_mapping.py`, the
//! reference), built from the `tokenizer.ggml.*` metadata.
//!
//! Supported: sentencepiece (`llama`) vocabularies of llama, mistral and the gemma
//! family, byte-level BPE (`gpt2`) vocabularies of llama, mistral, qwen2 and qwen3.
//! Anything else is a [`Missing`] line, and no tokenizer is written.
//!
//! `model_max_length` is left out of `tokenizer_config.json` (transformers' default
//! is the value it saves), as are the loading-time `is_local` and `local_files_only`.

mod json;
mod merges;
mod vocab;

use std::collections::HashMap;

use dq::formats::gguf::Gguf;
use serde_json::{Map, Value};

use json::Kind;
use vocab::{CONTROL, USER_DEFINED, Vocab};

/// Why no tokenizer is written: one line naming what is missing.
pub type Missing = String;

/// `tokenizer_config.json` keys of a class's own defaults, with their values.
type ClassKeys = &'static [(&'static str, Option<&'static str>)];

/// The tokenizer class transformers picks for a `model_type`, and the keys of that
/// class's own defaults that it saves (`add_prefix_space` of `Qwen2Tokenizer`,
/// `mask_token` of `GemmaTokenizer`).
fn class(model_type: &str) -> Option<(&'static str, ClassKeys)> {
    Some(match model_type {
        "llama" | "mistral" => ("TokenizersBackend", &[]),
        "qwen2" | "qwen3" => ("Qwen2Tokenizer", &[("add_prefix_space", None)]),
        "gemma" | "gemma2" | "gemma3" | "gemma3_text" => {
            ("GemmaTokenizer", &[("mask_token", Some("<mask>"))])
        }
        _ => return None,
    })
}

/// The builder for a vocabulary (`select_tokenizer_builder`), among those dq writes.
fn kind(arch: &str, model: &str) -> Result<Kind, Missing> {
    let gemma = matches!(arch, "gemma" | "gemma2" | "gemma3");
    match model {
        "llama" if gemma => Ok(Kind::Gemma),
        "llama" if arch == "llama" => Ok(Kind::Llama),
        "gpt2" if matches!(arch, "llama" | "qwen2" | "qwen3") => Ok(Kind::ByteLevel),
        "llama" | "gpt2" => Err(format!(
            "a `{model}` vocabulary with architecture `{arch}` is not one dq converts"
        )),
        _ => Err(format!(
            "tokenizer.ggml.model `{model}` is not one dq converts (llama, gpt2)"
        )),
    }
}

/// The special tokens the builder's tokenizer class adds by default (in
/// `SPECIAL_TOKENS_ATTRIBUTES` order): added tokens, new ids when not in the vocabulary.
fn builder_defaults(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Llama => &["<s>", "</s>", "<unk>"],
        Kind::Gemma => &["<bos>", "<eos>", "<unk>", "<pad>", "<mask>"],
        Kind::ByteLevel => &["<|endoftext|>"],
    }
}

/// Added tokens in the order transformers adds them, with their ids.
struct Added<'v> {
    vocab: &'v HashMap<String, usize>,
    next: usize,
    tokens: Vec<(String, usize, bool)>,
}

impl Added<'_> {
    fn add(&mut self, content: &str, special: bool) {
        if self.tokens.iter().any(|t| t.0 == content) {
            return;
        }
        let id = self.vocab.get(content).copied().unwrap_or_else(|| {
            self.next += 1;
            self.next - 1
        });
        self.tokens.push((content.to_owned(), id, special));
    }

    fn id(&self, content: &str) -> Option<usize> {
        self.tokens.iter().find(|t| t.0 == content).map(|t| t.1)
    }

    fn to_json(&self) -> Value {
        let mut sorted: Vec<_> = self.tokens.iter().collect();
        sorted.sort_by_key(|t| t.1);
        let items = sorted.iter().map(|(content, id, special)| {
            serde_json::json!({
                "id": id, "content": content, "single_word": false, "lstrip": false,
                "rstrip": false, "normalized": false, "special": special,
            })
        });
        Value::Array(items.collect())
    }
}

/// The files for the vocabulary of `g`, whose config has `model_type`: (name, bytes).
///
/// # Errors
/// A vocabulary dq does not convert, or one transformers would not load.
pub fn files(g: &Gguf, model_type: &str) -> Result<Vec<(String, Vec<u8>)>, Missing> {
    let v = Vocab::read(g)?;
    let arch = g.architecture().unwrap_or("");
    let kind = kind(arch, v.model)?;
    let (class_name, class_keys) = class(model_type)
        .ok_or_else(|| format!("no tokenizer class for model_type `{model_type}`"))?;
    let alphabet = merges::alphabet();
    let spelled: Vec<String> = match kind {
        Kind::Llama => v.tokens.iter().map(|t| (*t).to_owned()).collect(),
        Kind::Gemma => v.tokens.iter().map(|t| merges::gemma_spelling(t)).collect(),
        Kind::ByteLevel => (v.tokens.iter())
            .map(|t| merges::byte_spelling(t, &alphabet))
            .collect(),
    };
    let spelled_refs: Vec<&str> = spelled.iter().map(String::as_str).collect();
    let map = merges::vocab_map(&spelled_refs);
    let merge_list = bpe_merges(&v, kind, &map, &spelled_refs)?;
    let owned: HashMap<String, usize> = map.iter().map(|(k, i)| ((*k).to_owned(), *i)).collect();
    let mut added = Added {
        vocab: &owned,
        next: map.len(),
        tokens: Vec::new(),
    };
    for t in builder_defaults(kind) {
        added.add(t, true);
    }
    let spelled_ok = |t: &str| kind != Kind::ByteLevel || merges::byte_spelling(t, &alphabet) == t;
    for t in v.of_type(CONTROL).filter(|t| spelled_ok(t)) {
        added.add(t, true);
    }
    for t in v.of_type(USER_DEFINED).filter(|t| owned.contains_key(*t)) {
        added.add(t, false);
    }
    let mut named: Vec<(&str, Option<&str>)> = vec![
        ("bos_token", v.bos),
        ("eos_token", v.eos),
        ("unk_token", v.unk),
        ("pad_token", v.pad),
    ];
    named.extend(
        class_keys
            .iter()
            .filter(|(k, _)| k.ends_with("_token"))
            .copied(),
    );
    for t in named.iter().filter_map(|(_, t)| *t) {
        added.add(t, true);
    }
    let sentencepiece = kind != Kind::ByteLevel;
    let bos = (v.bos.filter(|_| v.add_bos.unwrap_or(sentencepiece)))
        .and_then(|t| added.id(t).map(|id| (t, id)));
    let eos =
        (v.eos.filter(|_| v.add_eos.unwrap_or(false))).and_then(|t| added.id(t).map(|id| (t, id)));
    let mut vocab_json = Map::new();
    for (t, id) in &map {
        vocab_json.insert((*t).to_owned(), Value::from(*id));
    }
    let mut tok = Map::new();
    tok.insert("version".into(), "1.0".into());
    tok.insert("truncation".into(), Value::Null);
    tok.insert("padding".into(), Value::Null);
    tok.insert("added_tokens".into(), added.to_json());
    tok.insert("normalizer".into(), json::normalizer(kind));
    tok.insert("pre_tokenizer".into(), json::pre_tokenizer(kind, v.pre));
    tok.insert("post_processor".into(), json::post_processor(bos, eos));
    tok.insert("decoder".into(), json::decoder(kind));
    tok.insert("model".into(), json::model(kind, vocab_json, merge_list));
    let mut cfg = Map::new();
    cfg.insert("backend".into(), "tokenizers".into());
    cfg.insert("tokenizer_class".into(), class_name.into());
    for (key, value) in named.iter().chain(class_keys.iter()) {
        cfg.insert((*key).into(), value.map_or(Value::Null, Value::from));
    }
    let mut out = vec![
        ("tokenizer.json".to_owned(), compact(&Value::Object(tok))),
        (
            "tokenizer_config.json".to_owned(),
            super::config::to_bytes(&Value::Object(cfg)),
        ),
    ];
    if let Some(t) = v.chat_template {
        out.push(("chat_template.jinja".to_owned(), t.as_bytes().to_vec()));
    }
    Ok(out)
}

/// `tokenizer.json` without indentation (vocabularies are large).
fn compact(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_default()
}

/// The merges: the file's (`"a b"`, each part and the pair's join in the vocabulary,
/// as the `tokenizers` BPE requires), or those the scores imply.
fn bpe_merges<'t>(
    v: &Vocab<'t>,
    kind: Kind,
    map: &HashMap<&'t str, usize>,
    spelled: &[&'t str],
) -> Result<Vec<[&'t str; 2]>, Missing> {
    if let Some(list) = &v.merges {
        let mut out = Vec::with_capacity(list.len());
        for m in list {
            let parts: Vec<&str> = m.split(' ').collect();
            let [a, b] = parts[..] else {
                return Err(format!("tokenizer.ggml.merges holds `{m}`, not two tokens"));
            };
            if !map.contains_key(a)
                || !map.contains_key(b)
                || !map.contains_key(format!("{a}{b}").as_str())
            {
                return Err(format!(
                    "tokenizer.ggml.merges holds `{m}`, whose tokens are not all in the vocabulary"
                ));
            }
            out.push([a, b]);
        }
        return Ok(out);
    }
    let scored = match kind {
        Kind::Gemma => merges::py_dict(spelled.iter().enumerate().map(|(i, t)| (*t, -(i as f64)))),
        Kind::Llama => {
            let scores = v
                .scores
                .as_ref()
                .ok_or("no tokenizer.ggml.scores nor tokenizer.ggml.merges")?;
            merges::py_dict(spelled.iter().copied().zip(scores.iter().copied()))
        }
        Kind::ByteLevel => return Err("no tokenizer.ggml.merges".into()),
    };
    Ok(merges::generate(map, &scored))
}
