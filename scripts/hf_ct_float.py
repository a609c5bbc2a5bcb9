"""compressed-tensors `float-quantized` (FP8) and `nvfp4-pack-quantized` fixtures, and
NVIDIA ModelOpt NVFP4 (issue 41).

Called by `make_hf_fixtures.py` (it reuses that script's helpers and output folder);
needs torch and compressed-tensors (CPU): see `requirements-fixtures.txt`.

compressed-tensors 0.20.0 (PyPI), its own code run here:
- `compressors/naive_quantized/base.py` `FloatQuantizationCompressor.compress` /
  `decompress` -> `quantization/lifecycle/forward.py` `dequantize` ->
  `forward_helpers.py` `_dequantize`: `x_q.to(scale.dtype) * scale`, then `.to(dtype)`.
- `compressors/nvfp4/base.py` `NVFP4PackedCompressor.compress` / `decompress`:
  `unpack_fp4_from_uint8` (low nibble first), `scale.to(bf16)`, then `_dequantize` with
  `scale = scale / global_scale` (the stored `weight_global_scale` is the reciprocal of
  the per-tensor scale: it divides).
The expected files hold the f32 value: the same calls with the scale widened to f32
first (exact: an f8/bf16 scale is an f32), output f32; the library's own output (in
the scale's or bf16 dtype) is asserted to be that value rounded once.

NVIDIA ModelOpt NVFP4 (`hf_quant_config.json` `quant_algo: NVFP4`; `weight` U8 packed,
`weight_scale` F8_E4M3 per 16, `weight_scale_2` F32 scalar): ModelOpt cannot run here
(it needs CUDA); `modelopt/torch/quantization/qtensor/nvfp4_tensor.py`
`NVFP4QTensor.dequantize` (NVIDIA/TensorRT-Model-Optimizer) is transcribed:
`per_block_scale = scale.to(float32) * double_scale`, then `e2m1 * per_block_scale`,
f32, with ModelOpt's own `e2m1_values` table, whose code 8 is `+0.0` (OCP e2m1's code
8 is -0.0: the two differ in the sign of zero outputs); the second check is an
independent NumPy evaluation of the same formula.
"""

import numpy as np
import torch
from compressed_tensors.compressors.naive_quantized.base import FloatQuantizationCompressor
from compressed_tensors.compressors.nvfp4.base import NVFP4PackedCompressor
from compressed_tensors.compressors.nvfp4.helpers import unpack_fp4_from_uint8
from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme
from compressed_tensors.quantization.lifecycle.forward import dequantize

import make_hf_fixtures as base
from hf_fp8 import write_fp8_safetensors

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6],
                dtype=np.float32)


def bits_of(t):
    return t.contiguous().view(torch.int16 if t.element_size() == 2 else torch.int32).numpy()


def stored(t):
    """A torch tensor as `write_fp8_safetensors` takes it."""
    if t.dtype == torch.float8_e4m3fn:
        return (t.view(torch.uint8).numpy().copy(), "float8_e4m3fn")
    if t.dtype == torch.bfloat16:
        b = base.Bf16(np.zeros(1))
        b.bits = t.view(torch.int16).numpy().view(np.uint16).copy()
        return b
    return t.numpy().copy()


def ct_fp8_linear(rng, n, k, args, scale_dtype):
    scheme = QuantizationScheme(targets=["Linear"], weights=args)
    shape = {"tensor": (1,), "channel": (n, 1)}.get(str(getattr(args.strategy, "value", args.strategy)))
    if str(getattr(args.strategy, "value", args.strategy)) == "group":
        shape = (n, -(-k // args.group_size))
    if str(getattr(args.strategy, "value", args.strategy)) == "block":
        bn, bk = args.block_structure
        shape = (-(-n // bn), -(-k // bk))
    w = torch.from_numpy(rng.standard_normal((n, k)).astype(np.float32)).to(scale_dtype)
    scale = torch.from_numpy(rng.uniform(2e-3, 5e-3, shape).astype(np.float32)).to(scale_dtype)
    packed = FloatQuantizationCompressor.compress({"weight": w, "weight_scale": scale}, scheme)
    assert packed["weight"].dtype == torch.float8_e4m3fn
    assert list(packed["weight"].shape) == [n, k]
    ref = FloatQuantizationCompressor.decompress(packed, scheme)["weight"]
    wide = dict(packed, weight_scale=packed["weight_scale"].to(torch.float32))
    y = FloatQuantizationCompressor.decompress(wide, scheme)["weight"]
    assert y.dtype == torch.float32
    assert np.array_equal(bits_of(y.to(ref.dtype)), bits_of(ref)), "library output != rounded f32"
    return {"weight": stored(packed["weight"]), "weight_scale": stored(packed["weight_scale"])}, \
        y.numpy()


def ct_config(fmt, args):
    return {
        "quant_method": "compressed-tensors",
        "format": fmt,
        "quantization_status": "compressed",
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": args.model_dump(mode="json"),
                                      "input_activations": None, "format": fmt}},
        "ignore": ["lm_head"],
        "version": "0.20.0",
    }


def ct_fp8_case(name, seed, args, scale_dtype, shapes):
    rng = np.random.default_rng(seed)
    d = base.new_case(name)
    tensors = base.plain_tensors(rng)
    for prefix, (n, k) in shapes.items():
        t, y = ct_fp8_linear(rng, n, k, args, scale_dtype)
        for field, value in t.items():
            tensors[f"{prefix}.{field}"] = value
        base.write_expected(d, prefix, y)
    write_fp8_safetensors(d / "model.safetensors", tensors)
    base.write_config(d, ct_config("float-quantized", args), "bfloat16")


def nvfp4_args():
    return QuantizationArgs(num_bits=4, type="float", strategy="tensor_group", symmetric=True,
                            dynamic=False, group_size=16, scale_dtype=torch.float8_e4m3fn,
                            zp_dtype=torch.float8_e4m3fn)


def ct_nvfp4_linear(rng, n, k):
    args = nvfp4_args()
    scheme = QuantizationScheme(targets=["Linear"], weights=args)
    w = torch.from_numpy(rng.standard_normal((n, k)).astype(np.float32)).to(torch.bfloat16)
    # llm-compressor's global scale: 448 * 6 / amax (the reciprocal of a per-tensor scale).
    gscale = torch.tensor([448.0 * 6.0 / float(w.float().abs().max())], dtype=torch.float32)
    block_amax = w.float().abs().reshape(n, k // 16, 16).amax(-1)
    scale = (gscale * block_amax / 6.0).to(torch.float8_e4m3fn).to(torch.float32)
    packed = NVFP4PackedCompressor.compress(
        {"weight": w, "weight_scale": scale, "weight_global_scale": gscale}, scheme)
    assert packed["weight_packed"].dtype == torch.uint8
    assert packed["weight_scale"].dtype == torch.float8_e4m3fn
    ref = NVFP4PackedCompressor.decompress(packed, scheme)["weight"]
    # The same dequantize, in f32: the unpacked e2m1 values and the scale widened first.
    x = unpack_fp4_from_uint8(packed["weight_packed"], n, k, dtype=torch.float32)
    s = packed["weight_scale"].to(torch.float32)
    y = dequantize(x_q=x, scale=s, args=args, global_scale=gscale, dtype=torch.float32)
    assert np.array_equal(bits_of(y.to(ref.dtype)), bits_of(ref)), "library output != rounded f32"
    # Independent check: low nibble first, scale / global scale in f32, one multiply.
    codes = packed["weight_packed"].numpy()
    e = np.empty((n, k), dtype=np.uint8)
    e[:, 0::2], e[:, 1::2] = codes & 15, codes >> 4
    eff = (s.numpy() / gscale.numpy()[0]).astype(np.float32)
    again = E2M1[e] * np.repeat(eff, 16, axis=1)
    assert np.array_equal(again.view(np.uint32), y.numpy().view(np.uint32))
    tensors = {"weight_packed": packed["weight_packed"].numpy().copy(),
               "weight_scale": stored(packed["weight_scale"]),
               "weight_global_scale": gscale.numpy().copy()}
    return tensors, y.numpy()


def ct_nvfp4_case(name, seed, shapes):
    rng = np.random.default_rng(seed)
    d = base.new_case(name)
    tensors = base.plain_tensors(rng)
    for prefix, (n, k) in shapes.items():
        t, y = ct_nvfp4_linear(rng, n, k)
        for field, value in t.items():
            tensors[f"{prefix}.{field}"] = value
        base.write_expected(d, prefix, y)
    write_fp8_safetensors(d / "model.safetensors", tensors)
    base.write_config(d, ct_config("nvfp4-pack-quantized", nvfp4_args()), "bfloat16")


# ModelOpt's `e2m1_values` (nvfp4_tensor.py): `0` at code 8, a positive zero.
MODELOPT_E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, 0, -0.5, -1, -1.5, -2, -3, -4, -6],
                         dtype=np.float32)


def modelopt_nvfp4_linear(rng, n, k):
    codes = rng.integers(0, 256, (n, k // 2)).astype(np.uint8)
    scale = torch.from_numpy(rng.uniform(0.01, 400, (n, k // 16)).astype(np.float32)) \
        .to(torch.float8_e4m3fn)
    scale_2 = torch.tensor(float(np.float32(rng.uniform(1e-5, 1e-3))), dtype=torch.float32)
    # NVFP4QTensor.dequantize, non-fast path.
    q_per_block_scale = scale.to(torch.float32)
    per_block_scale = q_per_block_scale * scale_2
    packed = torch.from_numpy(codes.copy())
    unpacked = torch.empty((n, k), dtype=torch.long)
    unpacked[..., 1::2] = packed >> 4
    unpacked[..., 0::2] = packed & 0x0F
    deq = torch.from_numpy(MODELOPT_E2M1)[unpacked.reshape(-1)].reshape(n, k)
    y = (deq.view(n, k // 16, 16) * per_block_scale.unsqueeze(-1)).reshape(n, k)
    # Independent check: NumPy, the same two products in f32.
    eff = (scale.to(torch.float32).numpy() * np.float32(scale_2.item())).astype(np.float32)
    e = np.empty((n, k), dtype=np.uint8)
    e[:, 0::2], e[:, 1::2] = codes & 15, codes >> 4
    again = MODELOPT_E2M1[e] * np.repeat(eff, 16, axis=1)
    assert np.array_equal(again.view(np.uint32), y.numpy().view(np.uint32))
    tensors = {"weight": codes, "weight_scale": stored(scale),
               "weight_scale_2": scale_2.numpy().copy(),
               "input_scale": np.array(1.0, dtype=np.float32)}
    return tensors, y.numpy()


def modelopt_nvfp4_case(name, seed, shapes):
    rng = np.random.default_rng(seed)
    d = base.new_case(name)
    tensors = base.plain_tensors(rng)
    for prefix, (n, k) in shapes.items():
        t, y = modelopt_nvfp4_linear(rng, n, k)
        for field, value in t.items():
            tensors[f"{prefix}.{field}"] = value
        base.write_expected(d, prefix, y)
    write_fp8_safetensors(d / "model.safetensors", tensors)
    # ModelOpt's export: config.json's quantization_config mirrors hf_quant_config.json.
    base.write_config(d, {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
                          "kv_cache_quant_algo": None, "exclude_modules": ["lm_head"]},
                      "bfloat16")


def main():
    up, down = "model.layers.0.mlp.up_proj", "model.layers.0.mlp.down_proj"
    fp8 = dict(num_bits=8, type="float", symmetric=True, dynamic=False)
    ct_fp8_case("ct-fp8-tensor", 301, QuantizationArgs(strategy="tensor", **fp8),
                torch.bfloat16, {up: (24, 40)})
    ct_fp8_case("ct-fp8-channel", 302, QuantizationArgs(strategy="channel", **fp8),
                torch.float32, {up: (20, 36), down: (12, 20)})
    ct_fp8_case("ct-fp8-group", 303, QuantizationArgs(strategy="group", group_size=16, **fp8),
                torch.bfloat16, {up: (10, 64)})
    ct_fp8_case("ct-fp8-block", 304,
                QuantizationArgs(strategy="block", block_structure=[16, 32], **fp8),
                torch.float32, {up: (40, 96)})
    ct_nvfp4_case("ct-nvfp4", 305, {up: (20, 64), down: (8, 32)})
    modelopt_nvfp4_case("modelopt-nvfp4", 306, {up: (12, 48)})
