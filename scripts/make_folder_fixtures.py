#!/usr/bin/env python3
"""Writes the fixtures of tests/cli/folder.rs (tests/fixtures/folder/).

Made with the packages of scripts/requirements-folder-fixtures.txt on Python 3.11
(x86-64, CPU torch). CI never runs this script: it reads only the committed outputs.
Re-running it rewrites the same bytes (fixed seed).

    python3 -m venv /tmp/venv-folder
    /tmp/venv-folder/bin/pip install -r scripts/requirements-folder-fixtures.txt
    /tmp/venv-folder/bin/python scripts/make_folder_fixtures.py [--dq target/debug/dq]

Outputs, for each tiny model <stem> (llama: arch llama, GQA 4/2 heads, untied
output, a rope_freqs tensor transformers leaves out, a sentencepiece vocabulary but
no vocab_size key; gemma3: arch gemma3, q/k norms, tied embeddings, a Gemma-style
sentencepiece vocabulary (runs of spaces stored as spaces, a chat template);
qwen2: arch qwen2, q/k/v biases, a byte-level BPE vocabulary (pre `qwen2`);
llama3: arch llama, a byte-level BPE vocabulary (pre `llama-bpe`) without
`<|endoftext|>`), random weights in a mix of F32, F16, Q8_0 and Q4_0:
- <stem>.gguf, written by gguf.GGUFWriter; the vocabularies are trained here
  (sentencepiece, tokenizers) on a fixed text and stored as llama.cpp's converter
  stores them (token types: normal 1, unknown 2, control 3, user-defined 4, byte 6);
- <stem>.expected.safetensors: the state dict of
  `AutoModelForCausalLM.from_pretrained(dir, gguf_file=<stem>.gguf)` (transformers'
  own GGUF loader: names, Q/K permutation undone, gemma norms' +1 undone), in f32,
  without the tied lm_head;
- <stem>.config.json: the config dict transformers' `load_gguf_checkpoint` builds;
- <stem>.tokenizer/: what `AutoTokenizer.from_pretrained(dir, gguf_file=...)
  .save_pretrained(...)` writes (tokenizer.json, tokenizer_config.json and
  chat_template.jinja when the GGUF has one);
- <stem>.tokens.json: that tokenizer's ids for fixed texts (unicode, runs of spaces,
  tabs, newlines, special and user-defined tokens), with and without special tokens
  and as a pair, and the decoded text.
With --dq, the script also converts each GGUF with `dq convert` into a folder, loads
that folder with `AutoModelForCausalLM.from_pretrained(folder)` and
`AutoTokenizer.from_pretrained(folder)`, and records in check.json whether keys were
missing or unexpected, whether the logits on a fixed input equal those of the GGUF
loading, and whether the folder's tokenizer is the GGUF's (class, ids, decoding,
the backend tokenizer's JSON, special tokens, chat template).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

import numpy as np

import gguf
from gguf import GGMLQuantizationType as T

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "folder"
RNG = np.random.default_rng(42)
STEMS = ["llama", "gemma3", "qwen2", "llama3", "gemma"]


def tensor(w: gguf.GGUFWriter, name: str, shape: tuple[int, ...], ty: T, scale=0.05):
    data = (RNG.standard_normal(shape) * scale).astype(np.float32)
    if ty == T.F32:
        w.add_tensor(name, data)
    elif ty == T.F16:
        w.add_tensor(name, data.astype(np.float16))
    else:
        q = gguf.quants.quantize(data, ty)
        w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=ty)


CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello world! Héllo wörld, naïve café, don't we'll they're.",
    "def main():\n    return 42  # spaces   and\ttabs",
    "数字 123 4567 and émojis 🙂 too",
    "<think>reasoning</think> done",
] * 20

TEXTS = [
    "Hello world",
    " leading space",
    "two  spaces,   three, a\ttab and\nnew lines\n\n",
    "naïve café 数字 🙂 Ωmega",
    "12345 678 don't WE'LL",
    "<think>x</think> and <|im_start|>user\nhi<|im_end|>",
    "<start_of_turn>model\nok<end_of_turn>",
    "<|begin_of_text|>a<|eot_id|>",
    "",
]

# llama.cpp's token types.
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, BYTE = 1, 2, 3, 4, 6


def spm_vocab(w: gguf.GGUFWriter, gemma: bool):
    """A sentencepiece BPE vocabulary with byte fallback, as llama.cpp stores it."""
    import sentencepiece as spm

    with tempfile.TemporaryDirectory() as tmp:
        text = Path(tmp) / "corpus.txt"
        text.write_text("\n".join(CORPUS))
        if gemma:
            ids = dict(pad_id=0, eos_id=1, bos_id=2, unk_id=3, pad_piece="<pad>", eos_piece="<eos>",
                       bos_piece="<bos>", unk_piece="<unk>")
            control = ["<mask>", "<start_of_turn>", "<end_of_turn>"]
            user = ["<think>", "</think>", "\u2581\u2581", "\u2581\u2581\u2581\u2581"]
        else:
            ids = dict(unk_id=0, bos_id=1, eos_id=2, pad_id=-1)
            control = ["<|im_start|>", "<|im_end|>"]
            user = ["<think>", "</think>"]
        spm.SentencePieceTrainer.train(
            input=str(text), model_prefix=str(Path(tmp) / "sp"), vocab_size=400, model_type="bpe",
            byte_fallback=True, character_coverage=1.0, control_symbols=control,
            user_defined_symbols=user, minloglevel=2, num_threads=1, **ids,
        )
        sp = spm.SentencePieceProcessor(model_file=str(Path(tmp) / "sp.model"))
    tokens, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        piece = sp.id_to_piece(i)
        kind = NORMAL
        if sp.is_unknown(i):
            kind = UNKNOWN
        elif sp.is_control(i):
            kind = CONTROL
        elif sp.is_byte(i):
            kind = BYTE
        elif piece in user:
            kind = USER_DEFINED
        if gemma and set(piece) == {"\u2581"}:
            piece = " " * len(piece)  # as llama.cpp's Gemma conversion stores them
        tokens.append(piece)
        scores.append(sp.get_score(i))
        types.append(kind)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    if gemma:
        w.add_bos_token_id(2)
        w.add_eos_token_id(1)
        w.add_unk_token_id(3)
        w.add_pad_token_id(0)
        w.add_add_bos_token(True)
        w.add_add_eos_token(False)
        w.add_add_space_prefix(False)
        w.add_chat_template(
            "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m['role'] }}\n"
            "{{ m['content'] }}<end_of_turn>\n{% endfor %}"
        )
    else:
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_unk_token_id(0)
    return len(tokens)


def bpe_vocab(w: gguf.GGUFWriter, pre: str, specials: list[tuple[str, int]], ids: dict, add_bos: bool):
    """A byte-level BPE vocabulary (tokens and merges in GPT-2's byte alphabet)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=380, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tk.train_from_iterator(CORPUS, trainer)
    model = json.loads(tk.to_str())["model"]
    tokens = [t for t, _ in sorted(model["vocab"].items(), key=lambda kv: kv[1])]
    types = [NORMAL] * len(tokens)
    for token, kind in specials:
        tokens.append(token)
        types.append(kind)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges([" ".join(m) for m in model["merges"]])
    for key, token in ids.items():
        getattr(w, f"add_{key}_token_id")(tokens.index(token))
    w.add_add_bos_token(add_bos)
    w.add_chat_template(
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    )
    return len(tokens)


def qwen_vocab(w: gguf.GGUFWriter):
    specials = [("<|endoftext|>", CONTROL), ("<|im_start|>", CONTROL), ("<|im_end|>", CONTROL),
                ("<think>", USER_DEFINED), ("</think>", USER_DEFINED),
                ("<|vision pad|>", CONTROL)]  # a control token outside the byte alphabet
    ids = {"bos": "<|endoftext|>", "eos": "<|im_end|>", "pad": "<|endoftext|>"}
    return bpe_vocab(w, "qwen2", specials, ids, add_bos=False)


def llama3_vocab(w: gguf.GGUFWriter):
    specials = [("<|begin_of_text|>", CONTROL), ("<|end_of_text|>", CONTROL),
                ("<|im_start|>", CONTROL), ("<|im_end|>", CONTROL), ("<|eot_id|>", CONTROL)]
    ids = {"bos": "<|begin_of_text|>", "eos": "<|eot_id|>"}
    return bpe_vocab(w, "llama-bpe", specials, ids, add_bos=True)


def make_llama(path: Path, vocab=lambda w: spm_vocab(w, gemma=False), name="tiny-llama"):
    hidden, heads, kv, inter, layers = 64, 4, 2, 128, 2
    head_dim = hidden // heads
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(name)
    w.add_context_length(128)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(inter)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(10000.0)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_layer_norm_rms_eps(1e-5)
    n_vocab = vocab(w)
    tensor(w, "token_embd.weight", (n_vocab, hidden), T.Q8_0)
    tensor(w, "rope_freqs.weight", (head_dim // 2,), T.F32)
    for b in range(layers):
        p = f"blk.{b}"
        tensor(w, f"{p}.attn_norm.weight", (hidden,), T.F32, 1.0)
        tensor(w, f"{p}.attn_q.weight", (heads * head_dim, hidden), T.Q4_0)
        tensor(w, f"{p}.attn_k.weight", (kv * head_dim, hidden), T.Q8_0)
        tensor(w, f"{p}.attn_v.weight", (kv * head_dim, hidden), T.F16)
        tensor(w, f"{p}.attn_output.weight", (hidden, heads * head_dim), T.Q4_0)
        tensor(w, f"{p}.ffn_norm.weight", (hidden,), T.F32, 1.0)
        tensor(w, f"{p}.ffn_gate.weight", (inter, hidden), T.Q8_0)
        tensor(w, f"{p}.ffn_up.weight", (inter, hidden), T.Q4_0)
        tensor(w, f"{p}.ffn_down.weight", (hidden, inter), T.Q8_0)
    tensor(w, "output_norm.weight", (hidden,), T.F32, 1.0)
    tensor(w, "output.weight", (n_vocab, hidden), T.Q8_0)
    finish(w)


def make_gemma3(path: Path):
    hidden, heads, kv, head_dim, inter, layers = 64, 2, 1, 32, 128, 2
    w = gguf.GGUFWriter(str(path), "gemma3")
    w.add_name("tiny-gemma3")
    w.add_context_length(128)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(inter)
    w.add_rope_freq_base(10000.0)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_sliding_window(64)
    n_vocab = spm_vocab(w, gemma=True)
    w.add_vocab_size(n_vocab)
    tensor(w, "token_embd.weight", (n_vocab, hidden), T.Q8_0)
    for b in range(layers):
        p = f"blk.{b}"
        for norm in ["attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm"]:
            tensor(w, f"{p}.{norm}.weight", (hidden,), T.F32, 1.0)
        tensor(w, f"{p}.attn_q_norm.weight", (head_dim,), T.F32, 1.0)
        tensor(w, f"{p}.attn_k_norm.weight", (head_dim,), T.F32, 1.0)
        tensor(w, f"{p}.attn_q.weight", (heads * head_dim, hidden), T.Q4_0)
        tensor(w, f"{p}.attn_k.weight", (kv * head_dim, hidden), T.Q8_0)
        tensor(w, f"{p}.attn_v.weight", (kv * head_dim, hidden), T.F16)
        tensor(w, f"{p}.attn_output.weight", (hidden, heads * head_dim), T.Q4_0)
        tensor(w, f"{p}.ffn_gate.weight", (inter, hidden), T.Q8_0)
        tensor(w, f"{p}.ffn_up.weight", (inter, hidden), T.Q4_0)
        tensor(w, f"{p}.ffn_down.weight", (hidden, inter), T.Q8_0)
    tensor(w, "output_norm.weight", (hidden,), T.F32, 1.0)
    finish(w)


def make_qwen2(path: Path):
    hidden, heads, kv, inter, layers = 64, 4, 2, 128, 2
    head_dim = hidden // heads
    w = gguf.GGUFWriter(str(path), "qwen2")
    w.add_name("tiny-qwen2")
    w.add_context_length(128)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(inter)
    w.add_rope_freq_base(1000000.0)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_layer_norm_rms_eps(1e-6)
    n_vocab = qwen_vocab(w)
    tensor(w, "token_embd.weight", (n_vocab, hidden), T.Q8_0)
    for b in range(layers):
        p = f"blk.{b}"
        tensor(w, f"{p}.attn_norm.weight", (hidden,), T.F32, 1.0)
        tensor(w, f"{p}.attn_q.weight", (heads * head_dim, hidden), T.Q4_0)
        tensor(w, f"{p}.attn_q.bias", (heads * head_dim,), T.F32)
        tensor(w, f"{p}.attn_k.weight", (kv * head_dim, hidden), T.Q8_0)
        tensor(w, f"{p}.attn_k.bias", (kv * head_dim,), T.F32)
        tensor(w, f"{p}.attn_v.weight", (kv * head_dim, hidden), T.F16)
        tensor(w, f"{p}.attn_v.bias", (kv * head_dim,), T.F32)
        tensor(w, f"{p}.attn_output.weight", (hidden, heads * head_dim), T.Q4_0)
        tensor(w, f"{p}.ffn_norm.weight", (hidden,), T.F32, 1.0)
        tensor(w, f"{p}.ffn_gate.weight", (inter, hidden), T.Q8_0)
        tensor(w, f"{p}.ffn_up.weight", (inter, hidden), T.Q4_0)
        tensor(w, f"{p}.ffn_down.weight", (hidden, inter), T.Q8_0)
    tensor(w, "output_norm.weight", (hidden,), T.F32, 1.0)
    tensor(w, "output.weight", (n_vocab, hidden), T.Q8_0)
    finish(w)


# gemma (v1): transformers loads no such GGUF file, so the reference is the random HF
# model the file is made from, the way llama.cpp's convert_hf_to_gguf.py (GemmaModel)
# makes one: gguf-py's names, every norm stored + 1, no Q/K permutation, the tied
# lm_head left out. The HF model holds the values the file stores (each weight
# quantized and dequantized by gguf-py; norms on a 2^-10 grid so that + 1 and - 1 are
# exact), so dq's folder must give its logits bit for bit.
GEMMA_TYPES = {
    "self_attn.q_proj": ("attn_q", T.Q4_0),
    "self_attn.k_proj": ("attn_k", T.Q8_0),
    "self_attn.v_proj": ("attn_v", T.F16),
    "self_attn.o_proj": ("attn_output", T.Q4_0),
    "mlp.gate_proj": ("ffn_gate", T.Q8_0),
    "mlp.up_proj": ("ffn_up", T.Q4_0),
    "mlp.down_proj": ("ffn_down", T.Q8_0),
    "input_layernorm": ("attn_norm", T.F32),
    "post_attention_layernorm": ("ffn_norm", T.F32),
}


def make_gemma(path: Path):
    import torch
    from transformers import GemmaConfig, GemmaForCausalLM

    hidden, heads, kv, head_dim, inter, layers = 64, 2, 1, 32, 128, 2
    w = gguf.GGUFWriter(str(path), "gemma")
    w.add_name("tiny-gemma")
    n_vocab = spm_vocab(w, gemma=True)
    w.add_context_length(128)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(inter)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_layer_norm_rms_eps(1e-6)
    config = GemmaConfig(
        vocab_size=n_vocab, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv, head_dim=head_dim,
        max_position_embeddings=128, rms_norm_eps=1e-6, bos_token_id=2, eos_token_id=1,
        pad_token_id=0, tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    model = GemmaForCausalLM(config).eval()
    state = {}
    for name, p in model.state_dict().items():
        if name == "lm_head.weight":
            continue
        data = (RNG.standard_normal(tuple(p.shape)) * 0.05).astype(np.float32)
        if name == "model.embed_tokens.weight":
            gname, ty = "token_embd", T.Q8_0
        elif name == "model.norm.weight":
            gname, ty = "output_norm", T.F32
        else:
            layer, part = name.removeprefix("model.layers.").removesuffix(".weight").split(".", 1)
            short, ty = GEMMA_TYPES[part]
            gname = f"blk.{layer}.{short}"
        if "norm" in gname:
            value = np.round(RNG.standard_normal(tuple(p.shape)) * 0.1 * 1024) / 1024
            value = value.astype(np.float32)
            w.add_tensor(f"{gname}.weight", value + np.float32(1))
        elif ty == T.F16:
            w.add_tensor(f"{gname}.weight", data.astype(np.float16))
            value = data.astype(np.float16).astype(np.float32)
        else:
            q = gguf.quants.quantize(data, ty)
            w.add_tensor(f"{gname}.weight", q, raw_shape=q.shape, raw_dtype=ty)
            value = gguf.quants.dequantize(q, ty).reshape(data.shape)
        state[name] = torch.from_numpy(np.ascontiguousarray(value))
    model.load_state_dict(state, strict=False)
    model.tie_weights()
    finish(w)
    return model


def gemma_reference(model):
    """For gemma (v1): what expected() records, from the HF model the GGUF was made
    from; and transformers' refusal of the GGUF itself."""
    from safetensors.torch import save_file
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    try:
        load_gguf_checkpoint(str(OUT / "gemma.gguf"))
        refusal = None
    except ValueError as e:
        refusal = str(e)
    c = model.config
    keys = ["vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
            "num_attention_heads", "num_key_value_heads", "head_dim", "max_position_embeddings",
            "rms_norm_eps", "bos_token_id", "eos_token_id", "pad_token_id", "tie_word_embeddings",
            "model_type"]
    config = {k: getattr(c, k) for k in keys}
    config["architectures"] = ["GemmaForCausalLM"]
    config["rms_norm_eps"] = float(np.float32(c.rms_norm_eps))  # the GGUF's f32
    (OUT / "gemma.config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    sd = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    save_file(sd, str(OUT / "gemma.expected.safetensors"), metadata={"format": "pt"})
    return refusal


def finish(w: gguf.GGUFWriter):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def expected(stem: str):
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    config = load_gguf_checkpoint(str(OUT / f"{stem}.gguf"))["config"]
    (OUT / f"{stem}.config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    model = AutoModelForCausalLM.from_pretrained(
        str(OUT), gguf_file=f"{stem}.gguf", dtype=torch.float32
    )
    sd = {k: v.contiguous() for k, v in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        sd.pop("lm_head.weight", None)
    save_file(sd, str(OUT / f"{stem}.expected.safetensors"), metadata={"format": "pt"})
    return model


def encodings(tok) -> dict:
    """The tokenizer's ids and decodings of TEXTS."""
    out = {}
    for text in TEXTS:
        ids = tok(text)["input_ids"]
        out[text] = {
            "ids": ids,
            "ids_plain": tok(text, add_special_tokens=False)["input_ids"],
            "pair": tok(text, "and more")["input_ids"],
            "decoded": tok.decode(ids),
            "decoded_skip": tok.decode(ids, skip_special_tokens=True),
        }
    return out


def expected_tokenizer(stem: str):
    import shutil
    from transformers import AutoTokenizer, GemmaTokenizer

    # AutoTokenizer reads the model's config from the file, which transformers cannot
    # for gemma (v1); the tokenizer class it would pick converts the vocabulary itself.
    cls = GemmaTokenizer if stem == "gemma" else AutoTokenizer
    tok = cls.from_pretrained(str(OUT), gguf_file=f"{stem}.gguf")
    saved = OUT / f"{stem}.tokenizer"
    shutil.rmtree(saved, ignore_errors=True)
    tok.save_pretrained(str(saved))
    (OUT / f"{stem}.tokens.json").write_text(
        json.dumps(encodings(tok), indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    )
    return tok


# Not in NFC: transformers' Qwen2Tokenizer puts an NFC normalizer in front whenever it
# loads a folder (the one its own save_pretrained wrote too), its GGUF loading does not.
DECOMPOSED = "cafe\u0301 n\u0303"


def same_tokenizer(a, b, saved) -> dict:
    """Whether tokenizer b (dq's folder) is tokenizer a (the GGUF's), and is what
    transformers loads from the folder its save_pretrained wrote (saved)."""
    backend = lambda t: json.loads(t.backend_tokenizer.to_str())
    return {
        "same_as_saved_folder": encodings(b) == encodings(saved)
        and backend(b) == backend(saved)
        and b.encode(DECOMPOSED) == saved.encode(DECOMPOSED)
        and type(b) is type(saved),
        "decomposed_text_equal": a.encode(DECOMPOSED) == b.encode(DECOMPOSED),
        "class": type(b).__name__,
        "class_equal": type(a) is type(b),
        "encodings_equal": encodings(a) == encodings(b),
        "backend_json_equal": backend(a) == backend(b),
        "special_tokens_equal": a.special_tokens_map == b.special_tokens_map
        and a.all_special_ids == b.all_special_ids,
        "chat_template_equal": a.chat_template == b.chat_template,
        "model_max_length_equal": a.model_max_length == b.model_max_length,
        "vocab_equal": a.get_vocab() == b.get_vocab(),
    }


def check(stem: str, dq: str, gguf_model, gguf_tok) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        run = subprocess.run(
            [dq, "convert", str(OUT / f"{stem}.gguf"), str(out)], capture_output=True, text=True
        )
        if run.returncode != 0:
            return {"dq_convert": run.stderr.strip()}
        model, info = AutoModelForCausalLM.from_pretrained(
            str(out), dtype=torch.float32, output_loading_info=True
        )
        ids = torch.tensor([[1, 5, 9, 17, 33, 2, 40, 7]])
        with torch.no_grad():
            a = gguf_model(ids).logits
            b = model(ids).logits
        return {
            "missing_keys": sorted(info["missing_keys"]),
            "unexpected_keys": sorted(info["unexpected_keys"]),
            "logits_equal": bool(torch.equal(a, b)),
            "files": sorted(p.name for p in out.iterdir()),
            "tokenizer": same_tokenizer(
                gguf_tok,
                AutoTokenizer.from_pretrained(str(out)),
                AutoTokenizer.from_pretrained(str(OUT / f"{stem}.tokenizer")),
            ),
        }


def checkpoints(dq) -> dict:
    """The FP8 and GPTQ checkpoints (folder_ckpt.py); their checks with --dq."""
    import folder_ckpt as ck

    out = {}
    tokenizer = OUT / "llama.tokenizer"
    ck.make_fp8(OUT / "fp8", 400, tokenizer)
    ck.make_gptq(OUT / "gptq", 400, tokenizer)
    for name in ["fp8", "gptq"]:
        try:
            original, weights = ck.reference(OUT / name, OUT / f"{name}.expected.json")
        except Exception as e:  # noqa: BLE001 -- recorded: transformers cannot load it here
            out[name] = {"transformers_error": f"{type(e).__name__}: {e}"}
            continue
        if dq:
            out[name] = ck.check(OUT / name, dq, original, weights)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dq", help="a dq binary: also check its folders load in transformers")
    args = ap.parse_args()
    assert version("gguf") == "0.19.0", f"needs gguf 0.19.0, found {version('gguf')}"
    OUT.mkdir(parents=True, exist_ok=True)
    make_llama(OUT / "llama.gguf")
    make_gemma3(OUT / "gemma3.gguf")
    make_qwen2(OUT / "qwen2.gguf")
    make_llama(OUT / "llama3.gguf", llama3_vocab, "tiny-llama3")
    gemma = make_gemma(OUT / "gemma.gguf")
    results = {}
    for stem in STEMS:
        if stem == "gemma":
            model = gemma
            results["gemma_transformers_gguf_error"] = gemma_reference(gemma)
        else:
            model = expected(stem)
        tok = expected_tokenizer(stem)
        if args.dq:
            results[stem] = check(stem, args.dq, model, tok)
    results.update(checkpoints(args.dq))
    if args.dq:
        results["versions"] = {
            p: version(p)
            for p in ["transformers", "torch", "gguf", "safetensors", "numpy", "tokenizers", "sentencepiece",
                      "gptqmodel", "optimum"]
        }
        (OUT / "check.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
        print(json.dumps(results, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
