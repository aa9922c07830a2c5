"""The evaluator: measure candidates through isolated workers, with a cache and progress."""

from __future__ import annotations

import math
import multiprocessing as mp
import numbers
import os
import queue
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

from nasutil.errors import NasutilError
from nasutil.evaluator.cache import MeasurementCache
from nasutil.evaluator.candidate import Candidate, resolve
from nasutil.evaluator.config import MeasureConfig
from nasutil.evaluator.measurement import Measurement
from nasutil.evaluator.worker import DeviceTurns, IsolatedWorker, Staged, device_info, measure_task, warm_quietly


#: the most worker processes an evaluator starts (each holds its own interpreter, torch and device context)
MAX_WORKERS = 256
#: readings held to the device's top clock while none has reached it: on a device capped below its top clock
#: (power or thermal limits) the holding ends after these, each of which spent its retries without reaching it
TOP_CLOCK_READINGS = 3


class Evaluator:
    """Measures many candidates at one configuration.

    isolate=True runs them in worker processes with a per-candidate time limit, so that
    out-of-memory errors, hangs and crashes fail that candidate only. With workers > 1,
    the workers build candidates in parallel but take turns on the device (a shared lock
    covers every copy and kernel they run). On a GPU this keeps other workers' kernels out
    of a timed window (CPU-side jitter and clock changes remain: see BENCHMARKS.md); on a
    CPU the workers share the cores that time, so use one worker there for clean timings.

    `devices` (e.g. ["cuda:0", "cuda:1"]) spreads the workers over several devices, worker i on
    devices[i % len]; the workers of one device take turns on it.

    A GPU result timed at an SM clock below `clock_floor` times the highest clock seen so far is
    measured again, up to `clock_retries` times, and the one at the highest clock is kept: a clock dip
    made nb201 cells read up to 29% slower with a tiny within-run CV (BENCHMARKS.md).

    `warm` (the default) loads each measuring process's CUDA libraries before its first timing
    (`worker.warm_device`), so that work is not paid inside its first turn on the device: on an H100 warmed
    workers prepared a cell in 20 ms against 37 ms cold and read the same cells as cold ones (BENCHMARKS.md).
    """

    def __init__(self, config: MeasureConfig, *, cache: MeasurementCache | None = None, isolate: bool = True,
                 timeout_s: float = 300.0, remeasure: bool = False, workers: int = 1,
                 clock_floor: float = 0.95, clock_retries: int = 2, devices: Sequence[str] | None = None,
                 warm: bool = True) -> None:
        if not isinstance(config, MeasureConfig):
            raise NasutilError(f"an Evaluator measures by a MeasureConfig, got {type(config).__name__}")
        if isinstance(workers, bool) or not isinstance(workers, numbers.Integral) or not 1 <= workers <= MAX_WORKERS:
            raise NasutilError(f"workers must be a whole number from 1 to {MAX_WORKERS}, got {workers!r}")
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, numbers.Real) or not math.isfinite(timeout_s) \
                or timeout_s <= 0:
            raise NasutilError(f"timeout_s must be a finite number of seconds > 0, got {timeout_s!r}")
        if not (isinstance(clock_floor, numbers.Real) and 0 <= clock_floor <= 1) or \
                isinstance(clock_retries, bool) or not isinstance(clock_retries, numbers.Integral) or clock_retries < 0:
            raise NasutilError("clock_floor must be in [0, 1] and clock_retries a whole number >= 0")
        workers, timeout_s = int(workers), float(timeout_s)
        self.clock_floor = clock_floor
        self.clock_retries = clock_retries
        self.timeout_s = timeout_s
        self.claim_poll_s = 0.5  # how often a worker waiting for another's claimed result looks for it
        self._steady_clock = 0.0
        self._below_top_readings = 0  # readings held to the top clock that ended under it
        if workers > 1 and not isolate:
            raise NasutilError("several workers need isolated worker processes")
        self.config = config
        self.cache = cache
        self.remeasure = remeasure
        if devices and not isolate:
            raise NasutilError("spreading over devices needs isolated worker processes")
        placed = [devices[i % len(devices)] for i in range(workers)] if devices else [config.device] * workers
        # workers on one device take turns on it; workers on different devices never wait for each other
        turns = {d: DeviceTurns(mp.get_context("spawn")) for d in set(placed) if placed.count(d) > 1}
        threads = max(1, len(os.sched_getaffinity(0)) // workers) if workers > 1 else None
        self.warm = bool(warm)
        self._workers = [IsolatedWorker(d, timeout_s, turns=turns.get(d), threads=threads, warm=self.warm)
                         for d in placed] if isolate else []
        self.devices = sorted(set(placed))
        self._idle: queue.Queue[IsolatedWorker] = queue.Queue()
        for worker in self._workers:
            self._idle.put(worker)
        self._info: dict | None = None
        self._info_lock = threading.Lock()  # threads measuring at once must not start the first worker twice
        self.cache_hits = 0

    @property
    def info(self) -> dict:
        """Device name and torch version of the processes that measure."""
        with self._info_lock:
            if self._info is None:
                if self._workers:
                    self._info = self._workers[0].start()
                else:
                    self._info = device_info(self.config.device)
                    if self.warm:
                        self._info["warm_s"] = warm_quietly(self.config.device)
        return self._info

    def start(self) -> dict:
        """Start every worker now, in parallel (they start on first use otherwise): for timing a run
        without the processes' start-up."""
        info = self.info
        if len(self._workers) > 1:
            with ThreadPoolExecutor(len(self._workers) - 1) as pool:
                list(pool.map(lambda worker: worker.start(), self._workers[1:]))
        return info

    def measure(self, candidate: Candidate, config: MeasureConfig | None = None) -> Measurement:
        return self.measure_configs(candidate, [config or self.config])[0]

    def measure_configs(self, candidate: Candidate, configs: Sequence[MeasureConfig]) -> list[Measurement]:
        """Measure one candidate at several configurations on one worker, in order.

        A process pays one-off library work (kernel loading, cuDNN heuristics) the first time it runs
        a layer shape; keeping a candidate's batch sizes and modes on one worker pays it once.
        """
        if not isinstance(candidate, Candidate):  # a model or an arch string once failed as "has no attribute 'space'"
            raise NasutilError(f"measure takes a Candidate, e.g. Candidate('nb201', ARCH) or Candidate('torchvision', "
                               f"model), got {type(candidate).__name__}")
        self.info  # started before a worker is taken, so the first worker is free to answer
        worker = self._idle.get() if self._workers else None
        try:
            return [self._measure_on(worker, candidate, config) for config in configs]
        finally:
            if worker is not None:
                self._idle.put(worker)

    def stage(self, candidates: Sequence[Candidate], config: MeasureConfig | None = None) -> Staged:
        """Build the candidates' networks now, where they will be measured, so that their measurements that
        follow do no more than the device work (a search holds its population quiet for that alone). Each
        network serves one measurement: list a candidate twice for a settling reading and a kept one. Staged
        networks that no measurement takes (a cache hit, a failed build) are let go by the next call. With several
        workers, which one measures which candidate is not known: nothing is staged (`Staged.built` 0)."""
        from nasutil.evaluator.worker import stage_candidates, stage_task

        config = config or self.config
        wanted = []
        for candidate in candidates:
            try:
                wanted.append(Candidate(candidate.space, resolve(candidate, config.input_size)[0]))
            except NasutilError:  # its measurement says why
                continue
        if len(self._workers) > 1:
            return Staged(0, 0.0, "several workers: staging skipped")
        self.info  # started before the worker is taken, so that it is free to answer
        if not self._workers:
            return stage_candidates(stage_task(wanted, config).payload)
        worker = self._idle.get()
        try:
            if worker.device != config.device:
                config = config.with_(device=worker.device)
            return worker.run(stage_task(wanted, config))
        finally:
            self._idle.put(worker)

    def settle(self, candidate: Candidate, config: MeasureConfig | None = None) -> Measurement:
        """Measure the candidate on a worker and keep nothing (the cache neither read nor written), so that the
        next reading on that worker follows the worker's own work on the device.

        A GPU reading sits in one of two states about 10% apart in throughput, set by what ran on the device
        just before it: right after another process's work it reads fast, after the measuring worker's own
        work it reads as a process that has the device to itself (BENCHMARKS.md, "Where a survivor's
        reading sits in its measurement"). A search measures right after training, so its readings would
        otherwise depend on whether another candidate was measured first.

        Until some reading reaches `clock_floor` of the device's top clock, a reading under it, this one or a later
        one, is taken again up to `clock_retries` times (`_top_clock_floor`); after that a settling reading is taken
        once: on an H100 a search's first readings were taken at 1,335-1,410 MHz against 1,980 and read 1-6%
        slow, with nothing yet to compare their clock with (BENCHMARKS.md, "Settled readings")."""
        if not isinstance(candidate, Candidate):
            raise NasutilError(f"settle takes a Candidate, got {type(candidate).__name__}")
        config = config or self.config
        self.info  # started before a worker is taken, so the first worker is free to answer
        worker = self._idle.get() if self._workers else None
        try:
            if worker is not None and worker.device != config.device:
                config = config.with_(device=worker.device)
            return self._measure_at_steady_clock(worker, candidate, config, settling=True)
        finally:
            if worker is not None:
                self._idle.put(worker)

    def _measure_on(self, worker: IsolatedWorker | None, candidate: Candidate, config: MeasureConfig) -> Measurement:
        try:
            arch, arch_hash, input_size, _ = resolve(candidate, config.input_size)
        except NasutilError as exc:
            return Measurement.failed(candidate.space, candidate.arch, config, str(exc))
        info = self.info
        canonical = Candidate(candidate.space, arch)
        if worker is not None and worker.device != config.device:
            config = config.with_(device=worker.device)  # the device this worker was given
        if self.cache is None:
            return self._measure_at_steady_clock(worker, canonical, config)
        key = self.cache.key(candidate.space, arch_hash, info["device_name"], info["torch_version"], config,
                             input_size)
        if not self.remeasure:
            hit = self._cached_or_claimed(key, arch)
            if hit is not None:
                self.cache_hits += 1
                return hit
        else:
            self.cache.claim(key, self._claim_ttl_s)
        try:
            result = self._measure_at_steady_clock(worker, canonical, config)
            self.cache.put(result, config)
        finally:
            self.cache.release(key)
        return result

    @property
    def _claim_ttl_s(self) -> float:
        """How long a claim holds: the longest a measurement may take (with its clock retries), plus a minute."""
        return (self.clock_retries + 1) * self.timeout_s + 60.0

    def _cached_or_claimed(self, key: dict, arch: str) -> Measurement | None:
        """The cached result, or None once this process has claimed the key: while another worker (any
        process sharing the cache) holds the claim, wait for its result; take the key over if its claim
        expires or it gives up without a result (a failure, which is not cached)."""
        assert self.cache is not None
        while True:
            hit = self.cache.get_key(key, arch)
            if hit is not None:
                return hit
            if self.cache.claim(key, self._claim_ttl_s):
                # the result may have landed between the look and the claim (its owner stored it and let
                # its claim go): look once more, or the key would be measured twice
                hit = self.cache.get_key(key, arch)
                if hit is not None:
                    self.cache.release(key)
                return hit
            time.sleep(self.claim_poll_s)

    def _top_clock_floor(self) -> float:
        """The device's top SM clock while no reading has reached `clock_floor` of it and fewer than
        TOP_CLOCK_READINGS readings held to it ended under it; else 0 (readings are held to the steady clock seen).

        A search's first readings have no steady clock to be compared with, and the one they set may itself be a
        dip: on an H100 a search's first kept reading read 12.5% slow at 1,395 MHz against 1,980, where only the
        settling reading before it had been held to the top clock (BENCHMARKS.md, "Survivors against a plain
        timing loop")."""
        top = float(self.info.get("max_sm_clock_mhz") or 0.0)
        if not top or self._steady_clock >= self.clock_floor * top or self._below_top_readings >= TOP_CLOCK_READINGS:
            return 0.0
        return top

    def _measure_at_steady_clock(self, worker: IsolatedWorker | None, candidate: Candidate, config: MeasureConfig,
                                 settling: bool = False) -> Measurement:
        """The reading at the highest clock of up to 1 + `clock_retries`, taken again while under `clock_floor` of
        the steady clock seen so far, or of the device's top clock where no reading has reached it yet
        (`_top_clock_floor`). A settling reading is taken again only in that second case: it is kept by no one."""
        best, retries = None, 0
        floor_of = self._top_clock_floor()
        retries_allowed = self.clock_retries if floor_of or not settling else 0
        while True:
            result = worker.measure(candidate, config) if worker is not None else measure_task(candidate, config)
            clock = result.sm_clock_mhz if result.ok else None
            if clock is None:
                return result if best is None else best
            self._steady_clock = max(self._steady_clock, clock)  # threads only ever raise it
            if best is None or clock > (best.sm_clock_mhz or 0.0):
                best = result
            reference = max(self._steady_clock, floor_of)
            if best.sm_clock_mhz >= self.clock_floor * reference or retries >= retries_allowed:
                best.timing["clock_retries"] = retries
                if floor_of and best.sm_clock_mhz < self.clock_floor * floor_of:
                    self._below_top_readings += 1
                return best
            retries += 1

    def _results(self, candidates: Iterable[Candidate]) -> Iterator[Measurement]:
        if len(self._workers) <= 1:
            for candidate in candidates:
                yield self.measure(candidate)
            return
        self.info  # the first worker starts before the others are needed
        with ThreadPoolExecutor(len(self._workers)) as pool:
            yield from pool.map(self.measure, candidates)

    def measure_many(self, candidates: Iterable[Candidate], *, progress: bool = False,
                     total: int | None = None, description: str = "measuring") -> Iterator[Measurement]:
        """Yield a Measurement per candidate, in input order, failures included."""
        if not progress:
            yield from self._results(candidates)
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
            TimeRemainingColumn

        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("{task.fields[failed]} failed"), TimeElapsedColumn(), TimeRemainingColumn())
        with Progress(*columns, console=Console(file=sys.stderr)) as bar:
            task = bar.add_task(description, total=total, failed=0)
            failed = 0
            for result in self._results(candidates):
                failed += not result.ok
                bar.update(task, advance=1, failed=failed)
                yield result

    def close(self) -> None:
        for worker in self._workers:
            worker.stop()

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
