#!/usr/bin/env python3
"""Each checkpoint family's reference library on CPU against dq, on the same tensor.

Per family (an N x K linear, default 11008 x 4096, random weights as the library
quantizes or stores them), the library's own dequantization is timed on CPU (median
of --repeat calls after one warm-up; torch limited to --threads threads), the same
tensors are written as a checkpoint folder, and `examples/time_checkpoint.rs` times
dq on that folder the same way (generated and JIT, f32 output into a reused buffer,
median of --repeat calls after one warm-up). Both produce f32 (the library in f32
where it can; its own dtype otherwise, named in the table; the libraries allocate
their output per call). GB/s = (the linear's tensor bytes + f32 output bytes) /
time, as `cargo bench --bench checkpoints`.

| family | reference | library |
|---|---|---|
| fp8-block128 | DeepSeek-V3 `weight_dequant` (Triton, GPU only) as its torch CPU port: `x.float()` times the block's scale, vectorized | torch |
| ct-nvfp4 | compressed-tensors `NVFP4PackedCompressor.decompress` | compressed-tensors, torch |
| modelopt-nvfp4 | ModelOpt `NVFP4QTensor.dequantize` (non-fast path) transcribed in torch (modelopt is not installed) | torch |
| bnb-nf4-double | bitsandbytes `functional.dequantize_4bit` | bitsandbytes |
| bnb-int8 | bitsandbytes `functional.int8_vectorwise_dequant` | bitsandbytes |
| mlx-4bit-g64 | `mlx.core.dequantize` (mlx[cpu]) | mlx |
| mxfp4 | transformers `integrations.mxfp4.convert_moe_packed_tensors` | transformers, torch |

A family whose library does not import here is left out with a note (the libraries
live in different environments: bitsandbytes + transformers, torch +
compressed-tensors, mlx[cpu]; versions in scripts/requirements-fixtures-b.txt).

Usage: PYTHON=VENV/bin/python bash benches/peers/run.sh --checkpoints-ref
       [--families a,b] [--k K] [--n N] [--threads T] [--repeat R] [--json]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

UP = "model.layers.0.mlp.up_proj"
EXPERTS = "model.layers.0.mlp.experts.down_proj"
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)


def timed(fn, repeat):
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2]


def config(d, cfg):
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg))


def save_torch(d, tensors):
    from safetensors.torch import save_file
    d.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(d / "model.safetensors"))


def nbytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors.values())


# Each family: (reference description, output dtype name, setup(d, n, k) -> (call, tensor bytes)).

def fp8(d, n, k):
    import torch
    rng = np.random.default_rng(1)
    codes = rng.integers(0, 256, (n, k), dtype=np.uint8)
    codes[(codes & 0x7F) == 0x7F] &= 0xFE
    x = torch.from_numpy(codes).view(torch.float8_e4m3fn)
    s = torch.from_numpy(rng.uniform(1e-4, 2e-4, (n // 128, k // 128)).astype(np.float32))
    t = {f"{UP}.weight": x, f"{UP}.weight_scale_inv": s}
    save_torch(d, t)
    config(d, {"torch_dtype": "bfloat16", "quantization_config": {
        "quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}})

    def call():
        y = x.to(torch.float32).view(n // 128, 128, k // 128, 128) * s[:, None, :, None]
        return y.view(n, k)
    return call, nbytes(t), "f32"


def ct_nvfp4(d, n, k):
    import torch
    from compressed_tensors.compressors.nvfp4.base import NVFP4PackedCompressor
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme
    args = QuantizationArgs(num_bits=4, type="float", strategy="tensor_group", symmetric=True,
                            dynamic=False, group_size=16, scale_dtype=torch.float8_e4m3fn,
                            zp_dtype=torch.float8_e4m3fn)
    scheme = QuantizationScheme(targets=["Linear"], weights=args)
    rng = np.random.default_rng(2)
    packed = {
        "weight_packed": torch.from_numpy(rng.integers(0, 256, (n, k // 2), dtype=np.uint8)),
        "weight_scale": torch.from_numpy(rng.uniform(1, 400, (n, k // 16)).astype(np.float32)).to(torch.float8_e4m3fn),
        "weight_global_scale": torch.tensor([448.0 * 6.0 / 3.5], dtype=torch.float32),
    }
    save_torch(d, {f"{UP}.{f}": v for f, v in packed.items()})
    cfg_args = {"num_bits": 4, "type": "float", "symmetric": True, "group_size": 16,
                "strategy": "tensor_group", "dynamic": False, "scale_dtype": "torch.float8_e4m3fn"}
    config(d, {"torch_dtype": "bfloat16", "quantization_config": {
        "quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
        "quantization_status": "compressed",
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": cfg_args,
                                      "format": "nvfp4-pack-quantized"}}}})
    return (lambda: NVFP4PackedCompressor.decompress(dict(packed), scheme)["weight"]), \
        nbytes(packed), "library default"


def modelopt_nvfp4(d, n, k):
    import torch
    rng = np.random.default_rng(3)
    codes = torch.from_numpy(rng.integers(0, 256, (n, k // 2), dtype=np.uint8))
    scale = torch.from_numpy(rng.uniform(1, 400, (n, k // 16)).astype(np.float32)).to(torch.float8_e4m3fn)
    scale_2 = torch.tensor(3.5e-4, dtype=torch.float32)
    t = {f"{UP}.weight": codes, f"{UP}.weight_scale": scale, f"{UP}.weight_scale_2": scale_2}
    save_torch(d, t)
    config(d, {"torch_dtype": "bfloat16", "quantization_config": {
        "quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16}})
    table = torch.from_numpy(E2M1)

    def call():
        per_block_scale = scale.to(torch.float32) * scale_2
        unpacked = torch.empty((n, k), dtype=torch.long)
        unpacked[..., 1::2] = codes >> 4
        unpacked[..., 0::2] = codes & 0x0F
        deq = table[unpacked.reshape(-1)].reshape(n, k)
        return (deq.view(n, k // 16, 16) * per_block_scale.unsqueeze(-1)).reshape(n, k)
    return call, nbytes(t), "f32"


def bnb_nf4(d, n, k):
    import bitsandbytes.functional as F
    import torch
    w = torch.randn(n, k) * 0.05
    packed, state = F.quantize_4bit(w, blocksize=64, compress_statistics=True, quant_type="nf4")
    t = {f"{UP}.weight": packed}
    for key, v in state.as_dict(packed=True).items():
        t[f"{UP}.weight.{key}"] = v
    save_torch(d, t)
    config(d, {"torch_dtype": "float32", "quantization_config": {
        "quant_method": "bitsandbytes", "load_in_4bit": True, "load_in_8bit": False,
        "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": True,
        "bnb_4bit_compute_dtype": "float32", "bnb_4bit_quant_storage": "uint8"}})
    return (lambda: F.dequantize_4bit(packed, state)), nbytes(t), "f32"


def bnb_int8(d, n, k):
    import bitsandbytes.functional as F
    import torch
    cb, scb, _ = F.int8_vectorwise_quant(torch.randn(n, k, dtype=torch.float16))
    t = {f"{UP}.weight": cb, f"{UP}.SCB": scb}
    save_torch(d, t)
    config(d, {"torch_dtype": "float16", "quantization_config": {
        "quant_method": "bitsandbytes", "load_in_4bit": False, "load_in_8bit": True}})
    return (lambda: F.int8_vectorwise_dequant(cb, scb)), nbytes(t), "f32"


def mlx4(d, n, k):
    import mlx.core as mx
    rng = np.random.default_rng(4)
    w = mx.array((rng.standard_normal((n, k)) * 0.1).astype(np.float32)).astype(mx.bfloat16)
    wq, s, b = mx.quantize(w, group_size=64, bits=4)
    mx.eval(wq, s, b)
    d.mkdir(parents=True, exist_ok=True)
    mx.save_safetensors(str(d / "model.safetensors"),
                        {f"{UP}.weight": wq, f"{UP}.scales": s, f"{UP}.biases": b},
                        metadata={"format": "mlx"})
    q = {"group_size": 64, "bits": 4}
    config(d, {"quantization": q, "quantization_config": q})

    def call():
        y = mx.dequantize(wq, s, b, group_size=64, bits=4)
        mx.eval(y)
    return call, wq.nbytes + s.nbytes + b.nbytes, "bf16 (the scales' type)"


def mxfp4(d, n, k):
    import torch
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors
    blocks = torch.randint(0, 256, (1, n, k // 32, 16), dtype=torch.uint8)
    scales = torch.randint(118, 130, (1, n, k // 32), dtype=torch.uint8)
    t = {f"{EXPERTS}_blocks": blocks, f"{EXPERTS}_scales": scales}
    save_torch(d, t)
    config(d, {"torch_dtype": "bfloat16", "quantization_config": {"quant_method": "mxfp4"}})
    return (lambda: convert_moe_packed_tensors(blocks.clone(), scales.clone(), dtype=torch.float32)), \
        nbytes(t), "f32"


FAMILIES = {
    "fp8-block128": fp8,
    "ct-nvfp4": ct_nvfp4,
    "modelopt-nvfp4": modelopt_nvfp4,
    "bnb-nf4-double": bnb_nf4,
    "bnb-int8": bnb_int8,
    "mlx-4bit-g64": mlx4,
    "mxfp4": mxfp4,
}


def dq_times(timer, d, threads, repeat):
    """dq's seconds per backend on the folder's linears (`time_checkpoint`)."""
    try:
        r = subprocess.run([timer, str(d), "--threads", str(threads), "--repeat", str(repeat)],
                           capture_output=True, text=True)
    except OSError as e:
        return {}, f"{timer}: {e.strerror}"
    if r.returncode != 0:
        return {}, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
    return json.loads(r.stdout)["backends"], None


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--families", default=",".join(FAMILIES))
    p.add_argument("--k", type=int, default=4096)
    p.add_argument("--n", type=int, default=11008)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--timer", default=None,
                   help="dq's timer (default: target/release/examples/time_checkpoint)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    if a.k % 128 or a.n % 128:
        sys.exit("--k and --n: multiples of 128")
    os.environ.setdefault("OMP_NUM_THREADS", str(a.threads))
    try:
        import torch
        torch.set_num_threads(a.threads)
    except ImportError:
        pass
    root = Path(__file__).resolve().parents[2]
    target = Path(os.environ.get("CARGO_TARGET_DIR", root / "target"))
    timer = a.timer or str(target / "release" / "examples" / "time_checkpoint")
    rows, notes = [], []
    with tempfile.TemporaryDirectory(prefix="dq-checkpoints-ref-") as tmp:
        for name in a.families.split(","):
            if name not in FAMILIES:
                sys.exit(f"unknown family {name}; known: {', '.join(FAMILIES)}")
            d = Path(tmp) / name
            try:
                call, src, out = FAMILIES[name](d, a.n, a.k)
            except ImportError as e:
                notes.append(f"{name}: left out ({e})")
                continue
            ref_s = timed(call, a.repeat)
            dq_s, err = dq_times(timer, d, a.threads, a.repeat)
            if err:
                notes.append(f"{name}: dq failed: {err}")
            total = src + a.n * a.k * 4
            best = min(dq_s.values()) if dq_s else None
            rows.append({
                "family": name, "n": a.n, "k": a.k, "threads": a.threads, "reference_out": out,
                "reference_s": ref_s, "reference_gbps": total / ref_s / 1e9,
                "dq_s": dq_s, "dq_best_gbps": total / best / 1e9 if best else None,
                "speedup": ref_s / best if best else None,
            })
    if a.json:
        print(json.dumps({"rows": rows, "notes": notes}, indent=1))
        return
    print(f"reference libraries on CPU vs dq (f32 out), {a.n}x{a.k}, {a.threads} thread(s)  ")
    print("| family | reference ms (out) | reference GB/s | dq ms (generated / jit) | dq best GB/s | dq / reference |")
    print("|---|--:|--:|--:|--:|--:|")
    for r in rows:
        dqs = " / ".join(f"{r['dq_s'][b] * 1e3:.1f}" if b in r["dq_s"] else "n/a" for b in ("generated", "jit"))
        best = f"{r['dq_best_gbps']:.2f}" if r["dq_best_gbps"] else "n/a"
        sp = f"{r['speedup']:.1f}x" if r["speedup"] else "n/a"
        print(f"| {r['family']} | {r['reference_s'] * 1e3:.1f} ({r['reference_out']}) | "
              f"{r['reference_gbps']:.2f} | {dqs} | {best} | {sp} |")
    for note in notes:
        print(f"\n{note}  ")


if __name__ == "__main__":
    main()
