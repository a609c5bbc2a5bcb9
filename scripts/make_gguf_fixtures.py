#!/usr/bin/env python3
"""Writes the GGUF fixtures of tests/formats/gguf.rs (tests/fixtures/gguf/).

Made with PyPI gguf==0.19.0 (gguf-py) and numpy==2.4.6 on Python 3.11 (x86-64);
pinned in scripts/requirements-fixtures.txt. CI never runs this script: it reads
only the committed outputs. Re-running it rewrites the same bytes (fixed seed).

    python3 -m venv /tmp/venv-gguf
    /tmp/venv-gguf/bin/pip install -r scripts/requirements-fixtures.txt
    /tmp/venv-gguf/bin/python scripts/make_gguf_fixtures.py

Outputs (every GGUF written by gguf.GGUFWriter):
- blocks.gguf (v3): tensors of random block bytes for every type dq decodes, with
  f16 `d`/`dmin`/`m` (MXFP4: the e8m0 byte) drawn from special values (zero, -0,
  subnormal, negative, inf, NaN) and random finite ones; rank 1-3, one-block rows,
  odd row counts; plus random bytes of Q1_0 and TQ1_0 (named `*.unsupported` from when
  dq did not decode them; their expected outputs are written as the other types').
- quantized_v2.gguf: tensors quantized from float data by gguf.quants.quantize for
  every type gguf-py 0.19.0 can quantize (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1,
  Q8_0, MXFP4; it has no quantizer for the K-quants, which blocks.gguf covers with
  random bytes). Written as v3, then its version field patched to 2: versions 2 and 3
  share one layout (v3 only added big-endian files), and GGUFWriter writes only 3.
- metadata.gguf (v3): one key of every GGUF value type, arrays of several element
  types, nested arrays, a long string array, an empty string, and
  `general.alignment` = 64 with a few small tensors.
- tables.gguf (v3, its own seed): the types added with table lookups, grids and the
  newer parameter loads (IQ4_NL, IQ4_XS, TQ2_0, Q8_K, NVFP4, IQ2_XXS, IQ2_XS, IQ2_S;
  gguf-py cannot quantize the IQ2 types), four tensors each as in
  blocks.gguf, scales over the same specials (Q8_K: f32 ones; NVFP4: e4m3 bytes),
  Q8_K's expected output is ggml's `dequantize_row_q8_K` (`d * qs`, one f32
  product) written in NumPy: gguf-py 0.19.0 has no Q8_K decoder.
- low_bit.gguf (v3, its own seed): the same four tensors for IQ3_XXS, IQ3_S, IQ1_S,
  IQ1_M, Q8_1, Q1_0 and TQ1_0 (f16 scales over the specials; IQ1_M's is the top nibbles of
  its four scale words). Q8_1 is ggml's 36-byte `block_q8_1` (gguf-py's size table
  says 40; patched below); ggml has no Q8_1 decoder, its values are Q8_0's, so the
  expected output is gguf-py's Q8_0 of the block without its unused `s`. Q1_0's is
  ggml's C `dequantize_row_q1_0` (scripts/ggml_q1_0.c, compiled with `cc`).
- q2_0.gguf (v3, its own seed): the same four tensors for Q2_0 (ggml type 42, newer
  than gguf-py 0.19.0: added to its type enum and size table here), f16 `d` over
  the specials; the expected output is ggml's C `dequantize_row_q2_0`
  (scripts/ggml_q2_0.c, compiled with `cc`).
- <stem>/<tensor name>.bin beside each GGUF: the f32 output of
  gguf.quants.dequantize for each supported tensor, raw little-endian, computed from
  the tensor bytes as gguf.GGUFReader reads them back from the written file.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

import numpy as np

import gguf
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES

assert version("gguf") == "0.19.0", f"needs gguf 0.19.0, found {version('gguf')}"
# gguf-py 0.19.0's table has Q8_1 as two f32 and 32 bytes (40); ggml-common.h's
# `block_q8_1` is two f16 and 32 bytes, the size ggml writes and reads.
GGML_QUANT_SIZES[T.Q8_1] = (32, 36)


def ggml_type(name: str, value: int, block: int, type_size: int) -> T:
    """A ggml type gguf-py 0.19.0's enum lacks, added as a member of it (so that
    GGUFWriter writes it and GGUFReader reads it back), with its sizes."""
    member = int.__new__(T, value)
    member._name_, member._value_ = name, value
    T._value2member_map_[value] = member
    T._member_map_[name] = member
    GGML_QUANT_SIZES[member] = (block, type_size)
    return member


# ggml-common.h's `block_q2_0` (ggml type 42): f16 `d`, then QK2_0 / 4 bytes, QK2_0 = 64.
Q2_0 = ggml_type("Q2_0", 42, 64, 2 + 16)
OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "gguf"
RNG = np.random.default_rng(19)

# Supported block types and the byte offsets of their f16 fields (d, then dmin/m).
F16_FIELDS = {
    T.Q4_0: [0],
    T.Q4_1: [0, 2],
    T.Q5_0: [0],
    T.Q5_1: [0, 2],
    T.Q8_0: [0],
    T.Q2_K: [80, 82],
    T.Q3_K: [108],
    T.Q4_K: [0, 2],
    T.Q5_K: [0, 2],
    T.Q6_K: [208],
}

# f16 bit patterns: +0, -0, smallest/largest subnormal, a negative subnormal,
# +-inf, quiet NaN, signalling NaN, a negative NaN with payload, max, -1, smallest normal.
F16_SPECIALS = [0x0000, 0x8000, 0x0001, 0x03FF, 0x8001, 0x7C00, 0xFC00,
                0x7E00, 0x7C01, 0xFE01, 0x7BFF, 0xBC00, 0x0400]
# e8m0 bytes of MXFP4 (gguf-py: 2^(e-128) from bits; 0 and 1 are f32 subnormals).
E8M0_SPECIALS = [0, 1, 2, 126, 127, 128, 129, 200, 254, 255]
F32_SPECIALS = [0x00000000, 0x80000000, 0x00000001, 0x007FFFFF, 0x80000001,
                0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFC12345,
                0x7F7FFFFF, 0x3F800000]
BF16_SPECIALS = [0x0000, 0x8000, 0x0001, 0x007F, 0x8001, 0x7F80, 0xFF80,
                 0x7FC0, 0x7F81, 0xFFC1, 0x7F7F, 0x3F80]


def random_f16_finite(n: int) -> np.ndarray:
    """Random finite normal f16 bit patterns of moderate magnitude, either sign."""
    sign = RNG.integers(0, 2, n, dtype=np.uint16) << 15
    exp = RNG.integers(5, 25, n, dtype=np.uint16) << 10
    man = RNG.integers(0, 1024, n, dtype=np.uint16)
    return sign | exp | man


def random_blocks(qtype: T, n_blocks: int, specials: bool) -> np.ndarray:
    """`n_blocks` random blocks; the f16 fields cycle through the specials if asked."""
    _, type_size = GGML_QUANT_SIZES[qtype]
    blocks = RNG.integers(0, 256, (n_blocks, type_size), dtype=np.uint8)
    if qtype == T.MXFP4:
        if specials:
            blocks[:, 0] = [E8M0_SPECIALS[i % len(E8M0_SPECIALS)] for i in range(n_blocks)]
        else:
            blocks[:, 0] = RNG.integers(110, 140, n_blocks, dtype=np.uint8)
        return blocks
    for k, off in enumerate(F16_FIELDS.get(qtype, [])):
        if specials:
            # dmin/m run one step ahead, so that d and dmin pair zero with -0, inf
            # with -inf and NaN with NaN of another payload in the same block.
            shift = k
            bits = np.array([F16_SPECIALS[(i + shift) % len(F16_SPECIALS)]
                             for i in range(n_blocks)], dtype=np.uint16)
        else:
            bits = random_f16_finite(n_blocks)
        blocks[:, off:off + 2] = bits.view(np.uint8).reshape(n_blocks, 2)
    return blocks


def float_tensor(qtype: T, shape: tuple[int, ...], specials: bool) -> np.ndarray:
    """Random F32/F16/BF16 elements as the bytes of a tensor of `shape`."""
    n = int(np.prod(shape))
    if qtype == T.F32:
        bits = RNG.integers(0, 2**32, n, dtype=np.uint32)
        table = F32_SPECIALS
        bits = bits if not specials else np.array([table[i % len(table)] for i in range(n)], np.uint32)
        if not specials:  # mostly finite values of moderate size
            bits = (bits & np.uint32(0x807FFFFF)) | (RNG.integers(100, 150, n, dtype=np.uint32) << 23)
        return bits.view(np.uint8).reshape(*shape[:-1], shape[-1] * 4)
    table = F16_SPECIALS if qtype == T.F16 else BF16_SPECIALS
    if specials:
        bits = np.array([table[i % len(table)] for i in range(n)], np.uint16)
    elif qtype == T.F16:
        bits = random_f16_finite(n)
    else:
        bits = RNG.integers(0, 2**16, n, dtype=np.uint16)
    return bits.view(np.uint8).reshape(*shape[:-1], shape[-1] * 2)


SUPPORTED = [T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0,
             T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.MXFP4]
# Random bytes of Q1_0 and TQ1_0 (types dq did not decode when they were added), two
# blocks a row, cut from draws of the sizes that IQ4_NL and TQ2_0 tensors took here before dq decoded them (3 x 36 and
# 3 x 132 bytes), so that the RNG stream and every later byte stay as they were.
UNSUPPORTED = [(T.Q1_0, 36), (T.TQ1_0, 132)]
# The types of tables.gguf, and the byte offsets of their scale fields.
TABLE_TYPES = {T.IQ4_NL: [0], T.IQ4_XS: [0], T.TQ2_0: [64], T.Q8_K: [0], T.NVFP4: [0, 1, 2, 3],
               T.IQ2_XXS: [0], T.IQ2_XS: [0], T.IQ2_S: [0]}
# The types of low_bit.gguf, and the byte offsets of their f16 scale (IQ1_M: the
# four bytes whose top nibbles make it).
LOW_BIT_TYPES = {T.IQ3_XXS: [0], T.IQ3_S: [0], T.IQ1_S: [0], T.IQ1_M: [49, 51, 53, 55],
                 T.Q8_1: [0], T.Q1_0: [0], T.TQ1_0: [52]}
DECODED = SUPPORTED + list(TABLE_TYPES) + list(LOW_BIT_TYPES) + [Q2_0]
# NVFP4's unsigned e4m3 scale bytes: 0 and 0x7F decode to 0, the top bit is ignored.
UE4M3_SPECIALS = [0x00, 0x7F, 0x80, 0xFF, 0x01, 0x07, 0x08, 0x38, 0x7E, 0xF8]


def blocks_file() -> list[tuple[str, T]]:
    """blocks.gguf: random block bytes, every supported type, ranks 1-3."""
    w = gguf.GGUFWriter(OUT / "blocks.gguf", "dq-fixture")
    w.add_name("dq random blocks")
    names = []
    for qtype in SUPPORTED:
        block, type_size = GGML_QUANT_SIZES[qtype]
        row = block if block > 1 else 8  # elements of a one-block row (8 for float types)
        tag = qtype.name.lower()
        # (numpy shape in elements, use specials?)
        n_specials = len(E8M0_SPECIALS if qtype == T.MXFP4 else F16_SPECIALS)
        if block == 1:
            n_specials = max(len(F32_SPECIALS), len(F16_SPECIALS), len(BF16_SPECIALS))
        cases = [
            ("r1", (2 * row,), False),
            ("r2_odd_rows", (3, row), False),
            ("r3", (2, 3, 2 * row), False),
            ("specials", (n_specials, row), True),
        ]
        for case, shape, specials in cases:
            name = f"{tag}.{case}"
            if block == 1:
                data = float_tensor(qtype, shape, specials)
            else:
                n_blocks = int(np.prod(shape)) // block
                data = random_blocks(qtype, n_blocks, specials)
                data = data.reshape(*shape[:-1], shape[-1] // block * type_size)
            w.add_tensor(name, data, raw_dtype=qtype)
            names.append((name, qtype))
    for qtype, drawn in UNSUPPORTED:
        block, type_size = GGML_QUANT_SIZES[qtype]
        data = RNG.integers(0, 256, (3, drawn), dtype=np.uint8)[:, :2 * type_size].copy()
        w.add_tensor(f"{qtype.name.lower()}.unsupported", data, raw_dtype=qtype)
    finish(w)
    return names


def table_blocks(rng: np.random.Generator, qtype: T, n_blocks: int, specials: bool) -> np.ndarray:
    """Random blocks of a tables.gguf type, scales cycling through the specials if asked."""
    _, type_size = GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, (n_blocks, type_size), dtype=np.uint8)
    offs = TABLE_TYPES[qtype]
    for k, off in enumerate(offs):
        if qtype == T.NVFP4:
            if specials:
                blocks[:, off] = [UE4M3_SPECIALS[(i + k) % len(UE4M3_SPECIALS)] for i in range(n_blocks)]
            else:
                blocks[:, off] = rng.integers(0x20, 0x50, n_blocks, dtype=np.uint8)
        elif qtype == T.Q8_K:
            if specials:
                bits = np.array([F32_SPECIALS[i % len(F32_SPECIALS)] for i in range(n_blocks)], np.uint32)
            else:
                bits = rng.integers(0, 2**32, n_blocks, dtype=np.uint32)
                bits = (bits & np.uint32(0x807FFFFF)) | (rng.integers(100, 150, n_blocks, dtype=np.uint32) << 23)
            blocks[:, off:off + 4] = bits.view(np.uint8).reshape(n_blocks, 4)
        else:
            if specials:
                bits = np.array([F16_SPECIALS[i % len(F16_SPECIALS)] for i in range(n_blocks)], np.uint16)
            else:
                sign = rng.integers(0, 2, n_blocks, dtype=np.uint16) << 15
                exp = rng.integers(5, 25, n_blocks, dtype=np.uint16) << 10
                bits = sign | exp | rng.integers(0, 1024, n_blocks, dtype=np.uint16)
            blocks[:, off:off + 2] = bits.view(np.uint8).reshape(n_blocks, 2)
    return blocks


def tables_file() -> None:
    """tables.gguf: random blocks of the table-indexed and newer types, ranks 1-3."""
    rng = np.random.default_rng(40)
    w = gguf.GGUFWriter(OUT / "tables.gguf", "dq-fixture")
    w.add_name("dq random blocks of table types")
    for qtype in TABLE_TYPES:
        block, type_size = GGML_QUANT_SIZES[qtype]
        tag = qtype.name.lower()
        n_specials = {T.NVFP4: len(UE4M3_SPECIALS), T.Q8_K: len(F32_SPECIALS)}.get(qtype, len(F16_SPECIALS))
        cases = [
            ("r1", (2 * block,), False),
            ("r2_odd_rows", (3, block), False),
            ("r3", (2, 3, 2 * block), False),
            ("specials", (n_specials, block), True),
        ]
        for case, shape, specials in cases:
            n_blocks = int(np.prod(shape)) // block
            data = table_blocks(rng, qtype, n_blocks, specials)
            data = data.reshape(*shape[:-1], shape[-1] // block * type_size)
            w.add_tensor(f"{tag}.{case}", data, raw_dtype=qtype)
    finish(w)


def low_bit_file() -> None:
    """low_bit.gguf: random blocks of IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, Q8_1, Q1_0, TQ1_0."""
    scaled_blocks_file("low_bit", "low-bit types", 41, LOW_BIT_TYPES)


def q2_0_file() -> None:
    """q2_0.gguf: random blocks of Q2_0 (ggml type 42, which gguf-py 0.19.0 lacks)."""
    scaled_blocks_file("q2_0", "Q2_0", 42, {Q2_0: [0]})


def scaled_blocks_file(stem: str, what: str, seed: int, types: dict) -> None:
    """<stem>.gguf (its own seed): four tensors of random blocks of each type, the
    f16 scale at the given byte offsets drawn over the specials or finite normals."""
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(OUT / f"{stem}.gguf", "dq-fixture")
    w.add_name(f"dq random blocks of {what}")
    for qtype, offs in types.items():
        block, type_size = GGML_QUANT_SIZES[qtype]
        tag = qtype.name.lower()
        cases = [
            ("r1", (2 * block,), False),
            ("r2_odd_rows", (3, block), False),
            ("r3", (2, 3, 2 * block), False),
            ("specials", (2 * len(F16_SPECIALS), block), True),
        ]
        for case, shape, specials in cases:
            n_blocks = int(np.prod(shape)) // block
            data = rng.integers(0, 256, (n_blocks, type_size), dtype=np.uint8)
            if specials:
                bits = np.array([F16_SPECIALS[i % len(F16_SPECIALS)] for i in range(n_blocks)], np.uint16)
            else:
                sign = rng.integers(0, 2, n_blocks, dtype=np.uint16) << 15
                exp = rng.integers(5, 25, n_blocks, dtype=np.uint16) << 10
                bits = sign | exp | rng.integers(0, 1024, n_blocks, dtype=np.uint16)
            if qtype == T.IQ1_M:
                for k, off in enumerate(offs):  # nibble k of d is the top nibble of byte off
                    nib = ((bits >> (4 * k)) & 0xF).astype(np.uint8)
                    data[:, off] = (data[:, off] & 0x0F) | (nib << 4)
            else:
                data[:, offs[0]:offs[0] + 2] = bits.view(np.uint8).reshape(n_blocks, 2)
            data = data.reshape(*shape[:-1], shape[-1] // block * type_size)
            w.add_tensor(f"{tag}.{case}", data, raw_dtype=qtype)
    finish(w)


def q8_1_dequantize(raw: np.ndarray) -> np.ndarray:
    """Q8_1: ggml has no `dequantize_row_q8_1`; its values are Q8_0's (`d`, then the
    32 bytes after the unused `s`), so gguf-py's Q8_0 decodes them."""
    blocks = raw.reshape(-1, 36)
    q8_0 = np.concatenate([blocks[:, :2], blocks[:, 4:]], axis=-1)
    return gguf.quants.dequantize(np.ascontiguousarray(q8_0), T.Q8_0).reshape(-1)


def q1_0_dequantize(raw: np.ndarray) -> np.ndarray:
    """ggml's `dequantize_row_q1_0` (scripts/ggml_q1_0.c)."""
    return ggml_c_dequantize("ggml_q1_0.c", "dequantize_row_q1_0", raw, 18, 128)


def q2_0_dequantize(raw: np.ndarray) -> np.ndarray:
    """ggml's `dequantize_row_q2_0` (scripts/ggml_q2_0.c)."""
    return ggml_c_dequantize("ggml_q2_0.c", "dequantize_row_q2_0", raw, 18, 64)


def ggml_c_dequantize(source: str, fn: str, raw: np.ndarray, type_size: int,
                      block: int) -> np.ndarray:
    """ggml's C row decoder `fn` (transcribed in scripts/`source`, compiled here
    with the system C compiler at -O2 for x86-64, called through ctypes)."""
    src = Path(__file__).resolve().parent / source
    with tempfile.TemporaryDirectory() as tmp:
        lib = Path(tmp) / "ggml_c.so"
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
        f = getattr(ctypes.CDLL(str(lib)), fn)
        f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        src_bytes = np.ascontiguousarray(raw)
        n = src_bytes.size // type_size * block
        y = np.zeros(n, np.float32)
        f(src_bytes.ctypes.data, y.ctypes.data, n)
    return y


def q8_k_dequantize(raw: np.ndarray) -> np.ndarray:
    """ggml's `dequantize_row_q8_K`: `y[i*QK_K + j] = x[i].d * x[i].qs[j]` (f32)."""
    blocks = raw.reshape(-1, GGML_QUANT_SIZES[T.Q8_K][1])
    d = blocks[:, :4].copy().view(np.float32)
    qs = blocks[:, 4:4 + 256].copy().view(np.int8).astype(np.float32)
    return (d * qs).reshape(-1)


QUANTIZABLE = [T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.MXFP4]


def quantized_file() -> None:
    """quantized_v2.gguf: float data quantized by gguf.quants.quantize."""
    path = OUT / "quantized_v2.gguf"
    w = gguf.GGUFWriter(path, "dq-fixture")
    w.add_name("dq quantized from float")
    for qtype in QUANTIZABLE:
        tag = qtype.name.lower()
        gauss = RNG.standard_normal((5, 64)).astype(np.float32) * np.float32(0.05)
        gauss[1] = 0.0  # all-zero blocks: d = 0
        gauss[2, 3] = 7.5  # an outlier
        gauss[3] *= np.float32(1e-6)  # tiny values (f16 subnormal scales)
        ramp = np.linspace(-4, 4, 3 * 2 * 32, dtype=np.float32).reshape(3, 2, 32)
        cases = [("gauss", gauss), ("ramp_r3", ramp), ("r1", gauss[0].copy())]
        if qtype in (T.F32, T.F16, T.BF16):
            special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-45,
                                65504.0, 1e30, -3.0], dtype=np.float32)
            cases.append(("specials", special))
        for case, data in cases:
            q = gguf.quants.quantize(data, qtype)
            w.add_tensor(f"{tag}.{case}", q, raw_dtype=qtype if q.dtype == np.uint8 else None)
    finish(w)
    raw = bytearray(path.read_bytes())
    assert raw[4:8] == (3).to_bytes(4, "little")
    raw[4:8] = (2).to_bytes(4, "little")
    path.write_bytes(bytes(raw))


def metadata_file() -> None:
    """metadata.gguf: every value type, arrays, nested arrays; alignment 64."""
    V = gguf.GGUFValueType
    w = gguf.GGUFWriter(OUT / "metadata.gguf", "dq-fixture")
    w.add_custom_alignment(64)
    w.add_uint8("test.u8", 255)
    w.add_int8("test.i8", -128)
    w.add_uint16("test.u16", 65535)
    w.add_int16("test.i16", -32768)
    w.add_uint32("test.u32", 4294967295)
    w.add_int32("test.i32", -2147483648)
    w.add_float32("test.f32", -1.5)
    w.add_bool("test.bool_true", True)
    w.add_bool("test.bool_false", False)
    w.add_string("test.string", "h\u00e9llo \u2713")
    w.add_key_value("test.empty_string", "", V.STRING)
    w.add_uint64("test.u64", 18446744073709551615)
    w.add_int64("test.i64", -9223372036854775808)
    w.add_float64("test.f64", 1e300)
    w.add_key_value("test.array_u8", [0, 1, 255], V.ARRAY, sub_type=V.UINT8)
    w.add_key_value("test.array_i16", [-1, 2, -3], V.ARRAY, sub_type=V.INT16)
    w.add_array("test.array_i32", [1, -2, 3, -4])
    w.add_key_value("test.array_u64", [2**64 - 1, 0], V.ARRAY, sub_type=V.UINT64)
    w.add_array("test.array_f32", [0.5, -0.25])
    w.add_key_value("test.array_f64", [2.5, -1e-300], V.ARRAY, sub_type=V.FLOAT64)
    w.add_array("test.array_bool", [True, False, True])
    w.add_array("test.array_string", ["a", "", "\u00fc\u00f1\u00ee"])
    w.add_array("test.nested", [[1, 2], [3], [4, 5, 6]])
    w.add_array("test.nested_strings", [["x", "yz"], ["w"]])
    w.add_array("tokenizer.ggml.tokens", [f"tok{i}" for i in range(100)])
    w.add_tensor("small.f32", np.arange(5, dtype=np.float32) - np.float32(2))
    q8 = np.zeros((1, 34), dtype=np.uint8)
    q8[0, :2] = np.array([0x3C00], np.uint16).view(np.uint8)  # d = 1.0
    q8[0, 2:] = np.arange(-16, 16, dtype=np.int8).view(np.uint8)
    w.add_tensor("small.q8_0", q8, raw_dtype=T.Q8_0)
    w.add_tensor("small.f16", np.array([[1.0, -2.0, 0.5]], dtype=np.float16))
    finish(w)


def finish(w: gguf.GGUFWriter) -> None:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_expected(stem: str) -> list[str]:
    """<stem>/<tensor>.bin: gguf.quants.dequantize of each supported tensor."""
    reader = gguf.GGUFReader(OUT / f"{stem}.gguf")
    out_dir = OUT / stem
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir()
    written = []
    for t in reader.tensors:
        if t.tensor_type not in DECODED:
            continue
        raw = np.ascontiguousarray(t.data).view(np.uint8)
        with np.errstate(all="ignore"):
            shape = tuple(int(d) for d in reversed(t.shape.tolist()))
            if t.tensor_type == T.Q8_K:
                y = q8_k_dequantize(raw).reshape(shape)
            elif t.tensor_type == T.Q8_1:
                y = q8_1_dequantize(raw).reshape(shape)
            elif t.tensor_type == T.Q1_0:
                y = q1_0_dequantize(raw).reshape(shape)
            elif t.tensor_type == Q2_0:
                y = q2_0_dequantize(raw).reshape(shape)
            else:
                y = gguf.quants.dequantize(raw, t.tensor_type)
        y = np.ascontiguousarray(y, dtype=np.float32)
        assert y.dtype == np.float32 and y.size == t.n_elements, t.name
        assert y.shape == tuple(int(d) for d in reversed(t.shape.tolist())), t.name
        y.astype("<f4").tofile(out_dir / f"{t.name}.bin")
        written.append(t.name)
    return written


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    blocks_file()
    quantized_file()
    metadata_file()
    tables_file()
    low_bit_file()
    q2_0_file()
    for stem in ("blocks", "quantized_v2", "metadata", "tables", "low_bit", "q2_0"):
        n = len(write_expected(stem))
        print(f"{stem}.gguf: {(OUT / f'{stem}.gguf').stat().st_size} bytes, {n} expected outputs")
    total = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(f"total {total} bytes", file=sys.stderr)
    assert total < 1 << 20


if __name__ == "__main__":
    main()
