//! The parts of `tokenizer.json` (the `tokenizers` library's serialization) for the
//! three tokenizers transformers builds from a GGUF vocabulary: its `LlamaTokenizer`
//! (sentencepiece as BPE with byte fallback), `GemmaTokenizer` and `GPT2Tokenizer`
//! (byte-level BPE), with the split regex `set_split_regex` puts in front.

use serde_json::{Value, json};

/// Which of transformers' tokenizer builders a vocabulary goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `sentencepiece_tokenizer`: `LlamaTokenizer`'s components.
    Llama,
    /// `gemma_tokenizer`: `GemmaTokenizer`'s components.
    Gemma,
    /// `byte_level_tokenizer`: `GPT2Tokenizer`'s components.
    ByteLevel,
}

const LLAMA3: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN35: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const TEKKEN: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*",
    r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
);
const GPT4O: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
);

/// `GGUF_PRE_TOKENIZER_SPLITS`: `tokenizer.ggml.pre` to the split regex.
const SPLITS: &[(&str, &str)] = &[
    ("llama3", LLAMA3),
    ("llama-v3", LLAMA3),
    ("llama-bpe", LLAMA3),
    ("falcon3", LLAMA3),
    ("falcon-h1", LLAMA3),
    ("pixtral", LLAMA3),
    ("midm-2.0", LLAMA3),
    ("lfm2", LLAMA3),
    ("jina-v5-nano", LLAMA3),
    ("dbrx", LLAMA3),
    ("smaug-bpe", LLAMA3),
    ("tekken", TEKKEN),
    ("qwen2", QWEN2),
    ("deepseek-r1-qwen", QWEN2),
    ("kormo", QWEN2),
    ("f2llmv2", QWEN2),
    ("megrez", QWEN2),
    ("qwen35", QWEN35),
    ("gpt-4o", GPT4O),
    ("llama4", GPT4O),
    ("kanana2", GPT4O),
    ("talkie", GPT4O),
    ("minimax-m2", GPT4O),
];

fn byte_level(use_regex: bool, add_prefix_space: bool) -> Value {
    json!({
        "type": "ByteLevel",
        "add_prefix_space": add_prefix_space,
        "trim_offsets": true,
        "use_regex": use_regex,
    })
}

fn replace(pattern: &str, content: &str) -> Value {
    json!({"type": "Replace", "pattern": {"String": pattern}, "content": content})
}

/// The normalizer.
pub fn normalizer(kind: Kind) -> Value {
    match kind {
        Kind::Gemma => replace(" ", "\u{2581}"),
        Kind::Llama | Kind::ByteLevel => Value::Null,
    }
}

/// The pre-tokenizer: the builder's, or the split of `pre` then bytes.
pub fn pre_tokenizer(kind: Kind, pre: Option<&str>) -> Value {
    if let Some((_, regex)) = SPLITS.iter().find(|(name, _)| Some(*name) == pre) {
        let split = json!({
            "type": "Split",
            "pattern": {"Regex": regex},
            "behavior": "Isolated",
            "invert": false,
        });
        return json!({"type": "Sequence", "pretokenizers": [split, byte_level(false, false)]});
    }
    match kind {
        Kind::Llama => json!({
            "type": "Metaspace",
            "replacement": "\u{2581}",
            "prepend_scheme": "first",
            "split": false,
        }),
        Kind::Gemma => json!({
            "type": "Split",
            "pattern": {"String": " "},
            "behavior": "MergedWithPrevious",
            "invert": false,
        }),
        Kind::ByteLevel => byte_level(true, false),
    }
}

/// The decoder.
pub fn decoder(kind: Kind) -> Value {
    let mut steps = vec![
        replace("\u{2581}", " "),
        json!({"type": "ByteFallback"}),
        json!({"type": "Fuse"}),
    ];
    match kind {
        Kind::ByteLevel => return byte_level(true, true),
        Kind::Llama => steps.push(json!({"type": "Strip", "content": " ", "start": 1, "stop": 0})),
        Kind::Gemma => {}
    }
    json!({"type": "Sequence", "decoders": steps})
}

/// `update_post_processor`: `bos $A eos` (each when added), `$B` after with type 1.
pub fn post_processor(bos: Option<(&str, usize)>, eos: Option<(&str, usize)>) -> Value {
    let special = |t: &str, type_id: u32| json!({"SpecialToken": {"id": t, "type_id": type_id}});
    let seq = |id: &str, type_id: u32| json!({"Sequence": {"id": id, "type_id": type_id}});
    let around = |id: &str, type_id: u32| {
        let mut v = Vec::new();
        v.extend(bos.map(|(t, _)| special(t, type_id)));
        v.push(seq(id, type_id));
        v.extend(eos.map(|(t, _)| special(t, type_id)));
        v
    };
    let single = around("A", 0);
    let mut pair = single.clone();
    pair.extend(around("B", 1));
    let mut specials = serde_json::Map::new();
    for (t, id) in bos.into_iter().chain(eos) {
        specials.insert(t.into(), json!({"id": t, "ids": [id], "tokens": [t]}));
    }
    json!({
        "type": "TemplateProcessing",
        "single": single,
        "pair": pair,
        "special_tokens": specials,
    })
}

/// The BPE model.
pub fn model(kind: Kind, vocab: serde_json::Map<String, Value>, merges: Vec<[&str; 2]>) -> Value {
    let sentencepiece = kind != Kind::ByteLevel;
    let affix = if sentencepiece {
        Value::Null
    } else {
        json!("")
    };
    json!({
        "type": "BPE",
        "dropout": null,
        "unk_token": if kind == Kind::Gemma { json!("<unk>") } else { Value::Null },
        "continuing_subword_prefix": affix,
        "end_of_word_suffix": affix,
        "fuse_unk": sentencepiece,
        "byte_fallback": sentencepiece,
        "ignore_merges": false,
        "vocab": vocab,
        "merges": merges,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_adds_bos_and_eos_to_both_sequences() {
        let p = post_processor(Some(("<s>", 1)), Some(("</s>", 2)));
        assert_eq!(p["single"].as_array().unwrap().len(), 3);
        assert_eq!(
            p["pair"][3],
            json!({"SpecialToken": {"id": "<s>", "type_id": 1}})
        );
        assert_eq!(p["special_tokens"]["</s>"]["ids"], json!([2]));
        let none = post_processor(None, None);
        assert_eq!(
            none["pair"],
            json!([{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}])
        );
    }
}
