//! The `tokenizer.ggml.*` metadata of a GGUF file, read as transformers'
//! `get_gguf_tokenizer` reads it (`integrations/gguf/gguf_tokenizer_mapping.py`).

use dq::formats::gguf::{Gguf, MetaValue};

/// `tokenizer.ggml.token_type` of a control token (`<s>`, `<|im_end|>`).
pub const CONTROL: i64 = 3;
/// `tokenizer.ggml.token_type` of a user-defined token (`<think>`).
pub const USER_DEFINED: i64 = 4;

/// A GGUF file's vocabulary.
pub struct Vocab<'a> {
    /// `tokenizer.ggml.model`: `llama` (sentencepiece) or `gpt2` (byte-level BPE).
    pub model: &'a str,
    /// `tokenizer.ggml.pre`: the pre-tokenizer's name.
    pub pre: Option<&'a str>,
    /// The tokens, by id.
    pub tokens: Vec<&'a str>,
    /// `tokenizer.ggml.scores`, when present.
    pub scores: Option<Vec<f64>>,
    /// `tokenizer.ggml.token_type`, when present.
    pub types: Vec<i64>,
    /// `tokenizer.ggml.merges` (`"a b"`), when present.
    pub merges: Option<Vec<&'a str>>,
    /// The bos, eos, unk and pad tokens, by the ids the file gives.
    pub bos: Option<&'a str>,
    /// See `bos`.
    pub eos: Option<&'a str>,
    /// See `bos`.
    pub unk: Option<&'a str>,
    /// See `bos`.
    pub pad: Option<&'a str>,
    /// `tokenizer.ggml.add_bos_token`.
    pub add_bos: Option<bool>,
    /// `tokenizer.ggml.add_eos_token`.
    pub add_eos: Option<bool>,
    /// `tokenizer.chat_template`.
    pub chat_template: Option<&'a str>,
}

/// A key that is there but not of the type transformers reads.
fn bad(key: &str, what: &str) -> String {
    format!("{key} is not {what}")
}

fn strings<'a>(g: &'a Gguf, key: &str) -> Result<Option<Vec<&'a str>>, String> {
    let Some(v) = g.get(key) else { return Ok(None) };
    let a = v.as_array().ok_or_else(|| bad(key, "an array"))?;
    let items: Option<Vec<&str>> = a.iter().map(|x| x.as_str()).collect();
    items
        .map(Some)
        .ok_or_else(|| bad(key, "an array of UTF-8 strings"))
}

fn numbers(g: &Gguf, key: &str) -> Result<Option<Vec<f64>>, String> {
    let Some(v) = g.get(key) else { return Ok(None) };
    let a = v.as_array().ok_or_else(|| bad(key, "an array"))?;
    let items: Option<Vec<f64>> = a.iter().map(number).collect();
    items
        .map(Some)
        .ok_or_else(|| bad(key, "an array of numbers"))
}

fn number(v: MetaValue<'_>) -> Option<f64> {
    Some(match v {
        MetaValue::F32(x) => f64::from(x),
        MetaValue::F64(x) => x,
        MetaValue::I8(x) => x.into(),
        MetaValue::I16(x) => x.into(),
        MetaValue::I32(x) => x.into(),
        MetaValue::I64(x) => x as f64,
        other => other.as_u64()? as f64,
    })
}

fn flag(g: &Gguf, key: &str) -> Result<Option<bool>, String> {
    match g.get(key) {
        None => Ok(None),
        Some(MetaValue::Bool(b)) => Ok(Some(b)),
        Some(_) => Err(bad(key, "a bool")),
    }
}

impl<'a> Vocab<'a> {
    /// The vocabulary of `g`; `Err` names the key that is missing or malformed.
    pub fn read(g: &'a Gguf) -> Result<Vocab<'a>, String> {
        let text = |key: &str| -> Result<Option<&'a str>, String> {
            match g.get(key) {
                None => Ok(None),
                Some(v) => v.as_str().map(Some).ok_or_else(|| bad(key, "a string")),
            }
        };
        let model = text("tokenizer.ggml.model")?.ok_or("no tokenizer.ggml.model key")?;
        let tokens = strings(g, "tokenizer.ggml.tokens")?.ok_or("no tokenizer.ggml.tokens key")?;
        let types = numbers(g, "tokenizer.ggml.token_type")?.unwrap_or_default();
        let scores = numbers(g, "tokenizer.ggml.scores")?;
        if scores
            .as_ref()
            .is_some_and(|s| s.iter().any(|x| x.is_nan()))
        {
            return Err("tokenizer.ggml.scores holds a NaN".into());
        }
        let id = |key: &str| -> Result<Option<&'a str>, String> {
            let full = format!("tokenizer.ggml.{key}");
            let Some(v) = g.get(&full) else {
                return Ok(None);
            };
            let i = v.as_u64().ok_or_else(|| bad(&full, "a token id"))?;
            let token = usize::try_from(i).ok().and_then(|i| tokens.get(i));
            token
                .copied()
                .map(Some)
                .ok_or_else(|| format!("{full} {i} is past the {} tokens", tokens.len()))
        };
        Ok(Vocab {
            model,
            pre: text("tokenizer.ggml.pre")?,
            bos: id("bos_token_id")?,
            eos: id("eos_token_id")?,
            unk: id("unknown_token_id")?,
            pad: id("padding_token_id")?,
            types: types.iter().map(|&t| t as i64).collect(),
            scores,
            merges: strings(g, "tokenizer.ggml.merges")?,
            add_bos: flag(g, "tokenizer.ggml.add_bos_token")?,
            add_eos: flag(g, "tokenizer.ggml.add_eos_token")?,
            chat_template: text("tokenizer.chat_template")?,
            tokens,
        })
    }

    /// The tokens of type `ty`, in id order.
    pub fn of_type(&self, ty: i64) -> impl Iterator<Item = &'a str> + '_ {
        (self.tokens.iter().zip(&self.types))
            .filter(move |(_, t)| **t == ty)
            .map(|(s, _)| *s)
    }
}
