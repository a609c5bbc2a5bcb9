#!/usr/bin/env python3
"""Writes the fixtures of tests/cli/folder.rs (tests/fixtures/folder/).

Made with the packages of scripts/requirements-folder-fixtures.txt on Python 3.11
(x86-64, CPU torch). CI never runs this script: it reads only the committed outputs.
Re-running it rewrites the same bytes (fixed seed).

    python3 -m venv /tmp/venv-folder
    /tmp/venv-folder/bin/pip install -r scripts/requirements-folder-fixtures.txt
    /tmp/venv-folder/bin/python scripts/make_folder_fixtures.py [--dq target/debug/dq]

Outputs, for each tiny model <stem> (llama: arch llama, GQA 4/2 heads, untied
output, a rope_freqs tensor transformers leaves out, a vocabulary but no vocab_size
key; gemma3: arch gemma3, q/k norms, tied embeddings), random weights in a mix of
F32, F16, Q8_0 and Q4_0:
- <stem>.gguf, written by gguf.GGUFWriter;
- <stem>.expected.safetensors: the state dict of
  `AutoModelForCausalLM.from_pretrained(dir, gguf_file=<stem>.gguf)` (transformers'
  own GGUF loader: names, Q/K permutation undone, gemma norms' +1 undone), in f32,
  without the tied lm_head;
- <stem>.config.json: the config dict transformers' `load_gguf_checkpoint` builds.
With --dq, the script also converts each GGUF with `dq convert` into a folder, loads
that folder with `AutoModelForCausalLM.from_pretrained(folder)`, and records in
check.json whether keys were missing or unexpected and whether the logits on a fixed
input equal those of the GGUF loading.
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


def tensor(w: gguf.GGUFWriter, name: str, shape: tuple[int, ...], ty: T, scale=0.05):
    data = (RNG.standard_normal(shape) * scale).astype(np.float32)
    if ty == T.F32:
        w.add_tensor(name, data)
    elif ty == T.F16:
        w.add_tensor(name, data.astype(np.float16))
    else:
        q = gguf.quants.quantize(data, ty)
        w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=ty)


def vocab(w: gguf.GGUFWriter, n: int):
    w.add_tokenizer_model("llama")
    w.add_token_list([f"<t{i}>".encode() for i in range(n)])
    w.add_token_scores([float(-i) for i in range(n)])
    w.add_token_types([1] * n)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)


def make_llama(path: Path):
    hidden, heads, kv, inter, layers, n_vocab = 64, 4, 2, 128, 2, 96
    head_dim = hidden // heads
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny-llama")
    w.add_context_length(128)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(inter)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(10000.0)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_layer_norm_rms_eps(1e-5)
    vocab(w, n_vocab)
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
    hidden, heads, kv, head_dim, inter, layers, n_vocab = 64, 2, 1, 32, 128, 2, 64
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
    w.add_vocab_size(n_vocab)
    vocab(w, n_vocab)
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


def check(stem: str, dq: str, gguf_model) -> dict:
    import torch
    from transformers import AutoModelForCausalLM

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
        }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dq", help="a dq binary: also check its folders load in transformers")
    args = ap.parse_args()
    assert version("gguf") == "0.19.0", f"needs gguf 0.19.0, found {version('gguf')}"
    OUT.mkdir(parents=True, exist_ok=True)
    make_llama(OUT / "llama.gguf")
    make_gemma3(OUT / "gemma3.gguf")
    results = {}
    for stem in ["llama", "gemma3"]:
        model = expected(stem)
        if args.dq:
            results[stem] = check(stem, args.dq, model)
    if args.dq:
        results["versions"] = {
            p: version(p) for p in ["transformers", "torch", "gguf", "safetensors", "numpy"]
        }
        (OUT / "check.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
        print(json.dumps(results, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
