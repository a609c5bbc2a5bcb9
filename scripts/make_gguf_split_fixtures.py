#!/usr/bin/env python3
"""Writes the split-set fixtures of tests/formats/gguf_split.rs (tests/fixtures/gguf/split/).

Made with PyPI gguf==0.19.0 (gguf-py) and numpy==2.4.6 (scripts/requirements-fixtures.txt).
CI never runs this script: it reads only the committed outputs. Re-running it rewrites
the same bytes (fixed seed).

    python3 -m venv /tmp/venv-gguf
    /tmp/venv-gguf/bin/pip install -r scripts/requirements-fixtures.txt
    /tmp/venv-gguf/bin/python scripts/make_gguf_split_fixtures.py

gguf-py's GGUFWriter splits a model itself (`split_max_tensors`, `split_max_size`,
`small_first_shard`), as llama.cpp's gguf-split does: files `NAME-0000k-of-0000N.gguf`,
the metadata in part 1 only, and in every part the keys `split.no` (u16, from 0),
`split.count` (u16) and `split.tensors.count` (i32).

Outputs, one model (the same metadata and tensors, random block bytes of supported types):
- model.gguf: the model in one file;
- model-0000k-of-00003.gguf: split at 3 tensors a part (3 + 3 + 1 tensors);
- lean-0000k-of-00003.gguf: `small_first_shard` (part 1 holds the metadata and no
  tensor) then 4 tensors a part (0 + 4 + 3 tensors).
"""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import numpy as np

import gguf
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES

assert version("gguf") == "0.19.0", f"needs gguf 0.19.0, found {version('gguf')}"
OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "gguf" / "split"
RNG = np.random.default_rng(40)

# (name, type, numpy shape in elements): every tensor a whole number of blocks.
TENSORS = [
    ("token_embd.weight", T.Q8_0, (4, 64)),
    ("blk.0.attn_q.weight", T.Q4_K, (2, 256)),
    ("blk.0.attn_norm.weight", T.F32, (64,)),
    ("blk.0.ffn_down.weight", T.Q6_K, (1, 256)),
    ("blk.0.ffn_up.weight", T.MXFP4, (3, 32)),
    ("blk.0.ffn_norm.weight", T.F16, (2, 16)),
    ("output.weight", T.BF16, (3, 8)),
]
# Byte offsets of the f16 scales, set to finite values so that the model decodes to
# numbers (the block bytes are random otherwise).
F16_FIELDS = {T.Q8_0: [0], T.Q4_K: [0, 2], T.Q6_K: [208]}


def tensor_bytes(qtype: T, shape: tuple[int, ...]) -> np.ndarray:
    """Random bytes of a tensor of `shape` elements, as uint8 rows."""
    block, type_size = GGML_QUANT_SIZES[qtype]
    n_blocks = int(np.prod(shape)) // block
    data = RNG.integers(0, 256, (n_blocks, type_size), dtype=np.uint8)
    for off in F16_FIELDS.get(qtype, []):
        bits = RNG.integers(0x2000, 0x3C00, n_blocks, dtype=np.uint16)
        data[:, off:off + 2] = bits.view(np.uint8).reshape(n_blocks, 2)
    if qtype == T.MXFP4:
        data[:, 0] = RNG.integers(120, 136, n_blocks, dtype=np.uint8)
    if qtype in (T.F32, T.F16, T.BF16):
        # Finite values: exponents away from all-ones.
        width = type_size
        vals = data.reshape(-1, width)
        vals[:, -1] &= 0x3F
    return data.reshape(*shape[:-1], shape[-1] // block * type_size)


DATA = [(name, qtype, tensor_bytes(qtype, shape)) for name, qtype, shape in TENSORS]


def write(path: Path, **split) -> None:
    w = gguf.GGUFWriter(path, "llama", **split)
    w.add_name("dq split fixture")
    w.add_uint32("llama.block_count", 1)
    w.add_array("tokenizer.ggml.tokens", ["<s>", "</s>", "a", "b"])
    for name, qtype, data in DATA:
        w.add_tensor(name, data, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def check(stem: str, per_part: list[int]) -> None:
    """The parts as gguf-py reads them back: keys and tensors in order."""
    n = len(per_part)
    names = []
    for k in range(n):
        r = gguf.GGUFReader(OUT / f"{stem}-{k + 1:05d}-of-{n:05d}.gguf")
        assert r.fields["split.no"].contents() == k
        assert r.fields["split.count"].contents() == n
        assert r.fields["split.tensors.count"].contents() == len(TENSORS)
        assert ("general.name" in r.fields) == (k == 0)
        assert len(r.tensors) == per_part[k], (stem, k, len(r.tensors))
        names += [t.name for t in r.tensors]
    assert names == [t[0] for t in TENSORS]


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.glob("*.gguf"):
        old.unlink()
    write(OUT / "model.gguf")
    write(OUT / "model.gguf", split_max_tensors=3)
    write(OUT / "lean.gguf", split_max_tensors=4, small_first_shard=True)
    check("model", [3, 3, 1])
    check("lean", [0, 4, 3])
    total = 0
    for p in sorted(OUT.glob("*.gguf")):
        total += p.stat().st_size
        print(f"{p.name}: {p.stat().st_size} bytes")
    assert total < 64 << 10


if __name__ == "__main__":
    main()
