#!/usr/bin/env python3
"""NumPy's idiomatic unpack-and-dequantize of a GPTQ and an AWQ 4-bit linear, timed.

The peer of issue 17's speed row: a 4096x11008 linear (K = 4096 inputs, N = 11008
outputs), group 128, dequantized into the `nn.Linear` weight `[N, K]` in bf16
(ml_dtypes), one thread (NumPy's element-wise ufuncs do not thread). The dequantize
expressions are the ones the fixture script ports from the projects' own code
(scripts/make_hf_fixtures.py: `gptq_dequantize` from AutoGPTQ's torch path,
`awq_dequantize_gemm` from AutoAWQ's `packing_utils`), imported from it, so the peer
is exactly the code the fixtures trust.

GB/s = (qweight + qzeros + scales bytes + bf16 output bytes) / median seconds, beside
a memcpy yardstick (`np.copyto` of the output's bytes: read + write) in the same run.

Usage (from the repository root, in the peers venv):
    bash benches/peers/run.sh --checkpoints [--k 4096] [--n 11008] [--group 128] [--reps 5]
"""

import argparse
import json
import sys
import time
from pathlib import Path

import ml_dtypes
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from make_hf_fixtures import awq_dequantize_gemm, gptq_dequantize  # noqa: E402


def median_seconds(fn, reps):
    fn()  # warm-up: page in the inputs, let NumPy allocate once
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def gptq_case(rng, k, n, group):
    groups = k // group
    qweight = rng.integers(-(2**31), 2**31, (k // 8, n), dtype=np.int64).astype(np.int32)
    qzeros = rng.integers(-(2**31), 2**31, (groups, n // 8), dtype=np.int64).astype(np.int32)
    scales = rng.uniform(1e-3, 1e-2, (groups, n)).astype(np.float16)
    g_idx = np.arange(k, dtype=np.int32) // group

    def run():
        w = gptq_dequantize(qweight, qzeros, scales, g_idx, 4, v1=True)
        return np.ascontiguousarray(w).astype(ml_dtypes.bfloat16)

    return run, qweight.nbytes + qzeros.nbytes + scales.nbytes


def awq_case(rng, k, n, group):
    groups = k // group
    qweight = rng.integers(-(2**31), 2**31, (k, n // 8), dtype=np.int64).astype(np.int32)
    qzeros = rng.integers(-(2**31), 2**31, (groups, n // 8), dtype=np.int64).astype(np.int32)
    scales = rng.uniform(1e-3, 1e-2, (groups, n)).astype(np.float16)

    def run():
        w = awq_dequantize_gemm(qweight, qzeros, scales, 4, group)
        return np.ascontiguousarray(w).astype(ml_dtypes.bfloat16)

    return run, qweight.nbytes + qzeros.nbytes + scales.nbytes


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--k", type=int, default=4096, help="input features (rows of qweight)")
    p.add_argument("--n", type=int, default=11008, help="output features")
    p.add_argument("--group", type=int, default=128)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    rng = np.random.default_rng(1)
    out_bytes = a.k * a.n * 2
    src = np.ones(out_bytes, dtype=np.uint8)
    dst = np.zeros(out_bytes, dtype=np.uint8)
    memcpy_s = median_seconds(lambda: np.copyto(dst, src), a.reps)
    rows = [{"case": "memcpy", "seconds": memcpy_s, "gbps": 2 * out_bytes / memcpy_s / 1e9}]
    for name, make in [("gptq-4bit-g%d" % a.group, gptq_case), ("awq-4bit-g%d" % a.group, awq_case)]:
        run, in_bytes = make(rng, a.k, a.n, a.group)
        s = median_seconds(run, a.reps)
        rows.append({"case": name, "seconds": s, "gbps": (in_bytes + out_bytes) / s / 1e9})
    cpu = next(
        (line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
        "unknown",
    )
    if a.json:
        print(json.dumps({"cpu": cpu, "k": a.k, "n": a.n, "group": a.group, "rows": rows}, indent=1))
        return
    print(f"CPU: {cpu}; NumPy {np.__version__}; K={a.k} N={a.n} group {a.group} -> bf16 [N, K], 1 thread")
    print("| case | median ms | GB/s | vs memcpy |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r['case']} | {r['seconds'] * 1e3:.1f} | {r['gbps']:.2f} | {r['gbps'] / rows[0]['gbps']:.3f}x |")


if __name__ == "__main__":
    main()
