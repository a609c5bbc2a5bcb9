#!/usr/bin/env python3
"""Writes tests/fixtures/hf/{bnb-*,mlx-*,mxfp4-*}: tiny bitsandbytes, MLX and gpt-oss
MXFP4 checkpoints made by the libraries themselves on CPU, with each linear's expected
weight as the library dequantizes it (`expected/<output name>.bin`, raw little-endian
f32, row-major in the output's shape).

    python scripts/make_hf_fixtures_b.py bnb     # torch + bitsandbytes (CPU backend)
    python scripts/make_hf_fixtures_b.py mxfp4   # torch + transformers
    python scripts/make_hf_fixtures_b.py mlx     # mlx[cpu]

Pinned versions: scripts/requirements-fixtures-b.txt. The expected values:
- bitsandbytes 4-bit: `bitsandbytes.functional.dequantize_4bit(weight, quant_state)`
  (its CPU kernel) of a float32 weight; the same weight quantized from bf16 and f16 is
  checked here to dequantize to the round-to-nearest-even of those f32 values.
- LLM.int8: `bitsandbytes.functional.int8_vectorwise_dequant(CB, SCB)` (f32).
- MLX: `mlx.core.dequantize` (CPU), in the scales' dtype, widened to f32.
- MXFP4: transformers' `convert_moe_packed_tensors` in float32, as the model loads it
  (`[E, K, N]`, the name without `_blocks`).
"""

import json
import os
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "hf")
UP = "model.layers.0.mlp.up_proj"
DOWN = "model.layers.0.mlp.down_proj"
Q = "model.layers.0.self_attn.q_proj"


def folder(name, config):
    d = os.path.join(ROOT, name)
    os.makedirs(os.path.join(d, "expected"), exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    return d


def expect(d, name, values):
    np.asarray(values, dtype="<f4").tofile(os.path.join(d, "expected", name + ".bin"))


def bnb_default_dequantize_4bit(packed, state):
    """`dequantize_4bit` through bitsandbytes' default (pure torch) kernel: blocks of
    the flattened weight, as quantize_4bit and the CUDA kernel have them. Its CPU C
    kernel (0.50.2) reads rows whose length is not a multiple of the block size with
    per-row blocks (`row * (K / blocksize) + k / blocksize`), which is not the layout
    quantize_4bit wrote, so it is used only where the two agree (checked)."""
    import bitsandbytes.functional as F
    import torch
    from bitsandbytes.backends.default.ops import _dequantize_4bit_compute
    from bitsandbytes.backends.utils import _get_4bit_code

    absmax = state.absmax
    if state.nested:
        absmax = F.dequantize_blockwise(state.absmax, state.state2)
        absmax += state.offset
    code = _get_4bit_code(state.quant_type, "cpu")
    assert torch.equal(code, state.code)
    return _dequantize_4bit_compute(packed.reshape(-1), absmax.float(), code, state.blocksize, state.shape, state.dtype)


def bnb():
    import bitsandbytes.functional as F
    import torch
    from safetensors.torch import save_file

    torch.manual_seed(41)
    # (name, quant type, double quant, linears (prefix, N, K)); K = 96 puts blocks of 64
    # across rows; 160 x 128 has 320 blocks: two nested blocks of 256, the last short.
    cases = [
        ("bnb-nf4", "nf4", False, [(UP, 32, 96), (DOWN, 16, 64)]),
        ("bnb-nf4-double", "nf4", True, [(UP, 160, 128), (Q, 32, 96)]),
        ("bnb-fp4", "fp4", False, [(UP, 32, 96)]),
        ("bnb-fp4-double", "fp4", True, [(UP, 160, 128)]),
    ]
    for name, qt, dq, linears in cases:
        d = folder(name, {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "torch_dtype": "float32",
            "quantization_config": {
                "quant_method": "bitsandbytes",
                "_load_in_4bit": True,
                "_load_in_8bit": False,
                "load_in_4bit": True,
                "load_in_8bit": False,
                "bnb_4bit_quant_type": qt,
                "bnb_4bit_use_double_quant": dq,
                "bnb_4bit_compute_dtype": "float32",
                "bnb_4bit_quant_storage": "uint8",
                "llm_int8_threshold": 6.0,
            },
        })
        tensors = {"model.norm.weight": torch.ones(16)}
        for prefix, n, k in linears:
            w = torch.randn(n, k) * 0.05
            w[0, :8] = torch.tensor([0.0, -0.0, 1e-9, -0.3, 0.3, 0.2, -0.2, 0.1])
            packed, state = F.quantize_4bit(w, blocksize=64, compress_statistics=dq, quant_type=qt)
            y = bnb_default_dequantize_4bit(packed, state)
            assert y.dtype == torch.float32
            if k % 64 == 0:
                assert torch.equal(y, F.dequantize_4bit(packed, state)), name
            for dt in (torch.bfloat16, torch.float16):
                p2, s2 = F.quantize_4bit(w.to(dt), blocksize=64, compress_statistics=dq, quant_type=qt)
                y2 = F.dequantize_4bit(p2, s2)
                # One rounding of bitsandbytes' f32 values, when the codes and scales agree.
                if torch.equal(p2, packed) and torch.equal(s2.absmax, state.absmax):
                    assert torch.equal(y2, F.dequantize_4bit(packed, state).to(dt)), (name, dt)
            tensors[prefix + ".weight"] = packed
            for key, v in state.as_dict(packed=True).items():
                tensors[prefix + ".weight." + key] = v
            tensors[prefix + ".bias"] = torch.randn(n)
            expect(d, prefix + ".weight", y.numpy())
        save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(d, "model.safetensors"))

    # LLM.int8: weight int8 [N, K], SCB f32 [N], weight_format u8 as Linear8bitLt saves them.
    d = folder("bnb-int8", {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "torch_dtype": "float16",
        "quantization_config": {
            "quant_method": "bitsandbytes",
            "_load_in_4bit": False,
            "_load_in_8bit": True,
            "load_in_4bit": False,
            "load_in_8bit": True,
            "llm_int8_threshold": 6.0,
        },
    })
    tensors = {"model.norm.weight": torch.ones(16, dtype=torch.float16)}
    for prefix, n, k in [(UP, 32, 96), (DOWN, 24, 40)]:
        w = (torch.randn(n, k) * 0.7).half()
        cb, scb, _ = F.int8_vectorwise_quant(w)
        tensors[prefix + ".weight"] = cb
        tensors[prefix + ".SCB"] = scb
        tensors[prefix + ".weight_format"] = torch.tensor(0, dtype=torch.uint8)
        y = F.int8_vectorwise_dequant(cb, scb)
        assert y.dtype == torch.float32
        expect(d, prefix + ".weight", y.numpy())
    save_file(tensors, os.path.join(d, "model.safetensors"))


def mxfp4():
    import torch
    from safetensors.torch import save_file
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors

    torch.manual_seed(7)
    d = folder("mxfp4-gpt-oss", {
        "architectures": ["GptOssForCausalLM"],
        "model_type": "gpt_oss",
        "torch_dtype": "bfloat16",
        "quantization_config": {
            "quant_method": "mxfp4",
            "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"],
        },
    })
    base = "model.layers.0.mlp.experts."
    tensors = {"model.norm.weight": torch.ones(16, dtype=torch.bfloat16)}
    # gate_up: E = 2 experts, 2I = 48 rows, H = 64 inputs; down: H = 64 rows, I = 96 inputs.
    for name, e, rows, k in [("gate_up_proj", 2, 48, 64), ("down_proj", 2, 64, 96)]:
        blocks = torch.randint(0, 256, (e, rows, k // 32, 16), dtype=torch.uint8)
        # Exponents around 127 (scale 1), a few extremes: 0 (2^-127) and 254.
        scales = torch.randint(118, 134, (e, rows, k // 32), dtype=torch.uint8)
        scales[0, 0, 0], scales[0, 1, 0], scales[1, 2, 1] = 0, 254, 127
        tensors[base + name + "_blocks"] = blocks
        tensors[base + name + "_scales"] = scales
        tensors[base + name + "_bias"] = torch.randn(e, rows).bfloat16()
        y = convert_moe_packed_tensors(blocks.clone(), scales.clone(), dtype=torch.float32)
        assert tuple(y.shape) == (e, k, rows), y.shape
        expect(d, base + name, y.contiguous().numpy())
    save_file(tensors, os.path.join(d, "model.safetensors"))


def mlx():
    import mlx.core as mx

    rng = np.random.default_rng(3)
    # (name, bits, group size, scale dtype, linears (prefix, N, K))
    cases = [
        ("mlx-4bit-g64", 4, 64, mx.float16, [(UP, 16, 128), (DOWN, 8, 64)]),
        ("mlx-4bit-g32-bf16", 4, 32, mx.bfloat16, [(UP, 16, 96)]),
        ("mlx-8bit-g64-f32", 8, 64, mx.float32, [(UP, 8, 128)]),
        ("mlx-2bit-g32", 2, 32, mx.float16, [(UP, 8, 64)]),
        ("mlx-3bit-g32-bf16", 3, 32, mx.bfloat16, [(UP, 8, 96)]),
        ("mlx-6bit-g64", 6, 64, mx.float16, [(UP, 8, 128)]),
    ]
    for name, bits, gs, dt, linears in cases:
        q = {"group_size": gs, "bits": bits}
        d = folder(name, {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "quantization": q,
            "quantization_config": q,
        })
        tensors = {"model.norm.weight": mx.ones((16,), dtype=dt)}
        for prefix, n, k in linears:
            w = mx.array((rng.standard_normal((n, k)) * 0.1).astype(np.float32)).astype(dt)
            wq, s, b = mx.quantize(w, group_size=gs, bits=bits)
            y = mx.dequantize(wq, s, b, group_size=gs, bits=bits)
            assert y.dtype == dt
            tensors[prefix + ".weight"] = wq
            tensors[prefix + ".scales"] = s
            tensors[prefix + ".biases"] = b
            expect(d, prefix + ".weight", np.array(y.astype(mx.float32)))
        mx.save_safetensors(os.path.join(d, "model.safetensors"), tensors, metadata={"format": "mlx"})


if __name__ == "__main__":
    {"bnb": bnb, "mxfp4": mxfp4, "mlx": mlx}[sys.argv[1]]()
