#!/usr/bin/env python3
"""dq's Python package beside gguf-py: `dq.gguf.dequantize` against
`gguf.quants.dequantize` per block type on the same blocks (one thread each), and a
transformers GGUF load with and without the drop-in (`dq.gguf.patch()`).

Needs a release build of dq-py in the running Python (`pip install ./dq-py`), gguf
0.19.0, and for the load transformers + torch. Blocks as ggufpy.py makes them (random,
f16 scales finite normals). Prints markdown tables (or --json); every dq result is
checked bit for bit against gguf-py's first.

    python benches/peers/python_gguf.py [--types Q4_K,IQ2_XXS] [--elements N]
        [--min-time S] [--model FILE.gguf | --synth HIDDEN,LAYERS,TYPE]
        [--load-repeats R] [--json]

The load defaults to the tiny committed llama fixture (overhead-bound); `--synth
2048,8,Q4_K[,VOCAB]` writes a llama-architecture GGUF of that size with random blocks under
benches/peers/build/ first, `--model` takes any GGUF transformers loads.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

import gguf
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES

import dq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ggufpy import SCALES, blocks  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def best_time(f, min_time: float) -> float:
    """The fastest of repeated calls of `f` over at least `min_time` s (3 calls or more)."""
    best, spent, n = float("inf"), 0.0, 0
    while spent < min_time or n < 3:
        t = time.perf_counter()
        f()
        dt = time.perf_counter() - t
        best, spent, n = min(best, dt), spent + dt, n + 1
    return best


def per_type(a) -> list[dict]:
    rng = np.random.default_rng(7)
    rows = []
    for name in a.types.split(","):
        qtype = T[name]
        block, size = GGML_QUANT_SIZES[qtype]
        raw = blocks(qtype, a.elements // block, rng)
        with np.errstate(all="ignore"):
            want = gguf.quants.dequantize(raw, qtype)
            got = dq.gguf.dequantize(raw, qtype, threads=1)
            if not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
                raise SystemExit(f"{name}: dq differs from gguf-py")
            py = best_time(lambda: gguf.quants.dequantize(raw, qtype), a.min_time)
        dq1 = best_time(lambda: dq.gguf.dequantize(raw, qtype, threads=1), a.min_time)
        rows.append({"type": name, "elements": raw.shape[0] * block, "ggufpy_s": py,
                     "dq_1t_s": dq1, "speedup": py / dq1})
    return rows


def load_times(a) -> dict:
    import torch
    import transformers
    transformers.logging.set_verbosity_error()
    path = Path(a.model).resolve()

    def load():
        m = transformers.AutoModelForCausalLM.from_pretrained(
            str(path.parent), gguf_file=path.name, dtype=torch.float32)
        return m.state_dict()

    times = {}
    for mode in ("gguf-py", "dq"):
        if mode == "dq":
            dq.gguf.patch()
        try:
            load()  # warm: imports, page cache
            times[mode] = min(timed(load) for _ in range(a.load_repeats))
        finally:
            dq.gguf.unpatch()
    return {"model": str(path), "ggufpy_s": times["gguf-py"], "dq_s": times["dq"],
            "speedup": times["gguf-py"] / times["dq"]}


def synth_llama(spec: str) -> Path:
    """A llama GGUF of `HIDDEN,LAYERS,TYPE[,VOCAB]`: random blocks (ggufpy.py's) for
    every matrix, f32 norms, a placeholder vocabulary of VOCAB tokens (default 32000;
    gguf-py's reader parses it item by item, twice per load)."""
    hidden, layers, name, *rest = spec.split(",")
    hidden, layers, qtype = int(hidden), int(layers), T[name]
    vocab = int(rest[0]) if rest else 32000
    heads, inter = hidden // 64, hidden * 8 // 3 // 256 * 256
    path = Path(__file__).resolve().parent / "build" / f"llama-{hidden}-{layers}-{name}-{vocab}.gguf"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    w = gguf.GGUFWriter(str(path), "llama")
    for add, v in [(w.add_context_length, 2048), (w.add_embedding_length, hidden),
                   (w.add_block_count, layers), (w.add_feed_forward_length, inter),
                   (w.add_rope_dimension_count, 64), (w.add_head_count, heads),
                   (w.add_head_count_kv, heads), (w.add_layer_norm_rms_eps, 1e-5)]:
        add(v)
    w.add_tokenizer_model("llama")
    w.add_token_list(["<unk>", "<s>", "</s>"] + [f"t{i}" for i in range(vocab - 3)])
    w.add_token_scores([0.0] * vocab)
    w.add_token_types([2, 3, 3] + [1] * (vocab - 3))

    def matrix(name: str, rows: int, cols: int):
        block, size = GGML_QUANT_SIZES[qtype]
        raw = blocks(qtype, rows * cols // block, rng).reshape(rows, cols // block * size)
        w.add_tensor(name, raw, raw_shape=raw.shape, raw_dtype=qtype)

    def norm(name: str):
        w.add_tensor(name, np.ones(hidden, dtype=np.float32))

    matrix("token_embd.weight", vocab, hidden)
    for b in range(layers):
        p = f"blk.{b}"
        norm(f"{p}.attn_norm.weight")
        norm(f"{p}.ffn_norm.weight")
        for t in ("attn_q", "attn_k", "attn_v", "attn_output"):
            matrix(f"{p}.{t}.weight", hidden, hidden)
        matrix(f"{p}.ffn_gate.weight", inter, hidden)
        matrix(f"{p}.ffn_up.weight", inter, hidden)
        matrix(f"{p}.ffn_down.weight", hidden, inter)
    norm("output_norm.weight")
    matrix("output.weight", vocab, hidden)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def timed(f) -> float:
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--types", default=",".join(SCALES))
    p.add_argument("--elements", type=int, default=4096 * 1024)
    p.add_argument("--min-time", type=float, default=1.0)
    p.add_argument("--model", default=str(ROOT / "tests" / "fixtures" / "folder" / "llama.gguf"))
    p.add_argument("--synth", help="HIDDEN,LAYERS,TYPE[,VOCAB]: load a synthetic llama GGUF instead")
    p.add_argument("--load-repeats", type=int, default=3)
    p.add_argument("--no-load", action="store_true", help="skip the transformers load")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    if a.synth:
        a.model = str(synth_llama(a.synth))
    rows = per_type(a)
    load = None if a.no_load else load_times(a)
    if a.json:
        print(json.dumps({"types": rows, "load": load}, indent=2))
        return
    print("| type | elements | gguf-py s | dq.gguf 1t s | dq / gguf-py |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['type']} | {r['elements']} | {r['ggufpy_s']:.4f} | {r['dq_1t_s']:.5f} | {r['speedup']:.1f}x |")
    if load:
        print(f"\ntransformers load of {load['model']}: gguf-py {load['ggufpy_s']:.3f} s, "
              f"with dq.gguf.patch() {load['dq_s']:.3f} s ({load['speedup']:.1f}x)")


if __name__ == "__main__":
    sys.exit(main())
