#!/usr/bin/env python3
"""A large checkpoint of random weights, for timing `dq convert`.

Not a fixture (nothing reads it in CI). `--format gptq` (the default): a GPTQ v1
4-bit g128 checkpoint, `--linears` linears of K x N (default 44 of 4096 x 11008,
about 1 GB of packed words, qzeros, scales and sorted g_idx). `--format fp8`: a
DeepSeek-style block-scaled FP8 checkpoint (`quant_method: "fp8"`,
`weight_block_size: [128, 128]`), `P.weight` F8_E4M3 [N, K] (random bytes, no
NaN codes) and `P.weight_scale_inv` F32 (or F8_E8M0 with `--e8m0`) per 128 x 128
block; default 24 linears of 4096 x 11008, about 1.08 GB. Either in one
`model.safetensors`, plus `config.json` (torch_dtype bfloat16), written to OUT.

Usage: python scripts/make_big_checkpoint.py OUT [--format gptq|fp8] [--e8m0]
       [--linears N] [--k 4096] [--n 11008]
(needs numpy and safetensors, e.g. the peers venv: benches/peers/.venv/bin/python)
"""

import argparse
import json
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--format", choices=["gptq", "fp8"], default="gptq")
    p.add_argument("--e8m0", action="store_true", help="fp8: F8_E8M0 scales")
    p.add_argument("--linears", type=int)
    p.add_argument("--k", type=int, default=4096)
    p.add_argument("--n", type=int, default=11008)
    p.add_argument("--group", type=int, default=128)
    a = p.parse_args()
    if a.format == "fp8":
        return fp8(a)
    a.linears = a.linears or 44
    rng = np.random.default_rng(3)
    groups = a.k // a.group
    tensors = {}
    for i in range(a.linears):
        prefix = f"model.layers.{i}.mlp.up_proj"
        tensors[f"{prefix}.qweight"] = rng.integers(-(2**31), 2**31, (a.k // 8, a.n), dtype=np.int64).astype(np.int32)
        tensors[f"{prefix}.qzeros"] = rng.integers(-(2**31), 2**31, (groups, a.n // 8), dtype=np.int64).astype(np.int32)
        tensors[f"{prefix}.scales"] = rng.uniform(1e-3, 1e-2, (groups, a.n)).astype(np.float16)
        tensors[f"{prefix}.g_idx"] = (np.arange(a.k) // a.group).astype(np.int32)
    a.out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(a.out / "model.safetensors"))
    config = {
        "quantization_config": {
            "quant_method": "gptq",
            "bits": 4,
            "group_size": a.group,
            "desc_act": False,
            "sym": False,
            "checkpoint_format": "gptq",
        }
    }
    (a.out / "config.json").write_text(json.dumps(config, indent=1))
    size = (a.out / "model.safetensors").stat().st_size
    print(f"wrote {a.out}: {a.linears} linears, {size / 1e9:.2f} GB")


def fp8(a):
    """The FP8 checkpoint, its safetensors header written here (numpy has no f8)."""
    rng = np.random.default_rng(3)
    linears = a.linears or 24
    bk = 128
    sn, sk = -(-a.n // bk), -(-a.k // bk)
    entries, blobs, offset = {}, [], 0

    def add(name, dtype, shape, data):
        nonlocal offset
        entries[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)

    for i in range(linears):
        prefix = f"model.layers.{i}.mlp.up_proj"
        w = rng.integers(0, 256, (a.n, a.k), dtype=np.uint8)
        w[(w & 0x7F) == 0x7F] &= 0xFE  # e4m3fn's NaN codes to +-448
        add(f"{prefix}.weight", "F8_E4M3", [a.n, a.k], w.tobytes())
        if a.e8m0:
            s = rng.integers(112, 124, (sn, sk), dtype=np.uint8)
            add(f"{prefix}.weight_scale_inv", "F8_E8M0", [sn, sk], s.tobytes())
        else:
            s = rng.uniform(1e-4, 1e-3, (sn, sk)).astype("<f4")
            add(f"{prefix}.weight_scale_inv", "F32", [sn, sk], s.tobytes())
    header = json.dumps(dict(sorted(entries.items())), separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)
    a.out.mkdir(parents=True, exist_ok=True)
    path = a.out / "model.safetensors"
    with open(path, "wb") as f:
        f.write(len(header).to_bytes(8, "little"))
        f.write(header)
        for blob in blobs:
            f.write(blob)
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "torch_dtype": "bfloat16",
        "quantization_config": {
            "quant_method": "fp8",
            "fmt": "e4m3",
            "activation_scheme": "dynamic",
            "weight_block_size": [bk, bk],
        },
    }
    (a.out / "config.json").write_text(json.dumps(config, indent=1))
    print(f"wrote {a.out}: {linears} FP8 linears, {path.stat().st_size / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
