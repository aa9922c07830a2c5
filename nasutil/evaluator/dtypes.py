"""Mapping of nasutil's dtype names onto torch dtypes and math-precision switches.

Element sizes are plain numbers, so the predictors that need them load without torch."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

_ELEMENT_SIZE = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2}


def torch_dtype(name: str) -> torch.dtype:
    import torch

    return {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[name]


def element_size(name: str) -> int:
    return _ELEMENT_SIZE[name]


@contextlib.contextmanager
def matmul_precision(name: str) -> Iterator[None]:
    """tf32 lets cuBLAS/cuDNN use TF32 tensor cores; fp32 forbids it. Restored on exit."""
    import torch

    old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    allow = name == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = allow
    torch.backends.cudnn.allow_tf32 = allow
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old
