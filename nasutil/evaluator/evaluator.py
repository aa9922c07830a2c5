"""The evaluator: measure candidates through an isolated worker, with a cache and progress."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator

from nasutil.errors import NasutilError
from nasutil.evaluator.cache import MeasurementCache
from nasutil.evaluator.candidate import Candidate, resolve
from nasutil.evaluator.config import MeasureConfig
from nasutil.evaluator.measurement import Measurement
from nasutil.evaluator.worker import IsolatedWorker, device_info, measure_task


class Evaluator:
    """Measures many candidates at one configuration.

    isolate=True runs them in one worker process with a per-candidate time limit,
    so that out-of-memory errors, hangs and crashes fail that candidate only.
    """

    def __init__(self, config: MeasureConfig, *, cache: MeasurementCache | None = None, isolate: bool = True,
                 timeout_s: float = 300.0, remeasure: bool = False) -> None:
        self.config = config
        self.cache = cache
        self.remeasure = remeasure
        self._worker = IsolatedWorker(config.device, timeout_s) if isolate else None
        self._info: dict | None = None
        self.cache_hits = 0

    @property
    def info(self) -> dict:
        """Device name and torch version of the process that measures."""
        if self._info is None:
            self._info = self._worker.start() if self._worker is not None else device_info(self.config.device)
        return self._info

    def measure(self, candidate: Candidate, config: MeasureConfig | None = None) -> Measurement:
        config = config or self.config
        try:
            arch, arch_hash, input_size, _ = resolve(candidate, config.input_size)
        except NasutilError as exc:
            return Measurement.failed(candidate.space, candidate.arch, config, str(exc))
        if self.cache is not None and not self.remeasure:
            hit = self.cache.get(candidate.space, arch_hash, self.info["device_name"], self.info["torch_version"],
                                 config, input_size)
            if hit is not None:
                self.cache_hits += 1
                return hit
        canonical = Candidate(candidate.space, arch)
        if self._worker is not None:
            self.info  # start the worker before the clock of the first candidate starts
            result = self._worker.measure(canonical, config)
        else:
            result = measure_task(canonical, config)
        if self.cache is not None:
            self.cache.put(result, config)
        return result

    def measure_many(self, candidates: Iterable[Candidate], *, progress: bool = False,
                     total: int | None = None, description: str = "measuring") -> Iterator[Measurement]:
        """Yield a Measurement per candidate, in order, failures included."""
        if not progress:
            for candidate in candidates:
                yield self.measure(candidate)
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
            TimeRemainingColumn

        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[failed]} failed"),
                   TimeElapsedColumn(), TimeRemainingColumn())
        with Progress(*columns, console=Console(file=sys.stderr), transient=False) as bar:
            task = bar.add_task(description, total=total, failed=0)
            failed = 0
            for candidate in candidates:
                result = self.measure(candidate)
                failed += not result.ok
                bar.update(task, advance=1, failed=failed)
                yield result

    def close(self) -> None:
        if self._worker is not None:
            self._worker.stop()

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
