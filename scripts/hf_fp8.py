"""FP8 block-scaled checkpoint fixtures (`quant_method: "fp8"`, issue 41).

Called by `make_hf_fixtures.py` (it reuses that script's helpers and output folder);
needs torch (CPU) for its float8 dtypes: see `requirements-fixtures.txt`.

Layout (DeepSeek-V3 / Kimi-K2 / Qwen3-*-FP8, transformers `FineGrainedFP8Config`):
`P.weight` float8_e4m3fn `[N, K]`, `P.weight_scale_inv` `[ceil(N / bn), ceil(K / bk)]`
in float32 (DeepSeek-V3), bfloat16, or float8_e8m0fnu (newer releases' "ue8m0" scales).

Reference: deepseek-ai/DeepSeek-V3 `inference/kernel.py` `weight_dequant` /
`weight_dequant_kernel`, which `inference/fp8_cast_bf16.py` runs with
`torch.set_default_dtype(torch.bfloat16)`. Per program `(pid_m, pid_n)` of the grid
`(cdiv(M, BLOCK), cdiv(N, BLOCK))` the kernel does

    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    s = tl.load(s_ptr + pid_m * n + pid_n)
    y = x * s
    tl.store(y_ptr + offs, y, mask=mask)   # y_ptr is bf16: one round-to-nearest-even

Triton needs a GPU; `weight_dequant` below transcribes the same operation order into
torch on CPU, block by block (the masks are the slices: partial blocks at the edges).
The expected files hold `y` in f32, before the store's rounding (the tests round it to
f16/bf16 once). A second, independent check decodes the e4m3 codes from their bits in
NumPy, multiplies by the expanded scales and asserts the same bits.
"""

import numpy as np
import torch

import make_hf_fixtures as base

E4M3_NAN = (0x7F, 0xFF)


def weight_dequant(x, s, bn, bk):
    """DeepSeek's `weight_dequant` in torch on CPU, f32 out (before the bf16 store)."""
    m, n = x.shape
    y = torch.empty((m, n), dtype=torch.float32)
    for pid_m in range(-(-m // bn)):
        for pid_n in range(-(-n // bk)):
            rows = slice(pid_m * bn, (pid_m + 1) * bn)
            cols = slice(pid_n * bk, (pid_n + 1) * bk)
            xb = x[rows, cols].to(torch.float32)
            sb = s[pid_m, pid_n].to(torch.float32)  # tl.load of the scale; f32 math
            y[rows, cols] = xb * sb
    return y


def e4m3_numpy(codes):
    """Independent decode of e4m3fn codes (no NaN codes here) to f32."""
    c = codes.astype(np.int64)
    sign = np.where(c & 0x80, -1.0, 1.0)
    exp = (c >> 3) & 0xF
    man = c & 0x7
    val = np.where(exp == 0, man / 8.0 * 2.0**-6, (1 + man / 8.0) * 2.0 ** (exp - 7.0))
    return (sign * val).astype(np.float32)


def random_codes(rng, n, k):
    codes = rng.integers(0, 256, (n, k)).astype(np.uint8)
    codes[np.isin(codes, E4M3_NAN)] = 0x7E  # 448, the largest finite value
    # Landmarks: +-0, the smallest subnormal, +-448.
    codes.flat[:5] = [0x00, 0x80, 0x01, 0x7E, 0xFE]
    return codes


def scale_tensor(rng, shape, kind):
    """(the stored tensor for `write_safetensors`, its torch tensor)."""
    if kind == "e8m0":
        e = rng.integers(110, 135, shape).astype(np.uint8)
        return (e, "float8_e8m0fnu"), torch.from_numpy(e.copy()).view(torch.float8_e8m0fnu)
    if kind == "bf16":
        b = base.Bf16(rng.uniform(1e-4, 2e-2, shape).astype(np.float32))
        t = torch.from_numpy(b.bits.view(np.int16).copy()).view(torch.bfloat16)
        return b, t
    # amax / 448, as DeepSeek's quantizer stores it: any f32 (not a bf16 value).
    f = rng.uniform(1e-4, 2e-2, shape).astype(np.float32)
    return f, torch.from_numpy(f.copy())


def fp8_linear(rng, n, k, block, kind):
    bn, bk = block
    codes = random_codes(rng, n, k)
    stored, s = scale_tensor(rng, (-(-n // bn), -(-k // bk)), kind)
    x = torch.from_numpy(codes.copy()).view(torch.float8_e4m3fn)
    y = weight_dequant(x, s, bn, bk).numpy()
    # Second check: NumPy decode, scales expanded per element, one f32 multiply.
    s32 = s.to(torch.float32).numpy()
    s_full = np.repeat(np.repeat(s32, bn, axis=0), bk, axis=1)[:n, :k]
    again = e4m3_numpy(codes) * s_full
    assert np.array_equal(again.view(np.uint32), y.view(np.uint32)), "the two decodes differ"
    return {"weight": (codes, "float8_e4m3fn"), "weight_scale_inv": stored}, y


def write_fp8_safetensors(path, tensors):
    """`write_safetensors`, with `(uint8 array, dtype name)` pairs for the float8 dtypes."""
    specs, keep = {}, []
    for name, t in tensors.items():
        if isinstance(t, tuple):
            arr, dtype = np.ascontiguousarray(t[0]), t[1]
        elif isinstance(t, base.Bf16):
            arr, dtype = np.ascontiguousarray(t.bits), "bfloat16"
        else:
            arr, dtype = t.copy(order="C"), t.dtype.name  # keeps a 0-d scalar 0-d
        keep.append(arr)
        specs[name] = base.TensorSpec(dtype=dtype, shape=arr.shape, data_ptr=arr.ctypes.data,
                                      data_len=arr.nbytes)
    base.serialize_file(specs, str(path), metadata={"format": "pt"})


def fp8_case(name, seed, block, kind, shapes):
    rng = np.random.default_rng(seed)
    d = base.new_case(name)
    tensors = base.plain_tensors(rng)
    for prefix, (n, k) in shapes.items():
        t, expected = fp8_linear(rng, n, k, block, kind)
        for field, value in t.items():
            tensors[f"{prefix}.{field}"] = value
        base.write_expected(d, prefix, expected)
    write_fp8_safetensors(d / "model.safetensors", tensors)
    base.write_config(d, {
        "quant_method": "fp8",
        "fmt": "e4m3",
        "activation_scheme": "dynamic",
        "weight_block_size": list(block),
    }, "bfloat16")


def main():
    up, down = "model.layers.0.mlp.up_proj", "model.layers.0.mlp.down_proj"
    # [128, 128] blocks, N = 130 and K = 136: partial blocks on both edges.
    fp8_case("fp8-block128-f32", 201, (128, 128), "f32", {up: (130, 136)})
    fp8_case("fp8-block16x32-bf16", 202, (16, 32), "bf16", {up: (40, 70), down: (24, 64)})
    fp8_case("fp8-block32-e8m0", 203, (32, 32), "e8m0", {up: (50, 45)})
