"""dq.convert: the CLI's conversion, in the Python process."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

import dq
from conftest import FIXTURES, GGUF_FIXTURES, assert_same_bits, read_f32


def read_safetensors(path):
    """{name: (dtype, shape, bytes)} of a safetensors file (the format is a u64
    header length, a JSON header, the data)."""
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    return {k: (v["dtype"], v["shape"], body[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items() if k != "__metadata__"}


def test_gguf_to_one_file(tmp_path):
    out = tmp_path / "blocks.safetensors"
    dq.convert(GGUF_FIXTURES / "blocks.gguf", out, dtype="bfloat16", threads=2)
    tensors = read_safetensors(out)
    dtype, shape, raw = tensors["q4_k.r3"]
    assert dtype == "BF16"
    want = read_f32(GGUF_FIXTURES / "blocks" / "q4_k.r3.bin")
    got = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert_same_bits(got.view(np.float32).astype(ml_dtypes.bfloat16),
                     want.astype(ml_dtypes.bfloat16), "q4_k.r3")
    assert shape == [2, 3, 512]


def test_hf_folder_output_with_shards(tmp_path):
    out = tmp_path / "model"
    dq.convert(FIXTURES / "hf" / "awq-4bit-g16-sharded", out, dtype="float32",
               max_shard_size="5kB")
    shards = sorted(p.name for p in out.glob("*.safetensors"))
    assert len(shards) > 1, shards
    index = json.loads((out / "model.safetensors.index.json").read_text())
    name = "model.layers.0.mlp.up_proj.weight"
    dtype, shape, raw = read_safetensors(out / index["weight_map"][name])[name]
    want = read_f32(FIXTURES / "hf" / "awq-4bit-g16-sharded" / "expected" /
                    "model.layers.0.mlp.up_proj.bin")
    assert dtype == "F32"
    assert_same_bits(np.frombuffer(raw, dtype="<f4"), want, name)


def test_errors_leave_no_output(tmp_path):
    out = tmp_path / "x.safetensors"
    with pytest.raises(dq.DqError, match="No such file"):
        dq.convert(tmp_path / "missing.gguf", out)
    with pytest.raises(dq.DqError, match="invalid value 'f8'"):
        dq.convert(GGUF_FIXTURES / "blocks.gguf", out, dtype="f8")
    with pytest.raises(dq.DqError, match="--threads must be at least 1"):
        dq.convert(GGUF_FIXTURES / "blocks.gguf", out, threads=0)
    assert list(tmp_path.iterdir()) == []
