"""GPTQ and AWQ fixtures whose N and K are not multiples of the packing (issue 41).

Called by `make_hf_fixtures.py` (it reuses that script's helpers and output folder).

Sources (repository @ release, path):
- GPTQModel 7.7.0 (ModelCloud/GPTQModel, PyPI sdist `gptqmodel-7.7.0`):
  `gptqmodel/nn_modules/qlinear/__init__.py`: `_register_gptq_buffers` (qweight
  `[ceil(K·b/32), N]`, qzeros `[G, ceil(N·b/32)]`), `pack_original` (the loops
  `for j in range(min(pack_factor, rows - row * pack_factor))`: the fields past K or N
  stay 0), `dequantize_weight` (`zeros[:, :scales.shape[1]]`) and
  `_dequantize_from_codes` (`weight[:in_features]`, `scales[g_idx] * (weight -
  zeros[g_idx])`); `gptqmodel/utils/model.py`: `convert_gptq_v2_to_v1_format_module`
  (v1 is saved as the v2 words minus `0x11111111` (4-bit) or `0x01010101` (8-bit):
  the padded fields wrap to non-zero garbage the reader must not read) and
  `convert_gptq_v1_to_v2_format_module` (adds them back on load).
- GPTQModel 7.7.0 AWQ GEMM: `gptqmodel/nn_modules/qlinear/gemm_awq.py` `pack` and
  `gptqmodel/quantization/awq/utils/packing_utils.py` `pack_awq_columns` (N a multiple
  of 8, any K a multiple of the group size) and `dequantize_gemm`.
"""

import numpy as np

import make_hf_fixtures as base

V1_DELTA = {4: 0x11111111, 8: 0x01010101}


def gptqmodel_pack(intweight, zeros, bits):
    """`pack_original` (2/4/8 bits): K and N need not fill the last word."""
    pf = 32 // bits
    k, n = intweight.shape
    qweight = np.zeros((-(-k * bits // 32), n), dtype=np.uint32)
    for row in range(qweight.shape[0]):
        for j in range(min(pf, k - row * pf)):
            qweight[row] |= intweight[row * pf + j] << np.uint32(bits * j)
    qzeros = np.zeros((zeros.shape[0], -(-zeros.shape[1] * bits // 32)), dtype=np.uint32)
    for col in range(qzeros.shape[1]):
        for j in range(min(pf, zeros.shape[1] - col * pf)):
            qzeros[:, col] |= zeros[:, col * pf + j] << np.uint32(bits * j)
    return qweight.astype(np.int32), qzeros.astype(np.int32)


def gptqmodel_dequantize(qweight, qzeros, scales, g_idx, bits, k, n):
    """`dequantize_weight` (v2 words) -> the [N, K] weight, in f32."""
    weight, zeros = base.gptq_unpack(qweight, qzeros, bits)
    zeros = zeros[:, :n]
    weight = weight[:k]
    s = base.as_f32(scales)[g_idx]
    return (s * (weight - zeros[g_idx]).astype(np.float32)).T


def gptq_padded_linear(rng, *, k, n, bits, group_size, v1, act_order):
    g = k if group_size == -1 else group_size
    groups = -(-k // g)
    maxq = 2**bits - 1
    g_idx = (np.arange(k) // g).astype(np.int32)
    if act_order:
        g_idx = g_idx[np.argsort(rng.permutation(k))]
    # v1 is v2 minus 1 per field: keep every zero >= 1 so no borrow crosses a field.
    zeros = rng.integers(1 if v1 else 0, maxq + 1, (n, groups)).astype(np.float32)
    zeros.flat[-1] = maxq
    scales = base.to_model_dtype(base.scales_f32(rng, (n, groups)), np.float16)
    q = rng.integers(0, maxq + 1, (k, n)).astype(np.uint32)
    exact = base.gptq_weight(q, zeros, scales, g_idx)
    W = base.to_model_dtype(exact, np.float16)
    intweight = base.gptq_intweight(W, scales, zeros, g_idx)
    assert (intweight == q).all(), "pack does not recover the integer weight"
    qweight, qzeros = gptqmodel_pack(intweight, zeros.T.copy().astype(np.uint32), bits)
    expected = gptqmodel_dequantize(qweight, qzeros, scales.T.astype(np.float16), g_idx,
                                    bits, k, n)
    if v1:
        delta = np.uint32(V1_DELTA[bits])
        qzeros = (qzeros.view(np.uint32) - delta).view(np.int32)  # torch int32 `-=`: wraps
        loaded = (qzeros.view(np.uint32) + delta).view(np.int32)
        again = gptqmodel_dequantize(qweight, loaded, scales.T.astype(np.float16), g_idx,
                                     bits, k, n)
        assert np.array_equal(again, expected)
        if n % (32 // bits):
            assert (qzeros[:, -1].view(np.uint32) >> np.uint32(bits * (n % (32 // bits)))).any(), \
                "the padded fields should hold the wrapped garbage"
    assert np.array_equal(expected, exact), "dequantize does not give back the weight"
    tensors = {"qweight": qweight, "qzeros": qzeros,
               "scales": scales.T.astype(np.float16), "g_idx": g_idx}
    return tensors, expected


def gptq_padded_case(name, seed, *, bits, group_size, v1, act_order, shapes):
    rng = np.random.default_rng(seed)
    d = base.new_case(name)
    tensors = base.plain_tensors(rng)
    for prefix, (k, n) in shapes.items():
        t, expected = gptq_padded_linear(rng, k=k, n=n, bits=bits, group_size=group_size,
                                         v1=v1, act_order=act_order)
        for field, value in t.items():
            tensors[f"{prefix}.{field}"] = value
        base.write_expected(d, prefix, expected)
    base.write_safetensors(d / "model.safetensors", tensors, {"format": "pt"})
    fmt = "gptq" if v1 else "gptq_v2"
    base.write_config(d, base.gptq_config(bits, group_size, act_order, False, fmt))


def pack_awq_columns(codes, bits=4):
    """GPTQModel's `pack_awq_columns` with the AWQ order: N // 8 words per row."""
    pack_num = 32 // bits
    rows, cols = codes.shape
    grouped = codes[:, : cols // pack_num * pack_num].reshape(rows, -1, pack_num)
    grouped = grouped[:, :, base.AWQ_ORDER].astype(np.int32)
    packed = np.zeros((rows, cols // pack_num), dtype=np.int32)
    for i in range(pack_num):
        packed |= grouped[:, :, i] << np.int32(i * bits)
    return packed


def awq_padded_linear(rng, k, n, g):
    groups = k // g
    zeros = rng.integers(0, 16, (groups, n)).astype(np.float16)
    scales = base.scales_f32(rng, (groups, n)).astype(np.float16)
    q = rng.integers(0, 16, (k, n))
    exact = ((q - np.repeat(zeros.astype(np.float32), g, axis=0))
             * np.repeat(scales.astype(np.float32), g, axis=0)).T
    W = exact.astype(np.float16)
    # `pack`: intweight = round((W.T + scale_zeros[group_index]) / scales[group_index])
    gi = np.arange(k) // g
    scale_zeros = zeros * scales
    intweight = np.round((W.T + scale_zeros[gi]) / scales[gi]).astype(np.int32)
    assert (intweight == q).all(), "pack does not recover the integer weight"
    qweight = pack_awq_columns(intweight)
    qzeros = pack_awq_columns(zeros.astype(np.int32))
    expected = base.awq_dequantize_gemm(qweight, qzeros, scales, 4, g)
    assert np.array_equal(expected, exact), "dequantize does not give back the weight"
    return {"qweight": qweight, "qzeros": qzeros, "scales": scales}, expected


def awq_padded_case(name, seed, group_size, shapes):
    rng = np.random.default_rng(seed)
    d = base.new_case(name)
    tensors = base.plain_tensors(rng)
    for prefix, (k, n) in shapes.items():
        t, expected = awq_padded_linear(rng, k, n, group_size)
        for field, value in t.items():
            tensors[f"{prefix}.{field}"] = value
        base.write_expected(d, prefix, expected)
    base.write_safetensors(d / "model.safetensors", tensors, {"format": "pt"})
    base.write_config(d, {"quant_method": "awq", "bits": 4, "group_size": group_size,
                          "zero_point": True, "version": "gemm"})


def main():
    up, down = "model.layers.0.mlp.up_proj", "model.layers.0.mlp.down_proj"
    # N = 100: 13 qzeros words, the last half padding; K = 72 / 22: a padded last qweight row.
    gptq_padded_case("gptq-v2-4bit-g32-n100", 101, bits=4, group_size=32, v1=False,
                     act_order=False, shapes={up: (72, 100), down: (100, 36)})
    gptq_padded_case("gptq-v1-4bit-g16-actorder-n50", 102, bits=4, group_size=16, v1=True,
                     act_order=True, shapes={up: (44, 50)})
    gptq_padded_case("gptq-v1-8bit-perchannel-n10", 103, bits=8, group_size=-1, v1=True,
                     act_order=False, shapes={up: (22, 10)})
    # AWQ: N a multiple of 8 but not of 32, K a multiple of the group but not of 32.
    awq_padded_case("awq-4bit-g16-n40", 104, 16, {up: (48, 40), down: (80, 24)})
