"""The native module (dq-py/src): arrays cross as C-contiguous uint8 views."""

from typing import Optional

import numpy as np

class DqError(ValueError): ...

def convert(args: list[str]) -> None: ...
def gguf_dequantize(
    data: np.ndarray, qtype: int, out: np.ndarray, dtype: str,
    threads: Optional[int] = None, backend: str = "auto",
) -> None: ...
def gguf_types() -> list[tuple[int, str, int, int, bool]]: ...
def dequantize(
    src: tuple[np.ndarray, str, list[int]], scales: tuple[np.ndarray, str, list[int]],
    zps: Optional[tuple[np.ndarray, str, list[int]]], out: np.ndarray, dst: str, qtype: str,
    axis: int, group_shape: Optional[list[int]], threads: Optional[int] = None,
    backend: str = "auto",
) -> None: ...

class File:
    def __init__(self, path: str) -> None: ...
    @property
    def format(self) -> str: ...
    def tensors(self) -> list[tuple[str, list[int], str]]: ...
    def dequantize_into(
        self, name: str, out: np.ndarray, dtype: str,
        threads: Optional[int] = None, backend: str = "auto",
    ) -> None: ...
