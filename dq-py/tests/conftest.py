"""Shared helpers: the repository's committed fixtures and bit comparisons."""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: The workspace root (dq-py/tests/../..).
REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
GGUF_FIXTURES = FIXTURES / "gguf"


def assert_same_bits(got: np.ndarray, want: np.ndarray, what: str = "") -> None:
    """Equal shapes and dtypes, and every element's bits equal; NaNs compare as NaN
    (either side's payload: dq's NaNs are quiet, SPEC §9)."""
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    width = {2: np.uint16, 4: np.uint32, 8: np.uint64}[got.dtype.itemsize]
    g = np.ascontiguousarray(got).view(width).reshape(-1)
    w = np.ascontiguousarray(want).view(width).reshape(-1)
    gnan = np.isnan(got.astype(np.float32)).reshape(-1)
    wnan = np.isnan(want.astype(np.float32)).reshape(-1)
    assert np.array_equal(gnan, wnan), f"{what}: NaNs at different places"
    bad = np.flatnonzero((g != w) & ~wnan)
    if bad.size:
        i = bad[0]
        raise AssertionError(f"{what}: {bad.size} elements differ, first [{i}]: "
                             f"0x{int(g[i]):x} != 0x{int(w[i]):x}")


def read_f32(path: Path) -> np.ndarray:
    """A raw little-endian f32 file (the fixtures' expected outputs)."""
    return np.fromfile(path, dtype="<f4")
