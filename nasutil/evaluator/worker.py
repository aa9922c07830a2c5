"""Isolated measurement: a worker process that measures candidates one after another.

The parent sends (candidate, config) pairs over a pipe and waits with a time
limit. A candidate that runs out of memory or raises comes back as a failed
Measurement and the worker goes on; one that hangs or kills its process is
recorded as failed and a fresh worker takes the next candidate.
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import time
import traceback
import warnings
from dataclasses import asdict
from typing import Any

from nasutil.evaluator.candidate import Candidate, build
from nasutil.evaluator.config import MeasureConfig
from nasutil.evaluator.measurement import Measurement


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


def device_info(device: str) -> dict[str, Any]:
    import torch

    from nasutil.evaluator.measure import device_name, resolve_device

    dev = resolve_device(device)
    return {"device_name": device_name(dev), "torch_version": torch.__version__, "pid": os.getpid()}


def measure_task(candidate: Candidate, config: MeasureConfig, exclusive=None) -> Measurement:
    """Build and measure one candidate in this process; failures come back as failed Measurements.

    `exclusive` (a lock shared by sibling workers) is held while the candidate runs on the device."""
    import torch

    from nasutil.evaluator.measure import measure_model
    from nasutil.errors import NasutilError

    try:
        t0 = time.perf_counter()
        built = build(candidate, config.input_size, config.num_classes)
        build_s = time.perf_counter() - t0
        result = measure_model(built.model, config, space=built.space, arch=built.arch, arch_hash=built.arch_hash,
                               input_size=built.input_size, in_channels=built.in_channels, exclusive=exclusive)
        result.timing["build_s"] = build_s
    except torch.cuda.OutOfMemoryError as exc:
        result = Measurement.failed(candidate.space, candidate.arch, config, f"out of memory: {_first_line(exc)}")
    except NasutilError as exc:
        result = Measurement.failed(candidate.space, candidate.arch, config, str(exc))
    except Exception as exc:  # a broken candidate must not end the run
        detail = traceback.extract_tb(exc.__traceback__)[-1]
        where = f" ({os.path.basename(detail.filename)}:{detail.lineno})" if detail else ""
        result = Measurement.failed(candidate.space, candidate.arch, config, _first_line(exc) + where)
    if not result.ok:  # give memory of a failed candidate back before the next one
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    return result


def _worker_main(conn, device: str, lock, threads: int | None) -> None:
    warnings.simplefilter("ignore")
    if threads:
        import torch

        torch.set_num_threads(threads)
    try:
        conn.send(("hello", device_info(device)))
    except Exception as exc:
        conn.send(("error", _first_line(exc)))
        return
    while True:
        message = conn.recv()
        if message is None:
            return
        candidate, config = message
        result = measure_task(Candidate(**candidate), MeasureConfig(**config), exclusive=lock)
        conn.send(("result", result.to_dict()))


class IsolatedWorker:
    """One long-lived worker process; restarted after a hang or crash."""

    def __init__(self, device: str, timeout_s: float = 300.0, start_timeout_s: float = 180.0, lock=None,
                 threads: int | None = None) -> None:
        self.device = device
        self.lock = lock
        self.threads = threads
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s
        self._ctx = mp.get_context("spawn")
        self._proc = None
        self._conn = None
        self.info: dict[str, Any] = {}
        self.restarts = 0

    def start(self) -> dict[str, Any]:
        from nasutil.errors import NasutilError

        parent, child = self._ctx.Pipe()
        self._proc = self._ctx.Process(target=_worker_main, args=(child, self.device, self.lock, self.threads),
                                      daemon=True)
        self._proc.start()
        child.close()
        self._conn = parent
        if not parent.poll(self.start_timeout_s):
            self.stop()
            raise NasutilError(f"measurement worker did not start within {self.start_timeout_s:.0f} s")
        kind, payload = parent.recv()
        if kind != "hello":
            self.stop()
            raise NasutilError(f"measurement worker could not start: {payload}")
        self.info = payload
        return payload

    def measure(self, candidate: Candidate, config: MeasureConfig) -> Measurement:
        if self._proc is None or not self._proc.is_alive():
            if self._proc is not None:
                self.restarts += 1
            self.start()
        assert self._conn is not None
        self._conn.send((asdict(candidate), config.to_dict()))
        try:
            if self._conn.poll(self.timeout_s):
                _, payload = self._conn.recv()
                return Measurement.from_dict(payload)
            reason = f"timed out after {self.timeout_s:.0f} s"
        except (EOFError, ConnectionResetError, BrokenPipeError):
            self._proc.join(5)
            reason = f"worker process died (exit code {self._proc.exitcode})"
        self.stop()
        return Measurement.failed(candidate.space, candidate.arch, config, reason, self.info.get("device_name", ""))

    def stop(self) -> None:
        if self._conn is not None:
            try:
                if self._proc is not None and self._proc.is_alive():
                    self._conn.send(None)
                    self._proc.join(5)
            except (OSError, BrokenPipeError):
                pass
            self._conn.close()
            self._conn = None
        if self._proc is not None:
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join(5)
            self._proc = None
