"""dq.dequantize (DynamicDequantize) over NumPy arrays: values NumPy computes with the
contract's arithmetic ((q - z) in exact integers, one f32 multiply, one rounding)."""

from __future__ import annotations

import numpy as np
import pytest

import dq
from conftest import assert_same_bits

ml_dtypes = pytest.importorskip("ml_dtypes", reason="bfloat16 arrays are ml_dtypes'")


def test_per_channel_s8():
    src = np.array([[[10, -20], [30, -40]]], dtype=np.int8)
    scales = np.array([0.1, 0.2], dtype=np.float32)
    got = dq.dequantize(src, scales, qtype="per_channel", axis=1)
    want = src.astype(np.float32) * scales.reshape(1, 2, 1)
    assert_same_bits(got, want, "per_channel")
    assert got[0, 1, 1] == np.float32(-40) * np.float32(0.2)


def test_per_group_packed_u4_to_bf16():
    # u4 weights [2, 6], low nibble first; groups of 4 along the rows, the second partial.
    q = np.arange(1, 13, dtype=np.uint8).reshape(2, 6)
    packed = (q.reshape(-1)[0::2] | (q.reshape(-1)[1::2] << 4)).astype(np.uint8)
    scales = np.array([[0.5, 2.0], [1.0, -1.0]], dtype=ml_dtypes.bfloat16)
    zps = np.array([[1, 2], [3, 4]], dtype=np.uint8)
    got = dq.dequantize(packed, scales, zps, src_dtype="u4", shape=(2, 6),
                        qtype="per_group", group_shape=(1, 4), threads=2)
    g = np.arange(6) // 4
    want = ((q.astype(np.int32) - zps[:, g]).astype(np.float32) *
            scales.astype(np.float32)[:, g]).astype(ml_dtypes.bfloat16)
    assert_same_bits(got, want, "per_group u4")
    assert float(got[0, 4]) == 6.0 and float(got[1, 0]) == 4.0


def test_random_per_group_s8_with_zero_points_every_dtype():
    rng = np.random.default_rng(5)
    src = rng.integers(-128, 128, size=(6, 40), dtype=np.int8)
    scales = rng.standard_normal((6, 5)).astype(np.float32)
    zps = rng.integers(-128, 128, size=(6, 5), dtype=np.int8)
    g = np.arange(40) // 8
    exact = (src.astype(np.int32) - zps[:, g]).astype(np.float32) * scales[:, g]
    got = dq.dequantize(src, scales, zps, qtype="per_group", group_shape=[1, 8])
    assert_same_bits(got, exact, "f32")
    for np_dtype in (np.float16, ml_dtypes.bfloat16):
        s16 = scales.astype(np_dtype)
        want = ((src.astype(np.int32) - zps[:, g]).astype(np.float32) *
                s16.astype(np.float32)[:, g]).astype(np_dtype)
        got = dq.dequantize(src, s16, zps, qtype="per_group", group_shape=[1, 8])
        assert_same_bits(got, want, np.dtype(np_dtype).name)


def test_errors():
    src = np.zeros((2, 6), np.int8)
    scales = np.ones((2, 2), np.float32)
    with pytest.raises(dq.DqError, match="group_shape entry 0 for dimension 1 is below 1"):
        dq.dequantize(src, scales, qtype="per_group", group_shape=[1, 0])
    with pytest.raises(dq.DqError, match="unknown qtype `per_row`"):
        dq.dequantize(src, scales, qtype="per_row")
    with pytest.raises(dq.DqError, match="src has dtype complex64"):
        dq.dequantize(np.zeros(4, np.complex64), np.ones(1, np.float32))
