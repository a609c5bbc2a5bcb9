"""dq: bit-exact, fast dequantization from Python.

- `dq.gguf.dequantize(data, qtype)`: gguf-py's `gguf.quants.dequantize`, same bits,
  10-50x faster; `dq.gguf.patch()` makes gguf-py (and transformers) use it.
- `dq.open(path)`: a GGUF file (split sets too) or a HuggingFace checkpoint folder;
  `.tensors`, `.dequantize(name, dtype=...)`.
- `dq.convert(input, output, dtype=...)`: `dq convert`, in this process.
- `dq.dequantize(src, scales, zps, qtype=..., axis=..., group_shape=...)`: the
  oneDNN `DynamicDequantize` op over NumPy arrays.

Every rejected input raises `dq.DqError` (a `ValueError`) with dq's one-line message.
See docs/python.md in the repository.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple, Optional, Sequence, Union

import numpy as np

from . import _arrays, gguf
from ._dq import DqError
from ._dq import File as _NativeFile
from ._dq import convert as _convert
from ._dq import dequantize as _dequantize

__all__ = ["DqError", "File", "Tensor", "convert", "dequantize", "gguf", "open"]

PathLike = Union[str, "os.PathLike[str]"]


class Tensor(NamedTuple):
    """One tensor of a `File`: its name, row-major shape and type (a GGUF type such as
    `Q4_K`, the quantization method of a quantized linear such as `gptq`, or a
    safetensors dtype such as `BF16`)."""

    name: str
    shape: tuple[int, ...]
    type: str


class File:
    """A checkpoint opened by `dq.open`: memory-mapped, tensors decoded on demand."""

    def __init__(self, path: PathLike):
        self.path = os.fspath(path)
        self._native = _NativeFile(self.path)
        self.tensors = [Tensor(n, tuple(s), t) for n, s, t in self._native.tensors()]
        self._by_name = {t.name: t for t in self.tensors}

    @property
    def format(self) -> str:
        """`gguf`, or the checkpoint's quantization method (`hf` when none)."""
        return self._native.format

    def names(self) -> list[str]:
        """The tensor names, in the file's order."""
        return [t.name for t in self.tensors]

    def __contains__(self, name: str) -> bool:
        return name in self._by_name

    def __len__(self) -> int:
        return len(self.tensors)

    def __repr__(self) -> str:
        return f"dq.File({self.path!r}, format={self.format!r}, tensors={len(self)})"

    def dequantize(self, name: str, dtype: Any = "float32", threads: Optional[int] = None,
                   backend: str = "auto") -> np.ndarray:
        """Tensor `name` as a new array of its shape: float32, float16 or bfloat16
        (an `ml_dtypes.bfloat16` array), written in place by dq's kernels on `threads`
        threads (None: every core). Floating-point tensors are converted."""
        t = self._by_name.get(name)
        if t is None:
            raise DqError(f"{self.path}: no tensor {name!r}")
        dtype_name, out = _arrays.empty(t.shape, dtype)
        self._native.dequantize_into(name, out.reshape(-1).view(np.uint8), dtype_name, threads, backend)
        return out


def open(path: PathLike) -> File:  # noqa: A001 (the module's verb, as in `gguf`/`safetensors`)
    """Opens a GGUF file (any part of a split set reads the whole set), a HuggingFace
    checkpoint folder or a `.safetensors` file."""
    return File(path)


_CONVERT_DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}


def convert(input: PathLike, output: PathLike, dtype: Any = None, *, max_shard_size: Any = None,
            backend: str = "auto", threads: Optional[int] = None, skip_unsupported: bool = False,
            max_memory: Any = None, names: Optional[str] = None, force: bool = False,
            part: Optional[str] = None, finish: bool = False) -> None:
    """`dq convert INPUT OUTPUT` with the CLI's semantics (docs/cli.md): OUTPUT ending
    in `.safetensors` is one file, anything else a HuggingFace model folder.
    `dtype`: float32/float16/bfloat16 (or f32/f16/bf16; None: the CLI's default);
    `max_shard_size`: bytes or a size such as "5GB"; `max_memory` likewise; `names`,
    `force`, `part` ("I/N") and `finish` as the flags of the same names. The summary
    line goes to the process's stdout, skipped tensors to stderr; nothing is written
    when it raises `dq.DqError`."""
    args = [os.fspath(input), os.fspath(output), "--backend", backend]
    if dtype is not None:
        key = dtype if isinstance(dtype, str) else np.dtype(dtype).name
        args += ["--dtype", _CONVERT_DTYPES.get(key, key)]
    if max_shard_size is not None:
        args += ["--max-shard-size", str(max_shard_size)]
    if max_memory is not None:
        args += ["--max-memory", str(max_memory)]
    if threads is not None:
        args += ["--threads", str(threads)]
    if names is not None:
        args += ["--names", names]
    if skip_unsupported:
        args.append("--skip-unsupported")
    if force:
        args.append("--force")
    if part is not None:
        args += ["--part", part]
    if finish:
        args.append("--finish")
    _convert(args)


# NumPy dtypes of dq's source, scale and zero-point dtypes (4-bit ones are packed
# bytes: name them with src_dtype= / zps_dtype=).
_DQ_DTYPES = {
    "int8": "s8", "uint8": "u8", "int32": "s32", "int64": "s64",
    "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64",
    "float8_e4m3fn": "f8_e4m3", "float8_e5m2": "f8_e5m2", "float8_e8m0fnu": "e8m0",
}
_OUT_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "f64": "float64"}


def _dq_dtype(a: np.ndarray, given: Optional[str], what: str) -> str:
    if given is not None:
        return given
    name = _DQ_DTYPES.get(a.dtype.name)
    if name is None:
        raise DqError(f"{what} has dtype {a.dtype}, which dq does not read (4-bit data: packed "
                      f"uint8 with {what}_dtype='u4', 's4' or 'f4_e2m1')")
    return name


def _input(a: Any, given: Optional[str], shape: Optional[Sequence[int]], what: str):
    a = np.asarray(a)
    d = _dq_dtype(a, given, what)
    return (_arrays.byte_view(a), d, list(shape if shape is not None else a.shape)), d


def dequantize(src: Any, scales: Any, zps: Any = None, *, qtype: str = "per_tensor", axis: int = 1,
               group_shape: Optional[Sequence[int]] = None, dtype: Any = None,
               src_dtype: Optional[str] = None, shape: Optional[Sequence[int]] = None,
               scales_shape: Optional[Sequence[int]] = None, zps_dtype: Optional[str] = None,
               zps_shape: Optional[Sequence[int]] = None, threads: Optional[int] = None,
               backend: str = "auto") -> np.ndarray:
    """oneDNN Graph `DynamicDequantize` (docs/SPEC.md §4.2): `(src - zps) * scales`
    per tensor, per channel (`axis`) or per group (`group_shape`), bit-exact.

    Arrays are read in place. dq dtypes follow the NumPy dtypes (int8 -> s8, uint8 -> u8,
    int32 -> s32, float16/bfloat16/float32, ml_dtypes float8_e4m3fn / float8_e5m2 /
    float8_e8m0fnu); packed 4-bit data is a uint8 array with `src_dtype`/`zps_dtype`
    `"u4"`, `"s4"` or `"f4_e2m1"` and its logical `shape`/`zps_shape` given.
    `dtype`: the output (float32, float16, bfloat16 or float64; default the scales'
    dtype where it is one of those, else float32)."""
    s = _input(src, src_dtype, shape, "src")[0]
    c, cd = _input(scales, None, scales_shape, "scales")
    z = _input(zps, zps_dtype, zps_shape, "zps")[0] if zps is not None else None
    if dtype is None:
        dst = cd if cd in _OUT_DTYPES else "f32"
    else:
        key = dtype if isinstance(dtype, str) else np.dtype(dtype).name
        dst = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64"}.get(key, key)
        if dst not in _OUT_DTYPES:
            raise DqError(f"dtype {dtype!r} is not one of float32, float16, bfloat16, float64")
    out_name = _OUT_DTYPES[dst]
    if out_name == "float64":
        out = np.empty(s[2], dtype=np.float64)
    else:
        out = _arrays.empty(tuple(s[2]), out_name)[1]
    _dequantize(s, c, z, out.reshape(-1).view(np.uint8), dst, qtype, axis,
                list(group_shape) if group_shape is not None else None, threads, backend)
    return out
