#!/usr/bin/env python3
"""gguf-py's `gguf.quants.dequantize` (NumPy) beside dq on the same GGUF blocks.

For each block type: random blocks of `--elements` elements (f16 scales finite and
normal) written to a one-tensor GGUF under --dir; gguf-py's dequantize of those bytes
timed (best of repeats over --min-time s, one thread: NumPy's ufuncs run on one), then
`dq model FILE --backend B --threads T --json` on the file (dq's own dequantize time of
the tensor). Prints one row per type: gguf-py's and dq's seconds and the ratio.

    bash benches/peers/run.sh --ggufpy [--types IQ2_XXS,Q4_K] [--elements N]
        [--threads 1] [--backend generated] [--min-time 1] [--json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import gguf
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES

# Every block type gguf-py 0.19.0 dequantizes, and where its f16 scale lies (IQ1_M's
# is the top nibbles of the bytes listed).
SCALES = {
    "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0],
    "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208],
    "IQ2_XXS": [0], "IQ2_XS": [0], "IQ2_S": [0], "IQ3_XXS": [0], "IQ3_S": [0],
    "IQ1_S": [0], "IQ1_M": [49, 51, 53, 55], "IQ4_NL": [0], "IQ4_XS": [0],
    "TQ1_0": [52], "TQ2_0": [64], "MXFP4": [], "NVFP4": [],
}


def blocks(qtype: T, n_blocks: int, rng: np.random.Generator) -> np.ndarray:
    """Random blocks whose f16 scales are finite normals (e8m0/e4m3 bytes moderate)."""
    _, size = GGML_QUANT_SIZES[qtype]
    b = rng.integers(0, 256, (n_blocks, size), dtype=np.uint8)
    offs = SCALES[qtype.name]
    bits = (rng.integers(5, 20, n_blocks, dtype=np.uint16) << 10) | rng.integers(0, 1024, n_blocks, dtype=np.uint16)
    if qtype == T.IQ1_M:
        for k, off in enumerate(offs):
            b[:, off] = (b[:, off] & 0x0F) | (((bits >> (4 * k)) & 0xF).astype(np.uint8) << 4)
    elif qtype == T.MXFP4:
        b[:, 0] = rng.integers(110, 140, n_blocks, dtype=np.uint8)
    elif qtype == T.NVFP4:
        b[:, :4] = rng.integers(0x20, 0x50, (n_blocks, 4), dtype=np.uint8)
    for off in offs if qtype != T.IQ1_M else []:
        b[:, off:off + 2] = bits.view(np.uint8).reshape(n_blocks, 2)
    return b


def time_ggufpy(raw: np.ndarray, qtype: T, min_time: float) -> float:
    best, spent = float("inf"), 0.0
    while spent < min_time or best == float("inf"):
        t = time.perf_counter()
        gguf.quants.dequantize(raw, qtype)
        dt = time.perf_counter() - t
        best, spent = min(best, dt), spent + dt
    return best


def time_dq(dq: str, path: Path, backend: str, threads: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        out = subprocess.run([dq, "model", str(path), "--backend", backend, "--threads", str(threads), "--json"],
                             check=True, capture_output=True, text=True).stdout
        rows = [r for r in json.loads(out)["backends"] if r["backend"] == backend]
        best = min(best, rows[0]["dequant_s"])
    return best


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dq", required=True)
    p.add_argument("--dir", default=str(Path(__file__).resolve().parent / "build" / "ggufpy"))
    p.add_argument("--types", default=",".join(SCALES))
    p.add_argument("--elements", type=int, default=4096 * 4096)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--backend", default="generated")
    p.add_argument("--min-time", type=float, default=1.0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    out_dir = Path(a.dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    rows = []
    for name in a.types.split(","):
        qtype = T[name]
        block, size = GGML_QUANT_SIZES[qtype]
        n_blocks = a.elements // block
        raw = blocks(qtype, n_blocks, rng)
        path = out_dir / f"{name.lower()}.gguf"
        w = gguf.GGUFWriter(path, "dq-peer")
        w.add_tensor("w", raw.reshape(-1, 4096 // block * size) if a.elements % 4096 == 0 and 4096 % block == 0
                     else raw.reshape(1, -1), raw_dtype=qtype)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        with np.errstate(all="ignore"):
            py = time_ggufpy(raw.reshape(-1), qtype, a.min_time)
        dq = time_dq(a.dq, path, a.backend, a.threads, a.repeats)
        rows.append({"type": name, "elements": n_blocks * block, "ggufpy_s": py, "dq_s": dq,
                     "dq_backend": a.backend, "dq_threads": a.threads, "speedup": py / dq})
    if a.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"| type | elements | gguf-py s | dq {a.backend} {a.threads}t s | dq / gguf-py |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['type']} | {r['elements']} | {r['ggufpy_s']:.4f} | {r['dq_s']:.5f} | {r['speedup']:.1f}x |")


if __name__ == "__main__":
    sys.exit(main())
