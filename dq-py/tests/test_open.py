"""dq.open on the committed GGUF and HuggingFace fixtures: names, shapes, types, and
every tensor's values against the outputs the reference implementations produced."""

from __future__ import annotations

import numpy as np
import pytest

import dq
from conftest import FIXTURES, GGUF_FIXTURES, assert_same_bits, read_f32

ml_dtypes = pytest.importorskip("ml_dtypes", reason="bfloat16 outputs are ml_dtypes arrays")


@pytest.mark.parametrize("stem", ["blocks", "tables", "low_bit", "quantized_v2"])
def test_gguf_tensors_equal_the_committed_outputs(stem):
    f = dq.open(GGUF_FIXTURES / f"{stem}.gguf")
    assert f.format == "gguf"
    checked = 0
    for t in f.tensors:
        expected = GGUF_FIXTURES / stem / f"{t.name}.bin"
        if not expected.exists():
            continue
        want = read_f32(expected).reshape(t.shape)
        assert_same_bits(f.dequantize(t.name), want, t.name)
        assert_same_bits(f.dequantize(t.name, dtype="float16", threads=2),
                         want.astype(np.float16), t.name)
        assert_same_bits(f.dequantize(t.name, dtype="bfloat16"),
                         want.astype(ml_dtypes.bfloat16), t.name)
        checked += 1
    assert checked >= 28


def test_gguf_listing():
    f = dq.open(str(GGUF_FIXTURES / "metadata.gguf"))
    assert dq.Tensor("small.q8_0", (1, 32), "Q8_0") in f.tensors
    assert "small.q8_0" in f and len(f) == 3
    assert f.dequantize("small.q8_0")[0, 0] == -16.0


def test_split_set_reads_as_the_whole_file():
    whole = dq.open(GGUF_FIXTURES / "split" / "model.gguf")
    part = dq.open(GGUF_FIXTURES / "split" / "model-00002-of-00003.gguf")
    assert part.tensors == whole.tensors
    for t in whole.tensors:
        assert_same_bits(part.dequantize(t.name), whole.dequantize(t.name), t.name)


def hf_cases():
    """(checkpoint, expected output) of each HF fixture tensor with an expected output:
    `expected/<name>.bin` for tensor `<name>` or `<name>.weight`."""
    cases = []
    for d in sorted((FIXTURES / "hf").iterdir()):
        if not (d / "expected").is_dir():
            continue
        files = sorted(d.glob("*.safetensors"))
        ckpt = files[0] if not (d / "config.json").exists() and len(files) == 1 else d
        for e in sorted((d / "expected").glob("*.bin")):
            cases.append(pytest.param(ckpt, e, id=f"{d.name}/{e.stem}"))
    return cases


@pytest.mark.parametrize("ckpt,expected", hf_cases())
def test_hf_tensors_equal_the_reference_implementations(ckpt, expected):
    f = dq.open(ckpt)
    names = (expected.stem, f"{expected.stem}.weight")
    t = next(t for t in f.tensors if t.name in names)
    want = read_f32(expected).reshape(t.shape)
    assert_same_bits(f.dequantize(t.name, threads=2), want, f"{ckpt.name} {t.name}")
    assert_same_bits(f.dequantize(t.name, dtype="bfloat16"),
                     want.astype(ml_dtypes.bfloat16), f"{ckpt.name} {t.name} bf16")


def test_hf_listing_names_the_method():
    f = dq.open(FIXTURES / "hf" / "awq-4bit-g32")
    assert f.format == "awq"
    types = {t.name: t.type for t in f.tensors}
    assert types["model.layers.0.mlp.up_proj.weight"] == "awq"


def test_errors():
    with pytest.raises(dq.DqError, match="No such file"):
        dq.open(GGUF_FIXTURES / "missing.gguf")
    with pytest.raises(dq.DqError, match="not a GGUF file"):
        dq.open(FIXTURES / "folder" / "check.json")
    f = dq.open(GGUF_FIXTURES / "blocks.gguf")
    with pytest.raises(dq.DqError, match="no tensor 'nope'"):
        f.dequantize("nope")
    with pytest.raises(dq.DqError, match="is not one of float32, float16, bfloat16"):
        f.dequantize("q4_k.r3", dtype="int8")
    with pytest.raises(dq.DqError, match="backend"):
        f.dequantize("q4_k.r3", backend="fast")
