"""Put the GPU in the state a timing reports before it times.

On an H200 the same CUDA graph of a small network reads about 9% faster right after the device ran heavy
work (another process's or a training population's) than in a process that has had the device to itself,
at the same reported SM and memory clocks, by CUDA events and by the host's clock alike (BENCHMARKS.md,
"Seed 96"). A survivor measured beside a training population therefore read differently from the same
network measured on a quiet device. Running a short burst of half-precision matrix products before the
timed windows makes a reading independent of what ran before it: every measurement is taken on a device
that has just worked, the state the shipped tables were measured in.

A burst holds for SETTLED_FOR_S, for every process on the device (another process's burst wakes it as
well as one's own), so the processes share a stamp file: sixteen workers taking turns burst once a
second between them, not sixteen times.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path

import torch

#: a burst's matrix side: 4096 x 4096 fp16 (32 MiB) keeps the tensor cores busy for ~0.1 ms a product
BURST_SIDE = 4096
#: a burst stays in force this long (the state outlasted 5 s of an idle device, so one second is a margin)
SETTLED_FOR_S = 1.0

_lock = threading.Lock()
_operands: dict[str, torch.Tensor] = {}


def stamp_file(device: torch.device) -> Path:
    """The file whose modification time says when any process last woke `device` (named by its UUID, which
    CUDA_VISIBLE_DEVICES does not renumber)."""
    uuid = str(getattr(torch.cuda.get_device_properties(device), "uuid", device.index or 0))
    return Path(tempfile.gettempdir()) / f"nasutil-settled-{uuid}"


def _settled_recently(stamp: Path) -> bool:
    try:
        return time.time() - stamp.stat().st_mtime < SETTLED_FOR_S
    except OSError:
        return False


def settle(device: torch.device, burst_ms: float) -> bool:
    """Run `burst_ms` of matrix products on `device` unless a process did within SETTLED_FOR_S; True where
    this call ran one. A no-op on the CPU and for burst_ms <= 0."""
    if device.type != "cuda" or burst_ms <= 0:
        return False
    stamp = stamp_file(device)
    with _lock:
        if _settled_recently(stamp):
            return False
        key = str(device)
        if key not in _operands:
            _operands[key] = torch.randn(BURST_SIDE, BURST_SIDE, device=device, dtype=torch.float16)
        a = _operands[key]
        end = time.perf_counter() + burst_ms / 1e3
        while time.perf_counter() < end:
            for _ in range(8):
                torch.mm(a, a)
            torch.cuda.synchronize(device)
        try:
            stamp.touch()
            os.utime(stamp)
        except OSError:  # a read-only temporary folder: every measurement bursts, which is slower, not wrong
            pass
        return True
