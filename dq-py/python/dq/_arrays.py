"""NumPy helpers shared by the modules: output dtypes, zero-copy byte views."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._dq import DqError

#: The output dtype names dq writes, and their aliases.
_DTYPE_NAMES = {
    "float32": "float32", "f32": "float32",
    "float16": "float16", "f16": "float16",
    "bfloat16": "bfloat16", "bf16": "bfloat16",
}


def out_dtype(dtype: Any) -> tuple[str, np.dtype]:
    """`(name, numpy dtype)` of an output dtype given by name or as a NumPy dtype."""
    name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    key = _DTYPE_NAMES.get(name)
    if key is None:
        raise DqError(f"dtype {dtype!r} is not one of float32, float16, bfloat16")
    if key == "bfloat16":
        try:
            import ml_dtypes
        except ImportError as e:
            raise DqError("dtype bfloat16 needs the ml_dtypes package (pip install ml_dtypes)") from e
        return key, np.dtype(ml_dtypes.bfloat16)
    return key, np.dtype(key)


def empty(shape: tuple[int, ...], dtype: Any) -> tuple[str, np.ndarray]:
    """A new C-contiguous output of `shape` and its dtype name."""
    name, np_dtype = out_dtype(dtype)
    return name, np.empty(shape, dtype=np_dtype)


def as_array(data: Any) -> np.ndarray:
    """`data` as a NumPy array over the same memory: an array as it is, any other
    object with the buffer protocol (bytes, bytearray, memoryview, mmap) viewed."""
    if isinstance(data, np.ndarray):
        return data
    try:
        return np.asarray(memoryview(data))
    except TypeError:
        return np.asarray(data)


def byte_view(a: np.ndarray) -> np.ndarray:
    """The bytes of `a` as a flat uint8 array over its memory; a copy only when `a` is
    not C-contiguous."""
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)
