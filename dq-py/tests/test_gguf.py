"""dq.gguf.dequantize against gguf-py: the committed fixtures (gguf-py's outputs, made
by scripts/make_gguf_fixtures.py), gguf-py run here on random blocks, shapes, inputs
and errors."""

from __future__ import annotations

import numpy as np
import pytest

import dq
from conftest import GGUF_FIXTURES, assert_same_bits, read_f32

gguf = pytest.importorskip("gguf", reason="gguf-py (pip install gguf==0.19.0) is the reference")
from gguf import GGMLQuantizationType as Q  # noqa: E402
from gguf import quants  # noqa: E402

ml_dtypes = pytest.importorskip("ml_dtypes", reason="bfloat16 outputs are ml_dtypes arrays")

STEMS = ["blocks", "tables", "low_bit", "quantized_v2"]


def fixture_tensors():
    """(stem, name, type, raw block bytes shaped [rows..., row bytes], expected f32)
    of every fixture tensor with an expected output. Sizes are dq's (ggml's):
    gguf-py 0.19.0's table says 40 bytes for Q8_1, ggml 36."""
    out = []
    for stem in STEMS:
        reader = gguf.GGUFReader(GGUF_FIXTURES / f"{stem}.gguf")
        for t in reader.tensors:
            expected = GGUF_FIXTURES / stem / f"{t.name}.bin"
            if not expected.exists():
                continue
            bt = dq.gguf.block_type(int(t.tensor_type))
            shape = [int(d) for d in reversed(t.shape)]
            row_bytes = shape[-1] // bt.block_size * bt.type_size
            n = int(np.prod(shape[:-1], dtype=np.int64)) * row_bytes
            start = int(t.data_offset)
            raw = reader.data[start:start + n].reshape(*shape[:-1], row_bytes)
            want = read_f32(expected).reshape(shape)
            out.append(pytest.param(stem, t.name, bt, raw, want, id=f"{stem}/{t.name}"))
    return out


FIXTURES = fixture_tensors()


# gguf-py 0.19.0 has no type 42, so its reader cannot open q2_0.gguf: Q2_0's
# fixtures (outputs of ggml's formula in C) are checked through dq.open below.
NOT_IN_GGUF_PY = {"Q2_0"}


def test_fixtures_cover_every_block_type_dq_decodes():
    seen = {p.values[2].name for p in FIXTURES}
    decoded = {t.name for t in dq.gguf.TYPES.values() if t.supported}
    assert seen == decoded - NOT_IN_GGUF_PY


def test_q2_0_fixtures_through_dq_open():
    f = dq.open(GGUF_FIXTURES / "q2_0.gguf")
    checked = 0
    for t in f.tensors:
        expected = GGUF_FIXTURES / "q2_0" / f"{t.name}.bin"
        want = read_f32(expected).reshape(t.shape)
        got = f.dequantize(t.name, dtype="float32")
        assert got.tobytes() == want.tobytes(), t.name
        checked += 1
    assert checked == 4


@pytest.mark.parametrize("stem,name,bt,raw,want", FIXTURES)
def test_fixture_bits_equal_gguf_py_in_every_dtype(stem, name, bt, raw, want):
    got = dq.gguf.dequantize(raw, bt.id)
    assert_same_bits(got, want, f"{name} f32")
    # f16 and bf16: the round-to-nearest-even of the same f32 values.
    for dtype, np_dtype in [("float16", np.float16), ("bfloat16", ml_dtypes.bfloat16)]:
        got16 = dq.gguf.dequantize(raw, bt.id, dtype=dtype)
        assert_same_bits(got16, want.astype(np_dtype), f"{name} {dtype}")


def _gguf_py_decodes(qtype) -> bool:
    return qtype in (Q.F32, Q.F16) or qtype in quants._type_traits


@pytest.mark.parametrize("stem,name,bt,raw,want", FIXTURES)
def test_fixture_bits_equal_gguf_py_run_here(stem, name, bt, raw, want):
    qtype = Q(bt.id)
    if not _gguf_py_decodes(qtype) or bt.name == "Q8_1":
        pytest.skip(f"gguf-py 0.19.0 does not decode {bt.name} (the committed output is checked)")
    want_here = quants.dequantize(np.array(raw), qtype)
    assert_same_bits(dq.gguf.dequantize(raw, qtype), want_here, name)


# Types gguf-py 0.19.0 quantizes (round trips through its own quantize).
QUANTIZABLE = [Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.TQ1_0, Q.TQ2_0, Q.MXFP4]
# Every type gguf-py decodes, over random block bytes.
DECODED = sorted((t for t in quants._type_traits), key=int) + [Q.F16]


@pytest.mark.parametrize("qtype", QUANTIZABLE, ids=lambda q: q.name)
def test_random_floats_quantized_by_gguf_py(qtype):
    rng = np.random.default_rng(int(qtype))
    block = gguf.GGML_QUANT_SIZES[qtype][0]
    x = (rng.standard_normal((7, 4 * max(block, 32))) * 3).astype(np.float32)
    q = quants.quantize(x, qtype)
    assert_same_bits(dq.gguf.dequantize(q, qtype), quants.dequantize(q, qtype), qtype.name)


@pytest.mark.parametrize("qtype", DECODED, ids=lambda q: q.name)
def test_random_blocks_decoded_by_gguf_py(qtype):
    rng = np.random.default_rng(100 + int(qtype))
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(3, 2, 5 * size), dtype=np.uint8)
    want = quants.dequantize(raw, qtype)
    got = dq.gguf.dequantize(raw, qtype, threads=3)
    assert got.shape == (3, 2, 5 * block)
    assert_same_bits(got, want, qtype.name)


def test_qtype_spellings_and_buffer_inputs():
    rng = np.random.default_rng(7)
    raw = rng.integers(0, 256, size=(4, 2 * 18), dtype=np.uint8)
    want = quants.dequantize(raw, Q.Q4_0)
    for qtype in (Q.Q4_0, 2, "Q4_0", "q4_0", np.uint32(2)):
        assert_same_bits(dq.gguf.dequantize(raw, qtype), want, repr(qtype))
    flat = want.reshape(-1)
    for buf in (raw.tobytes(), bytearray(raw.tobytes()), memoryview(raw.tobytes())):
        assert_same_bits(dq.gguf.dequantize(buf, Q.Q4_0), flat, type(buf).__name__)
    # A multi-dimensional memoryview keeps its shape.
    assert_same_bits(dq.gguf.dequantize(memoryview(raw), Q.Q4_0), want, "memoryview 2-D")
    # Not C-contiguous (every other row): read through a copy, as gguf-py does.
    wide = rng.integers(0, 256, size=(8, 36), dtype=np.uint8)
    assert_same_bits(dq.gguf.dequantize(wide[::2], Q.Q4_0),
                     quants.dequantize(wide[::2], Q.Q4_0), "strided")


def test_float_passthrough_as_gguf_py():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = dq.gguf.dequantize(x, Q.F32)
    assert np.shares_memory(got, x), "F32 is a view, as in gguf-py"
    raw = x.view(np.uint8)
    assert_same_bits(dq.gguf.dequantize(raw, Q.F32), quants.dequantize(raw, Q.F32), "F32 bytes")
    h = x.astype(np.float16)
    assert_same_bits(dq.gguf.dequantize(h, Q.F16), quants.dequantize(h, Q.F16), "F16")
    assert_same_bits(dq.gguf.dequantize(h, Q.F16, dtype="float16"), h, "F16 to float16")


def test_errors():
    with pytest.raises(ValueError, match=r"bytes per row \(35\) is not a multiple of Q4_0 type size \(18\)"):
        dq.gguf.dequantize(np.zeros((2, 35), np.uint8), Q.Q4_0)
    with pytest.raises(NotImplementedError, match="I8"):
        dq.gguf.dequantize(np.zeros(4, np.uint8), Q.I8)
    with pytest.raises(NotImplementedError):
        dq.gguf.dequantize(np.zeros(4, np.uint8), 4)  # retired id
    with pytest.raises(dq.DqError, match="dtype 'float64' is not one of"):
        dq.gguf.dequantize(np.zeros(18, np.uint8), Q.Q4_0, dtype="float64")
    with pytest.raises(dq.DqError, match="threads must be at least 1"):
        dq.gguf.dequantize(np.zeros(18, np.uint8), Q.Q4_0, threads=0)
    assert issubclass(dq.DqError, ValueError)


def test_patch_replaces_gguf_py_where_code_finds_it():
    rng = np.random.default_rng(3)
    raw = rng.integers(0, 256, size=(2, 210), dtype=np.uint8)
    want = quants.dequantize(raw, Q.Q6_K)
    original = quants.dequantize
    dq.gguf.patch()
    try:
        assert gguf.dequantize is dq.gguf.dequantize
        assert gguf.quants.dequantize is dq.gguf.dequantize
        from gguf import dequantize  # as transformers imports it at load time
        assert_same_bits(dequantize(raw, Q.Q6_K), want, "patched")
    finally:
        dq.gguf.unpatch()
    assert gguf.quants.dequantize is original and gguf.dequantize is original
