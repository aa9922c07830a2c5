"""Where a trainer's host time goes, phase by phase: the wall time each thread spent in a named phase of a
candidate's host work (building it, moving it to the device, the eager warm-up and the capture of its step,
queueing a validation, waiting for it, reporting it), summed over candidates.

A population whose places refill no faster than the host prepares new members is paced by these phases,
not by the device; their means tell which one to shorten. Wall time, not CPU time: a phase that waits for the
interpreter or the device counts that wait, which is what the population waits for too.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator


class HostTimes:
    """Thread-safe sums and counts of phase durations."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seconds: dict[str, float] = {}
        self._counts: dict[str, int] = {}

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the block as one occurrence of `name` (also when it raises)."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - started)

    def add(self, name: str, seconds: float) -> None:
        with self._lock:
            self._seconds[name] = self._seconds.get(name, 0.0) + seconds
            self._counts[name] = self._counts.get(name, 0) + 1

    def means_ms(self) -> dict[str, float]:
        """`mean_<phase>_ms` for every phase seen, and `<phase>_count`."""
        with self._lock:
            means = {f"mean_{k}_ms": 1e3 * v / self._counts[k] for k, v in self._seconds.items()}
            counts = {f"{k}_count": n for k, n in self._counts.items()}
        return {**means, **counts}
