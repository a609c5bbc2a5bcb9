#!/usr/bin/env python3
"""Writes the HuggingFace quantized-checkpoint fixtures under tests/fixtures/hf/.

Each case is a checkpoint folder (`config.json` with `quantization_config`, and
`model.safetensors` or shards with `model.safetensors.index.json`) plus
`expected/<linear>.bin`: the linear's `nn.Linear` weight `[N, K]` as raw
little-endian f32, from the reference implementation's own dequantize path.

The packers and the dequantizers are ported from the projects' Python (torch) code
to NumPy, line by line where it matters; each port names its source below.

Sources (repository @ commit, path):
- GPTQ v1 (`checkpoint_format: gptq`): AutoGPTQ/AutoGPTQ
  @ 9f7d37072917ab3a7545835f23e808294a542153,
  `auto_gptq/nn_modules/qlinear/qlinear_cuda.py`: `QuantLinear.pack` (stores
  `zeros - 1`) and the torch path of `QuantLinear.forward` (unpack, `zeros + 1`,
  `scales[g_idx] * (weight - zeros[g_idx])`); the 2/3-bit layout is the same `pack`.
  The act-order `g_idx` is `auto_gptq/quantization/gptq.py` `fasterquant`
  (`g_idx = [i // group_size ...][invperm]`).
- GPTQ v2 (`checkpoint_format: gptq_v2`): ModelCloud/GPTQModel @ v4.0.0
  (40759cdf06c17ea6c57637fa075f8c10547b4a6f),
  `gptqmodel/nn_modules/qlinear/__init__.py`: `PackableQuantLinear.pack` (stores the
  zero points as they are) and `PackableQuantLinear.dequantize_weight`, with
  `dequant_dtype` from `gptqmodel/nn_modules/qlinear/torch.py`.
- AWQ GEMM: casper-hansen/AutoAWQ @ 88e4c76b20755db275574e6a03c83c84ba3bece5,
  `awq/modules/linear/gemm.py` `WQLinear_GEMM.from_linear` (pack) and
  `awq/utils/packing_utils.py` `dequantize_gemm` (`unpack_awq`, `reverse_awq_order`).
- compressed-tensors pack-quantized: neuralmagic/compressed-tensors
  @ 52792be02ec09e59f3517104e755a02d0e003fbb,
  `src/compressed_tensors/compressors/quantized_compressors/pack_quantized.py`
  (`compress_weight` / `pack_to_int32`, `decompress_weight` / `unpack_from_int32`) and
  `src/compressed_tensors/quantization/lifecycle/forward.py` (`dequantize`,
  `_process_quantization`, `_dequantize`).

Torch semantics reproduced in NumPy:
- `>>` on int32 is arithmetic in both; `.to(torch.int8)` / `.astype(np.int8)` both wrap.
- int8/int16 tensor arithmetic (`weight - zeros`, `zeros + 1`) wraps in both.
- compressed-tensors' `(value + offset).to(torch.uint8)` adds a Python int to an int8
  tensor, which torch does in int8 (wrapping); NumPy 2 refuses an out-of-range scalar,
  so the port adds in int16 and casts to uint8: the same bits modulo 256. Its
  `(x << shifts).sum(dtype=torch.int32)` wraps past 2^31; the port shifts and sums in
  uint32 and views the result as int32: the same bits.
- The references multiply in the scales' dtype (f16/bf16 tensors); the expected values
  here are the same expressions evaluated in f32, as dq's SPEC section 11 defines them
  (`(q - z) * s`, one f32 multiply; exact for these small integers and 16-bit scales).
- bf16 tensors are written through the same `safetensors.serialize_file` call that
  `safetensors.numpy.save_file` makes, with torch's dtype name `bfloat16` over the raw
  bits (NumPy has no bf16 dtype).

Run from the repository root: `python3 scripts/make_hf_fixtures.py`. The output is
deterministic (fixed seeds); CI only reads it.
"""

import json
import shutil
from pathlib import Path

import numpy as np
from safetensors import TensorSpec, serialize_file

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "hf"


# ---------------------------------------------------------------------------
# dtypes and files


class Bf16:
    """A bf16 tensor held as its raw uint16 bits."""

    def __init__(self, values_f32):
        bits = np.ascontiguousarray(values_f32, dtype=np.float32).view(np.uint32)
        # Round to nearest even, as torch's float -> bfloat16 (no NaNs here).
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        self.bits = rounded.astype(np.uint16)

    def to_f32(self):
        return (self.bits.astype(np.uint32) << 16).view(np.float32)


def as_f32(t):
    return t.to_f32() if isinstance(t, Bf16) else t.astype(np.float32)


def write_safetensors(path, tensors, metadata=None):
    """`safetensors.numpy.save_file`, also taking `Bf16` tensors."""
    specs = {}
    keep = []
    for name, t in tensors.items():
        arr, dtype = (t.bits, "bfloat16") if isinstance(t, Bf16) else (t, t.dtype.name)
        arr = np.ascontiguousarray(arr)
        keep.append(arr)
        specs[name] = TensorSpec(
            dtype=dtype, shape=arr.shape, data_ptr=arr.ctypes.data, data_len=arr.nbytes
        )
    serialize_file(specs, str(path), metadata=metadata)


def write_expected(case_dir, name, weight_nk):
    d = case_dir / "expected"
    d.mkdir(exist_ok=True)
    w = np.ascontiguousarray(weight_nk, dtype="<f4")
    w.tofile(d / f"{name}.bin")


def write_config(case_dir, quantization_config, torch_dtype="float16"):
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "torch_dtype": torch_dtype,
        "quantization_config": quantization_config,
    }
    (case_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n")


def new_case(name):
    d = OUT / name
    d.mkdir(parents=True)
    return d


def plain_tensors(rng):
    """A few non-quantized tensors beside the linears: f16, bf16, f32."""
    return {
        "model.embed_tokens.weight": rng.standard_normal((6, 8)).astype(np.float16),
        "model.norm.weight": Bf16(rng.standard_normal(8)),
        "lm_head.weight": rng.standard_normal((3, 8)).astype(np.float32),
    }


def scales_f32(rng, shape):
    """Positive scales exactly representable in f16 (and so in f32)."""
    return rng.uniform(0.002, 0.05, shape).astype(np.float16).astype(np.float32)


# ---------------------------------------------------------------------------
# GPTQ: AutoGPTQ (v1) and GPTQModel (v2)


def gptq_weight(q_kn, zeros_ng, scales_ng, g_idx):
    """A float weight [N, K] that GPTQ's quantizer would have produced: W = (q - z) * s."""
    s = scales_ng[:, g_idx]
    z = zeros_ng[:, g_idx]
    return (q_kn.T.astype(np.float32) - z) * s


def gptq_intweight(W, scales_ng, zeros_ng, g_idx):
    """`pack`'s intweight loop: round((W[:, idx] + scale_zeros[g]) / scales[g]).

    `W` holds the model-dtype weight's values; scales and zeros are the quantizer's
    f32 tensors (representable in the model dtype here, so `self.scales` equals them)."""
    scales = scales_ng.T.copy()  # scales.t().contiguous()
    zeros = zeros_ng.T.copy()
    scale_zeros = zeros * scales
    cols = []
    for idx in range(W.shape[1]):
        g = g_idx[idx]
        cols.append(np.round((W[:, idx] + scale_zeros[g]) / scales[g]).astype(np.int32)[:, None])
    intweight = np.concatenate(cols, axis=1)
    return intweight.T.copy().astype(np.uint32)  # intweight.t().contiguous() as uint32


def autogptq_pack_rows(intweight, bits):
    """AutoGPTQ `pack`'s qweight loop (2, 3, 4, 8 bits): K packed along rows."""
    i = 0
    row = 0
    qweight = np.zeros((intweight.shape[0] // 32 * bits, intweight.shape[1]), dtype=np.uint32)
    while row < qweight.shape[0]:
        if bits in [2, 4, 8]:
            for j in range(i, i + (32 // bits)):
                qweight[row] |= intweight[j] << np.uint32(bits * (j - i))
            i += 32 // bits
            row += 1
        elif bits == 3:
            for j in range(i, i + 10):
                qweight[row] |= intweight[j] << np.uint32(3 * (j - i))
            i += 10
            qweight[row] |= intweight[i] << np.uint32(30)
            row += 1
            qweight[row] |= (intweight[i] >> np.uint32(2)) & np.uint32(1)
            i += 1
            for j in range(i, i + 10):
                qweight[row] |= intweight[j] << np.uint32(3 * (j - i) + 1)
            i += 10
            qweight[row] |= intweight[i] << np.uint32(31)
            row += 1
            qweight[row] |= (intweight[i] >> np.uint32(1)) & np.uint32(0x3)
            i += 1
            for j in range(i, i + 10):
                qweight[row] |= intweight[j] << np.uint32(3 * (j - i) + 2)
            i += 10
            row += 1
    return qweight.astype(np.int32)


def autogptq_pack_cols(zeros, bits):
    """AutoGPTQ `pack`'s qzeros loop: N packed along columns."""
    return autogptq_pack_rows(zeros.T.copy(), bits).T.copy()


def gptqmodel_pack(intweight, zeros, bits):
    """GPTQModel v4.0.0 `PackableQuantLinear.pack` (2, 4, 8 bits, int32 words)."""
    pack_factor = 32 // bits
    qweight = np.zeros((intweight.shape[0] // 32 * bits, intweight.shape[1]), dtype=np.uint32)
    for row in range(qweight.shape[0]):
        for j in range(pack_factor):
            qweight[row] |= intweight[row * pack_factor + j] << np.uint32(bits * j)
    qzeros = np.zeros((zeros.shape[0], zeros.shape[1] // 32 * bits), dtype=np.uint32)
    for col in range(qzeros.shape[1]):
        for j in range(pack_factor):
            qzeros[:, col] |= zeros[:, col * pack_factor + j] << np.uint32(bits * j)
    return qweight.astype(np.int32), qzeros.astype(np.int32)


def gptq_unpack(qweight, qzeros, bits):
    """The torch unpack of AutoGPTQ `forward` / GPTQModel `dequantize_weight` (2, 4, 8 bits)."""
    small = np.int16 if bits == 8 else np.int8
    wf = np.arange(0, 32, bits, dtype=np.int32)[None, :]
    zeros = (qzeros[:, :, None] >> wf[None, :, :]).astype(small)
    zeros = zeros & small((2**bits) - 1)
    zeros = zeros.reshape(qzeros.shape[0], -1)
    weight = (qweight[:, None, :] >> wf[:, :, None]).astype(small)
    weight = weight & small((2**bits) - 1)
    weight = weight.reshape(weight.shape[0] * weight.shape[1], weight.shape[2])
    return weight, zeros


def gptq_dequantize(qweight, qzeros, scales, g_idx, bits, v1):
    """`scales[g_idx] * (weight - zeros[g_idx])` ([K, N]), returned as the [N, K] weight."""
    weight, zeros = gptq_unpack(qweight, qzeros, bits)
    if v1:
        zeros = zeros + zeros.dtype.type(1)  # AutoGPTQ: `zeros = zeros + 1`, no wrap
    s = as_f32(scales)[g_idx]
    diff = (weight - zeros[g_idx]).astype(np.float32)
    return (s * diff).T


def to_model_dtype(x_f32, dtype):
    """Values of `x` rounded to the model dtype ("bf16" or np.float16), as f32."""
    return Bf16(x_f32).to_f32() if dtype == "bf16" else x_f32.astype(np.float16).astype(np.float32)


def gptq_linear(rng, *, k, n, bits, group_size, v1, act_order, sym, dtype=np.float16):
    """One GPTQ linear of a model in `dtype` (f16 or "bf16"): (tensors, expected [N, K])."""
    g = k if group_size == -1 else group_size
    groups = -(-k // g)
    maxq = 2**bits - 1
    if act_order:
        perm = rng.permutation(k)  # argsort(diag(H), descending) on some Hessian
        invperm = np.argsort(perm)
        g_idx = (np.arange(k) // g).astype(np.int32)[invperm]
    else:
        g_idx = (np.arange(k) // g).astype(np.int32)
    if sym:
        zeros = np.full((n, groups), (maxq + 1) / 2, dtype=np.float32)
    elif v1:
        # v1 stores zero - 1, so zero 0 cannot be stored; keep 1..maxq+1 (maxq+1: no wrap).
        zeros = rng.integers(1, maxq + 2, (n, groups)).astype(np.float32)
        zeros.flat[0] = maxq + 1
    else:
        zeros = rng.integers(0, maxq + 1, (n, groups)).astype(np.float32)
        zeros.flat[0] = 0
    scales = to_model_dtype(scales_f32(rng, (n, groups)), dtype)
    q = rng.integers(0, maxq + 1, (k, n)).astype(np.uint32)
    exact = gptq_weight(q, zeros, scales, g_idx)
    W = to_model_dtype(exact, dtype)  # linear.weight after GPTQ's fake quantization

    intweight = gptq_intweight(W, scales, zeros, g_idx)
    assert (intweight == q).all(), "pack does not recover the integer weight"
    if v1:
        qweight = autogptq_pack_rows(intweight, bits)
        qzeros = autogptq_pack_cols((zeros.T - 1).astype(np.uint32), bits)  # `zeros -= 1`
    else:
        qweight, qzeros = gptqmodel_pack(intweight, zeros.T.copy().astype(np.uint32), bits)
    stored_scales = Bf16(scales.T) if dtype == "bf16" else scales.T.astype(np.float16)
    tensors = {"qweight": qweight, "qzeros": qzeros, "scales": stored_scales, "g_idx": g_idx}
    expected = gptq_dequantize(qweight, qzeros, stored_scales, g_idx, bits, v1)
    assert np.array_equal(expected, exact), "dequantize does not give back the weight"
    return tensors, expected


def gptq_config(bits, group_size, desc_act, sym, fmt):
    return {
        "bits": bits,
        "group_size": group_size,
        "damp_percent": 0.01,
        "desc_act": desc_act,
        "static_groups": False,
        "sym": sym,
        "true_sequential": True,
        "model_name_or_path": None,
        "model_file_base_name": "model",
        "quant_method": "gptq",
        "checkpoint_format": fmt,
    }


def gptq_case(name, seed, *, bits, group_size, v1, act_order, sym, shapes, dtype=np.float16):
    rng = np.random.default_rng(seed)
    d = new_case(name)
    tensors = plain_tensors(rng)
    for prefix, (k, n) in shapes.items():
        t, expected = gptq_linear(
            rng, k=k, n=n, bits=bits, group_size=group_size, v1=v1,
            act_order=act_order, sym=sym, dtype=dtype,
        )
        for field, value in t.items():
            tensors[f"{prefix}.{field}"] = value
        tensors[f"{prefix}.bias"] = rng.standard_normal(n).astype(np.float16)
        write_expected(d, prefix, expected)
    write_safetensors(d / "model.safetensors", tensors, {"format": "pt"})
    fmt = "gptq" if v1 else "gptq_v2"
    write_config(d, gptq_config(bits, group_size, act_order, sym, fmt),
                 "bfloat16" if dtype == "bf16" else "float16")


def gptq_unsupported_case(name, seed, bits, k, n):
    """2/3-bit GPTQ, packed by AutoGPTQ's `pack`: dq reports these as unsupported."""
    rng = np.random.default_rng(seed)
    d = new_case(name)
    maxq = 2**bits - 1
    q = rng.integers(0, maxq + 1, (k, n)).astype(np.uint32)
    zeros = np.full((1, n), (maxq + 1) // 2, dtype=np.uint32)
    tensors = {
        "model.layers.0.mlp.up_proj.qweight": autogptq_pack_rows(q, bits),
        "model.layers.0.mlp.up_proj.qzeros": autogptq_pack_cols(zeros - 1, bits),
        "model.layers.0.mlp.up_proj.scales": scales_f32(rng, (1, n)).astype(np.float16),
        "model.layers.0.mlp.up_proj.g_idx": np.zeros(k, dtype=np.int32),
    }
    write_safetensors(d / "model.safetensors", tensors, {"format": "pt"})
    write_config(d, gptq_config(bits, -1, False, True, "gptq"))


# ---------------------------------------------------------------------------
# AWQ GEMM: AutoAWQ

AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]
AWQ_REVERSE_ORDER = [0, 4, 1, 5, 2, 6, 3, 7]


def awq_from_linear(W, w_bit, group_size, scales, zeros):
    """`WQLinear_GEMM.from_linear`: W [N, K], scales/zeros [G, N], all f16 as AutoAWQ's
    quantizer hands them over (NumPy's f16 arithmetic rounds each op like torch's)."""
    scale_zeros = zeros * scales
    half_scales = scales.astype(np.float16)  # scales.clone().half()
    pack_num = 32 // w_bit
    in_features = W.shape[1]
    cols = []
    for idx in range(in_features):
        g = idx // group_size
        cols.append(
            np.round((W[:, idx] + scale_zeros[g]) / half_scales[g]).astype(np.int32)[:, None]
        )
    intweight = np.concatenate(cols, axis=1).T.copy().astype(np.int32)
    qweight = np.zeros((intweight.shape[0], intweight.shape[1] // 32 * w_bit), dtype=np.int32)
    for col in range(intweight.shape[1] // pack_num):
        for i in range(pack_num):
            qweight_col = intweight[:, col * pack_num + AWQ_ORDER[i]]
            qweight[:, col] |= qweight_col << np.int32(i * w_bit)  # torch int32 shift
    zeros = zeros.astype(np.int32)
    qzeros = np.zeros((zeros.shape[0], zeros.shape[1] // 32 * w_bit), dtype=np.int32)
    for col in range(zeros.shape[1] // pack_num):
        for i in range(pack_num):
            qzero_col = zeros[:, col * pack_num + AWQ_ORDER[i]]
            qzeros[:, col] |= qzero_col << np.int32(i * w_bit)
    return qweight, qzeros, half_scales, intweight


def awq_dequantize_gemm(qweight, qzeros, scales, bits, group_size):
    """`packing_utils.dequantize_gemm`, in f32; returns the [N, K] weight."""
    shifts = np.arange(0, 32, bits, dtype=np.int32)
    iweights = (qweight[:, :, None] >> shifts[None, None, :]).astype(np.int8)
    iweights = iweights.reshape(iweights.shape[0], -1)
    izeros = (qzeros[:, :, None] >> shifts[None, None, :]).astype(np.int8)
    izeros = izeros.reshape(izeros.shape[0], -1)
    order = np.arange(iweights.shape[-1], dtype=np.int32).reshape(-1, 32 // bits)
    order = order[:, AWQ_REVERSE_ORDER].reshape(-1)
    izeros = izeros[:, order]
    iweights = iweights[:, order]
    iweights = iweights & np.int8((2**bits) - 1)
    izeros = izeros & np.int8((2**bits) - 1)
    scales = np.repeat(scales.astype(np.float32), group_size, axis=0)
    izeros = np.repeat(izeros, group_size, axis=0)
    return ((iweights - izeros).astype(np.float32) * scales).T


def awq_linear(rng, k, n, group_size):
    g = k if group_size == -1 else group_size
    groups = k // g
    zeros = rng.integers(0, 16, (groups, n)).astype(np.float16)
    zeros.flat[0] = 0
    zeros.flat[1] = 15
    scales = scales_f32(rng, (groups, n)).astype(np.float16)
    q = rng.integers(0, 16, (k, n))
    z32 = np.repeat(zeros.astype(np.float32), g, axis=0)
    exact = ((q - z32) * np.repeat(scales.astype(np.float32), g, axis=0)).T
    W = exact.astype(np.float16)  # the f16 linear after AWQ's fake quantization
    qweight, qzeros, half_scales, intweight = awq_from_linear(W, 4, g, scales, zeros)
    assert (intweight == q).all(), "pack does not recover the integer weight"
    expected = awq_dequantize_gemm(qweight, qzeros, half_scales, 4, g)
    assert np.array_equal(expected, exact), "dequantize does not give back the weight"
    return {"qweight": qweight, "qzeros": qzeros, "scales": half_scales}, expected


def awq_case(name, seed, group_size, shapes, shards):
    """AWQ GEMM 4-bit; `shards` > 1 splits the tensors over shard files with an index."""
    rng = np.random.default_rng(seed)
    d = new_case(name)
    tensors = plain_tensors(rng)
    for prefix, (k, n) in shapes.items():
        t, expected = awq_linear(rng, k, n, group_size)
        for field, value in t.items():
            tensors[f"{prefix}.{field}"] = value
        write_expected(d, prefix, expected)
    write_sharded(d, tensors, shards)
    write_config(d, {
        "quant_method": "awq",
        "bits": 4,
        "group_size": group_size,
        "zero_point": True,
        "version": "gemm",
        "modules_to_not_convert": None,
    })


def write_sharded(d, tensors, shards):
    if shards == 1:
        write_safetensors(d / "model.safetensors", tensors, {"format": "pt"})
        return
    names = list(tensors)
    weight_map = {}
    total = 0
    for s in range(shards):
        file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[s::shards]}  # a linear's tensors straddle shards
        write_safetensors(d / file, part, {"format": "pt"})
        for n, t in part.items():
            weight_map[n] = file
            total += (t.bits if isinstance(t, Bf16) else t).nbytes
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    (d / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")


# ---------------------------------------------------------------------------
# compressed-tensors pack-quantized


def pack_to_int32(value, num_bits, packed_dim=1):
    """`pack_to_int32` (int8 values in the signed range)."""
    assert value.dtype == np.int8
    offset = 1 << (num_bits - 1)
    value = (value.astype(np.int16) + offset).astype(np.uint8)  # torch: int8 add, wraps
    pack_factor = 32 // num_bits
    if packed_dim == 0:
        value = value.T
    rows, cols = value.shape
    padded_cols = -(-cols // pack_factor) * pack_factor
    pad_len = padded_cols - cols
    if pad_len > 0:
        value = np.pad(value, ((0, 0), (0, pad_len)))
    num_groups = padded_cols // pack_factor
    reshaped = value.reshape(rows, num_groups, pack_factor).astype(np.uint32)
    bit_shifts = np.arange(pack_factor, dtype=np.uint32) * np.uint32(num_bits)
    packed = (reshaped << bit_shifts).sum(axis=2, dtype=np.uint32).view(np.int32)
    if packed_dim == 0:
        packed = packed.T
    return np.ascontiguousarray(packed)


def unpack_from_int32(value, num_bits, shape, packed_dim=1):
    """`unpack_from_int32`: back to int8 in the signed range."""
    assert value.dtype == np.int32
    pack_factor = 32 // num_bits
    mask = (1 << num_bits) - 1
    if packed_dim == 1:
        unpacked = np.zeros((value.shape[0], value.shape[1] * pack_factor), dtype=np.int32)
        for i in range(pack_factor):
            unpacked[:, i::pack_factor] = (value >> (num_bits * i)) & mask
        unpacked = unpacked[:, : int(shape[1])]
    else:
        unpacked = np.zeros((value.shape[0] * pack_factor, value.shape[1]), dtype=np.int32)
        for i in range(pack_factor):
            unpacked[i::pack_factor, :] = (value >> (num_bits * i)) & mask
        unpacked = unpacked[: int(shape[0]), :]
    offset = pow(2, num_bits) // 2
    return (unpacked - offset).astype(np.int8)


def ct_dequantize(x_q, scale, zero_point):
    """`dequantize` with the strategy inferred from the scale's shape (as
    `decompress_weight` calls it), `_process_quantization` and `_dequantize`, in f32."""
    scale = as_f32(scale)
    if scale.shape[1] == 1:  # channel
        x = x_q.astype(np.float32)
        if zero_point is not None:
            x = x - zero_point.astype(np.float32)
        return x * scale
    rows, columns = x_q.shape
    group_size = int(columns / scale.shape[1])
    assert columns % group_size == 0
    x = x_q.reshape(rows, columns // group_size, group_size).astype(np.float32)
    if zero_point is not None:
        x = x - zero_point[:, :, None].astype(np.float32)
    return (x * scale[:, :, None]).reshape(rows, columns)


def ct_linear(rng, *, k, n, bits, group_size, symmetric, scale_dtype):
    groups = 1 if group_size is None else k // group_size
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    q = rng.integers(lo, hi + 1, (n, k)).astype(np.int8)
    q.flat[0], q.flat[1] = lo, hi
    scales = scales_f32(rng, (n, groups))
    scale = Bf16(scales) if scale_dtype == "bf16" else scales.astype(scale_dtype)
    tensors = {
        "weight_packed": pack_to_int32(q, bits),
        "weight_scale": scale,
        "weight_shape": np.array([n, k], dtype=np.int64),  # torch.tensor(weight.shape)
    }
    zp = None
    if not symmetric:
        zp = rng.integers(lo, hi + 1, (n, groups)).astype(np.int8)
        zp.flat[0], zp.flat[-1] = lo, hi
        tensors["weight_zero_point"] = pack_to_int32(zp, bits, packed_dim=0)
    # decompress_weight
    unpacked = unpack_from_int32(tensors["weight_packed"], bits, (n, k))
    assert np.array_equal(unpacked, q)
    zero_point = None
    if not symmetric:
        zero_point = unpack_from_int32(tensors["weight_zero_point"], bits, (n, groups), 0)
        assert np.array_equal(zero_point, zp)
    return tensors, ct_dequantize(unpacked, scale, zero_point)


def ct_case(name, seed, *, bits, group_size, symmetric, scale_dtype, shapes):
    rng = np.random.default_rng(seed)
    d = new_case(name)
    tensors = plain_tensors(rng)
    for prefix, (k, n) in shapes.items():
        t, expected = ct_linear(rng, k=k, n=n, bits=bits, group_size=group_size,
                                symmetric=symmetric, scale_dtype=scale_dtype)
        for field, value in t.items():
            tensors[f"{prefix}.{field}"] = value
        write_expected(d, prefix, expected)
    write_safetensors(d / "model.safetensors", tensors, {"format": "pt"})
    weights = {
        "num_bits": bits,
        "type": "int",
        "symmetric": symmetric,
        "strategy": "channel" if group_size is None else "group",
        "group_size": group_size,
        "block_structure": None,
        "dynamic": False,
        "actorder": None,
        "observer": "minmax",
        "observer_kwargs": {},
    }
    write_config(d, {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "quantization_status": "compressed",
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": weights,
                "input_activations": None,
                "output_activations": None,
                "format": "pack-quantized",
            }
        },
        "ignore": ["lm_head"],
        "kv_cache_scheme": None,
        "global_compression_ratio": None,
        "version": "0.12.2",
    }, "bfloat16" if scale_dtype == "bf16" else "float16")


# ---------------------------------------------------------------------------
# A single .safetensors file whose metadata names the format


def single_file_case(name, seed):
    """GPTQ v2 4-bit g16 in one file whose `__metadata__` carries the quantization_config
    as JSON (dq's convention; one key, since the serializer writes the metadata map in
    hash order). The tests build AutoGPTQ's `gptq_*` metadata keys themselves."""
    rng = np.random.default_rng(seed)
    d = new_case(name)
    t, expected = gptq_linear(rng, k=64, n=32, bits=4, group_size=16, v1=False,
                              act_order=False, sym=False)
    prefix = "model.layers.0.self_attn.q_proj"
    tensors = {f"{prefix}.{f}": v for f, v in t.items()}
    write_expected(d, prefix, expected)
    config = gptq_config(4, 16, False, False, "gptq_v2")
    write_safetensors(d / "gptq-v2.safetensors", tensors,
                      {"quantization_config": json.dumps(config)})


# ---------------------------------------------------------------------------


def main():
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    up, down, q = "model.layers.0.mlp.up_proj", "model.layers.0.mlp.down_proj", \
        "model.layers.0.self_attn.q_proj"

    # GPTQ v1 (AutoGPTQ). Its buffers are `K // 32 * bits` rows and `N // 32 * bits`
    # columns, so K and N are multiples of 32; K = 96 with group 64 leaves a last group of 32.
    gptq_case("gptq-v1-4bit-g64-asym", 1, bits=4, group_size=64, v1=True, act_order=False,
              sym=False, shapes={up: (96, 32), down: (64, 32)})
    gptq_case("gptq-v1-4bit-perchannel-sym", 2, bits=4, group_size=-1, v1=True,
              act_order=False, sym=True, shapes={up: (64, 32)})
    gptq_case("gptq-v1-4bit-g16-actorder-bf16", 3, bits=4, group_size=16, v1=True,
              act_order=True, sym=False, shapes={up: (64, 32), q: (32, 64)}, dtype="bf16")
    gptq_case("gptq-v1-8bit-g32-asym", 4, bits=8, group_size=32, v1=True,
              act_order=False, sym=False, shapes={up: (64, 32)})
    # GPTQ v2 (GPTQModel): act-order with a short last group.
    gptq_case("gptq-v2-4bit-g64-actorder", 5, bits=4, group_size=64, v1=False, act_order=True,
              sym=False, shapes={up: (96, 32), down: (64, 32)})
    gptq_case("gptq-v2-8bit-perchannel-sym", 6, bits=8, group_size=-1, v1=False,
              act_order=False, sym=True, shapes={up: (32, 32)})
    gptq_unsupported_case("gptq-2bit", 7, bits=2, k=32, n=32)
    gptq_unsupported_case("gptq-3bit", 8, bits=3, k=32, n=32)

    # AWQ GEMM (AutoAWQ; `N // 32 * w_bit` packed columns, so N is a multiple of 32); the
    # second is sharded over two files with an index.
    awq_case("awq-4bit-g32", 9, 32, {up: (64, 32), down: (32, 64)}, shards=1)
    awq_case("awq-4bit-g16-sharded", 10, 16, {up: (48, 32), down: (32, 32), q: (16, 64)},
             shards=2)

    # compressed-tensors pack-quantized
    ct_case("ct-4bit-group-sym", 11, bits=4, group_size=32, symmetric=True, scale_dtype="bf16",
            shapes={up: (64, 8), down: (96, 6)})
    ct_case("ct-4bit-channel-asym", 12, bits=4, group_size=None, symmetric=False,
            scale_dtype=np.float16, shapes={up: (100, 12)})
    ct_case("ct-8bit-group-asym", 13, bits=8, group_size=16, symmetric=False,
            scale_dtype="bf16", shapes={up: (48, 6), down: (32, 4)})
    ct_case("ct-8bit-channel-sym", 14, bits=8, group_size=None, symmetric=True,
            scale_dtype=np.float32, shapes={up: (36, 5)})

    single_file_case("single-file", 15)

    import hf_padded  # noqa: E402 (imports this script's helpers)
    hf_padded.main()

    import hf_fp8  # noqa: E402 (needs torch)
    hf_fp8.main()

    import hf_ct_float  # noqa: E402 (needs torch and compressed-tensors)
    hf_ct_float.main()

    total = sum(f.stat().st_size for f in OUT.rglob("*") if f.is_file())
    print(f"wrote {OUT} ({total} bytes)")


if __name__ == "__main__":
    main()
