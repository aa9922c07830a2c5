"""Mapping of nasutil's dtype names onto torch dtypes and math-precision switches."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

_TORCH = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def torch_dtype(name: str) -> torch.dtype:
    return _TORCH[name]


def element_size(name: str) -> int:
    return torch.empty((), dtype=_TORCH[name]).element_size()


@contextlib.contextmanager
def matmul_precision(name: str) -> Iterator[None]:
    """tf32 lets cuBLAS/cuDNN use TF32 tensor cores; fp32 forbids it. Restored on exit."""
    old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    allow = name == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = allow
    torch.backends.cudnn.allow_tf32 = allow
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old
