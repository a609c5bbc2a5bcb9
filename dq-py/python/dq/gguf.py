"""GGUF blocks outside any file: a drop-in for gguf-py's `gguf.quants.dequantize`.

    import gguf, dq
    gguf.dequantize = gguf.quants.dequantize = dq.gguf.dequantize

makes gguf-py (and transformers' GGUF loading, which calls `gguf.dequantize`) decode
with dq: the same float32 bits, shapes and errors. `dq.gguf.patch()` does the same.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

import numpy as np

from . import _arrays
from ._dq import DqError, gguf_dequantize, gguf_types


class BlockType(NamedTuple):
    """A ggml type: id, name, elements and bytes per block, whether dq decodes it."""

    id: int
    name: str
    block_size: int
    type_size: int
    supported: bool


#: Every ggml type dq knows, by id.
TYPES: dict[int, BlockType] = {t[0]: BlockType(*t) for t in gguf_types()}
_BY_NAME = {t.name: t for t in TYPES.values()}

# gguf-py's dequantize before `patch()` replaced it (for its lazy tensors).
_original: Optional[Callable[..., Any]] = None


def block_type(qtype: Any) -> BlockType:
    """The type of a `GGMLQuantizationType`, an int id or a name such as "Q4_K"."""
    if isinstance(qtype, str):
        t = _BY_NAME.get(qtype.upper())
    else:
        try:
            t = TYPES.get(int(qtype))
        except (TypeError, ValueError):
            t = None
    if t is None:
        raise NotImplementedError(f"Dequantization for {qtype!r} is not yet implemented")
    return t


def dequantize(data: Any, qtype: Any, *, dtype: Any = "float32", threads: Optional[int] = None,
               backend: str = "auto") -> np.ndarray:
    """Dequantizes GGUF blocks as `gguf.quants.dequantize(data, qtype)` does.

    `data`: a NumPy array (its last axis the bytes of whole blocks, any leading shape)
    or any object with the buffer protocol, read in place. `qtype`: a
    `GGMLQuantizationType`, its int id or its name. The result has `data`'s shape with
    the last axis in elements; float32 by default (the bits gguf-py computes), or
    float16/bfloat16 (their round-to-nearest-even). F32 and F16 data are passed
    through as gguf-py does (F32: a view, no copy). `threads=None` uses every core.

    Raises `ValueError` when the last axis is not whole blocks (gguf-py's message),
    `NotImplementedError` for a type dq does not decode, `dq.DqError` otherwise.
    """
    if type(data).__name__ == "LazyNumpyTensor":
        return _lazy(data, qtype)
    t = block_type(qtype)
    if not t.supported:
        raise NotImplementedError(f"Dequantization for {t.name} is not yet implemented")
    a = _arrays.as_array(data)
    if t.name == "F32" and dtype in ("float32", np.float32):
        return a.view(np.float32)
    if t.name == "F16" and dtype in ("float32", np.float32):
        return a.view(np.float16).astype(np.float32)
    if a.ndim == 0:
        raise DqError("GGUF blocks must be an array of at least one dimension")
    # gguf-py reshapes (copying) an array that is not contiguous; so does this.
    raw = np.ascontiguousarray(a).view(np.uint8)
    shape = raw.shape
    if shape[-1] % t.type_size != 0:
        raise ValueError(f"Quantized tensor bytes per row ({shape[-1]}) is not a multiple of "
                         f"{t.name} type size ({t.type_size})")
    out_shape = (*shape[:-1], shape[-1] // t.type_size * t.block_size)
    name, out = _arrays.empty(out_shape, dtype)
    gguf_dequantize(raw.reshape(-1), t.id, out.reshape(-1).view(np.uint8), name, threads, backend)
    return out


def _lazy(data: Any, qtype: Any) -> Any:
    """gguf-py's own path for its lazy tensors (conversion scripts, not loading)."""
    original = _original
    if original is None:
        import gguf.quants
        original = gguf.quants.dequantize
    if original is dequantize:
        raise DqError("a LazyNumpyTensor needs gguf-py's dequantize; call dq.gguf.patch() to replace it")
    return original(data, qtype)


def patch() -> None:
    """Replaces gguf-py's `dequantize` with `dq.gguf.dequantize` where code finds it:
    `gguf.dequantize` (transformers imports it from there at load time) and
    `gguf.quants.dequantize`. `unpatch()` restores them."""
    global _original
    import gguf
    import gguf.quants
    if gguf.quants.dequantize is not dequantize:
        _original = gguf.quants.dequantize
    gguf.dequantize = gguf.quants.dequantize = dequantize


def unpatch() -> None:
    """Puts gguf-py's own `dequantize` back (after `patch()`)."""
    if _original is None:
        return
    import gguf
    import gguf.quants
    gguf.dequantize = gguf.quants.dequantize = _original
