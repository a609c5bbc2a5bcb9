#!/usr/bin/env python3
"""A large GPTQ v1 4-bit g128 checkpoint of random words, for timing `dq convert`.

Not a fixture (nothing reads it in CI): `--linears` linears of K x N (default 44 of
4096 x 11008, about 1 GB of packed words, qzeros, scales and sorted g_idx) in one
`model.safetensors`, plus `config.json`, written to OUT.

Usage: python scripts/make_big_checkpoint.py OUT [--linears 44] [--k 4096] [--n 11008]
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
    p.add_argument("--linears", type=int, default=44)
    p.add_argument("--k", type=int, default=4096)
    p.add_argument("--n", type=int, default=11008)
    p.add_argument("--group", type=int, default=128)
    a = p.parse_args()
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


if __name__ == "__main__":
    main()
