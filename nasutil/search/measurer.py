"""Measuring trained candidates on the hardware (the evaluator), where the config asks and a GPU exists.

While a population trains on the device a candidate is measured on, a timing taken then would read the
population's load, not the candidate. `MeasurementQueue` gathers the candidates that finished training
and measures them together while the population is held quiet (`Trainer.quiet`), so every figure is
taken on an idle device; trials wait for their figures, the population's places do not.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import torch

from nasutil.errors import NasutilError

if TYPE_CHECKING:
    from nasutil.evaluator import Evaluator


class NoMeasurement(NasutilError):
    """The measurer holds no figure for this candidate (a table without its cell): unlike a measurement that
    failed, this says nothing of the candidate, so a trial that may be scored on its prediction
    (`objectives.scored_on` auto or predicted) is, and only one that must be measured fails."""


class HardwareMeasurer(ABC):
    """Where a search's trained candidates get their measured figures (the `evaluator` group)."""

    #: whether measurements here use a device, which must be quiet while they are taken (`quiet_device`)
    uses_device: bool = True

    @property
    @abstractmethod
    def description(self) -> str:
        """One line for the search's summary."""

    def check(self, space_spec: str, device_name: str) -> None:
        """Refuse, in one line before the search starts, a space or device this cannot measure for."""

    def measure(self, space_spec: str, arch_text: str) -> dict[str, Any]:
        """Measured figures (`measured_*` keys); a NasutilError naming the reason if it failed."""
        result = self.measure_many(space_spec, [arch_text])[0]
        if isinstance(result, NasutilError):
            raise result
        return result

    @abstractmethod
    def measure_many(self, space_spec: str, arch_texts: list[str]) -> list[dict[str, Any] | NasutilError]:
        """Each candidate's measured figures, or the NasutilError that says why it could not be measured
        (`NoMeasurement` where there is simply no figure for it)."""

    def prepare(self) -> None:
        """Start, in the background, what the first measurement would otherwise wait for (a worker process,
        say), so that it overlaps training instead of holding a population quiet. Optional."""

    def stage(self, space_spec: str, arch_texts: list[str]) -> None:
        """Do now, before the device is held quiet, whatever of measuring these candidates needs no device
        (building their networks, say), so that `measure_many` right after holds it for the rest. Optional."""

    def wait_ready(self) -> None:
        """Return once what `prepare` starts is up (starting it here if it was not), so that a population is
        held quiet only for measuring, not for a worker's start."""

    def close(self) -> None:
        """Release what measuring holds (worker processes, say)."""


class Measurer(HardwareMeasurer):
    """Measures candidates through `nasutil.evaluator` (isolated worker, measurement cache).

    With `settle` (the default) each call first measures its first candidate once and keeps nothing
    (`Evaluator.settle`), so that every reading follows the worker's own work on the device. Taken right
    after training, a reading is otherwise in a state about 10% faster than the one the same cell reads
    after another measurement, and a population's batches mixed the two (BENCHMARKS.md, "Where a
    survivor's reading sits in its measurement")."""

    def __init__(self, device: str = "cuda", dtype: str = "fp16", batch_size: int = 256, mode: str = "cudagraph",
                 counters: bool = False, timeout_s: float = 300.0, cache: bool = True, settle: bool = True) -> None:
        from nasutil.evaluator import MeasureConfig

        self.config = MeasureConfig(device=device, dtype=dtype, batch_size=int(batch_size), mode=mode,
                                    counters=bool(counters))
        self.timeout_s = float(timeout_s)
        self.use_cache = bool(cache)
        self.settle = bool(settle)
        self._evaluator = None
        self._evaluator_lock = threading.Lock()
        self._starting: threading.Thread | None = None
        self.spent = MeasuringTimes()  # where measuring's time went (`activity`)

    @property
    def description(self) -> str:
        c = self.config
        return f"evaluator on {c.device}, {c.dtype}, batch {c.batch_size}, {c.mode}" + (
            ", each call settled by an unkept reading first" if self.settle else "")

    @property
    def quiet_device(self) -> str:
        """The device that must run nothing else while a candidate is measured."""
        return self.config.device

    def _evaluator_now(self) -> Evaluator:
        """The evaluator, made on first use (its worker process starts on its first measurement, or in
        `prepare`)."""
        with self._evaluator_lock:
            if self._evaluator is None:
                from nasutil.evaluator import Evaluator
                from nasutil.evaluator.cache import MeasurementCache, default_cache_location

                cache = None
                if self.use_cache:
                    try:
                        cache = MeasurementCache(default_cache_location())  # shared where $NASUTIL_CACHE_URL says
                    except NasutilError:
                        pass  # a cache we cannot use is no reason not to measure
                self._evaluator = Evaluator(self.config, cache=cache, timeout_s=self.timeout_s)
            return self._evaluator

    def prepare(self) -> None:
        """Start and warm the measuring worker now, on a thread of its own: its start (an interpreter, torch,
        a CUDA context, cuDNN: seconds) then overlaps the first trainings instead of holding a population
        quiet at its first survivor. A start that fails here is tried again, and reported, by the first
        measurement."""
        with self._evaluator_lock:
            if self._starting is not None:
                return
            self._starting = threading.Thread(target=self._start_worker, name="nasutil-measurer-start", daemon=True)
        self._starting.start()

    def wait_ready(self) -> None:
        starting = self._starting
        if starting is not None:
            starting.join()
        else:
            self._start_worker()

    def _start_worker(self) -> None:
        try:
            self._evaluator_now().start()  # warm (the default); a measurement that comes meanwhile waits for it
        except Exception:  # noqa: BLE001 - the first measurement starts it again and says why it cannot
            pass

    def stage(self, space_spec: str, arch_texts: list[str]) -> None:
        """The candidates' networks built in the worker before the hold (the first twice where each call
        settles: once for the settling reading, once for its own); a hold then covers the device work alone."""
        from nasutil.evaluator import Candidate

        texts = ([arch_texts[0]] if self.settle and arch_texts else []) + list(arch_texts)
        started = time.perf_counter()
        try:
            built = self._evaluator_now().stage([Candidate(space_spec, text) for text in texts]).built
        except Exception:  # noqa: BLE001 - staging only saves time: the measurements build what it did not
            built = 0
        self.spent.add("stage", time.perf_counter() - started, {"staged_built": built})

    def measure_many(self, space_spec: str, arch_texts: list[str]) -> list[dict[str, Any] | NasutilError]:
        from nasutil.evaluator import Candidate

        out: list[dict[str, Any] | NasutilError] = []
        evaluator = self._evaluator_now()
        candidates = [Candidate(space_spec, text) for text in arch_texts]
        if self.settle and candidates:
            started = time.perf_counter()
            settled = evaluator.settle(candidates[0])  # its failure, if any, is the reading's to report
            self.spent.add("settle", time.perf_counter() - started, settled.timing)
        started = time.perf_counter()
        for m in evaluator.measure_many(candidates):
            self.spent.add("measure", time.perf_counter() - started, m.timing)
            started = time.perf_counter()
            if not m.ok:
                out.append(NasutilError(f"measurement failed: {m.error}"))
                continue
            out.append({"measured_device": m.device_name, "measured_latency_ms": m.latency_ms,
                        "measured_latency_cv": m.latency_cv, "measured_throughput_per_s": m.throughput_per_s,
                        "measured_utilization": m.utilization, "measured_sm_clock_mhz": m.sm_clock_mhz})
        return out

    def activity(self) -> dict[str, Any]:
        """Where measuring's time went: each reading's seconds in this process (a settling one apart) and,
        summed over them, the phases the worker reported (`Measurement.timing`)."""
        return self.spent.summary()

    def close(self) -> None:
        starting, self._starting = self._starting, None
        if starting is not None:
            starting.join()  # a worker half started would outlive the search
        with self._evaluator_lock:
            if self._evaluator is not None:
                self._evaluator.close()
                self._evaluator = None


#: the phases of a worker's reading (`Measurement.timing`) that `MeasuringTimes` sums
READING_PHASES = ("build_s", "count_s", "cast_s", "allocate_s", "to_device_s", "prepare_s", "time_s", "release_s",
                  "turn_s", "clock_retries", "staged", "staged_built")


class MeasuringTimes:
    """Seconds spent measuring in this process, by kind ("stage": networks built before a hold; "settle", "measure":
    readings), and the worker's phases summed over them (`worker_phases_s`) and over the settling readings alone
    (`settle_phases_s`): what a quiet hold is made of, and whether a settling reading's time is the worker's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count: dict[str, int] = {}
        self._seconds: dict[str, float] = {}
        self._phases: dict[str, float] = {}
        self._settle_phases: dict[str, float] = {}

    def add(self, kind: str, seconds: float, timing: dict[str, Any] | None) -> None:
        with self._lock:
            self._count[kind] = self._count.get(kind, 0) + 1
            self._seconds[kind] = self._seconds.get(kind, 0.0) + seconds
            for key in READING_PHASES:
                value = (timing or {}).get(key)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    self._phases[key] = self._phases.get(key, 0.0) + float(value)
                    if kind == "settle":
                        self._settle_phases[key] = self._settle_phases.get(key, 0.0) + float(value)

    def summary(self) -> dict[str, Any]:
        with self._lock:
            out: dict[str, Any] = {f"{kind}_count": n for kind, n in self._count.items()}
            out.update({f"{kind}_s": round(v, 4) for kind, v in self._seconds.items()})
            out["worker_phases_s"] = {k: round(v, 4) for k, v in self._phases.items()}
            out["settle_phases_s"] = {k: round(v, 4) for k, v in self._settle_phases.items()}
            return out


def optional_measurer(measure: bool | str = "auto", device: str = "cuda", dtype: str = "fp16", batch_size: int = 256,
                      mode: str = "cudagraph", counters: bool = False, timeout_s: float = 300.0,
                      settle: bool = True) -> Measurer | None:
    """The `evaluator` config group's target: a Measurer, or None where measuring is off or `auto` finds
    no CUDA on this machine (the predictions then stand in)."""
    if measure not in ("auto", True, False):
        raise NasutilError(f"evaluator.measure must be auto, true or false, got {measure!r}")
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not 0 < timeout_s < math.inf:
        raise NasutilError(f"evaluator.timeout_s must be a positive number of seconds, got {timeout_s!r}")
    if not isinstance(settle, bool):
        raise NasutilError(f"evaluator.settle must be true or false, got {settle!r}")
    device = str(device)
    if measure is False or (measure == "auto" and device.startswith("cuda") and not torch.cuda.is_available()):
        return None
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise NasutilError("evaluator.measure=true with device cuda, but CUDA is not available "
                           "(use evaluator=auto, evaluator=none or evaluator=cpu)")
    return Measurer(device, str(dtype), int(batch_size), str(mode), bool(counters), float(timeout_s), settle=settle)


class TableMeasurer(HardwareMeasurer):
    """Measured figures looked up in a table of earlier measurements (`evaluator=table`): a search scored
    on what a GPU measured, on a machine without that GPU. The shipped `nb201_h200` table holds every
    NAS-Bench-201 cell measured on an H200; a CSV the evaluator wrote serves the same way. The table's
    configuration must be the search's target, so that predicted and measured figures describe one thing."""

    uses_device = False

    def __init__(self, table: str = "nb201_h200", dtype: str = "fp16", batch_size: int = 256,
                 mode: str = "cudagraph") -> None:
        from nasutil.data.measured import measured_table

        self.table = measured_table(str(table))
        differ = [(key, want, have) for key, want, have in (("dtype", str(dtype), self.table.dtype),
                                                            ("batch_size", int(batch_size), self.table.batch_size),
                                                            ("mode", str(mode), self.table.mode)) if have and want != have]
        if differ:
            key, want, have = differ[0]
            raise NasutilError(f"evaluator=table: the table {self.table.name} was measured at {key} {have}, the "
                               f"search's target is {want} (set target.{key}={have}, or use another table)")

    @property
    def description(self) -> str:
        return f"measured table {self.table.name}: {self.table.note}"

    def check(self, space_spec: str, device_name: str) -> None:
        """Before the search: the table's space and device are the search's."""
        if self.table.space is not None and space_spec != self.table.space:
            raise NasutilError(f"evaluator=table: the table {self.table.name} holds {self.table.space} networks, "
                               f"not {space_spec!r}")
        if device_name and self.table.device_name != device_name:  # a table predictor may not know its device
            raise NasutilError(f"evaluator=table: the table {self.table.name} was measured on "
                               f"{self.table.device_name}, the predictor predicts for {device_name}: pruned and "
                               f"trained trials would carry figures of two devices")

    def measure_many(self, space_spec: str, arch_texts: list[str]) -> list[dict[str, Any] | NasutilError]:
        out: list[dict[str, Any] | NasutilError] = []
        for text in arch_texts:
            figures = self.table.figures(text)
            if figures is None:
                out.append(NoMeasurement(f"{text} is not in the measured table {self.table.name}"))
                continue
            out.append({"measured_device": self.table.device_name,
                        "measured_latency_ms": figures["latency_ms"],
                        "measured_throughput_per_s": figures["throughput_per_s"],
                        "measured_utilization": figures["utilization"],
                        "measured_source": f"table:{self.table.name}"})
        return out


class MeasurementQueue:
    """Candidates wait here to be measured together while `quiet()` holds the device idle; what needs no device
    (building their networks: `HardwareMeasurer.stage`) is done before the hold begins.

    A candidate's thread adds it and waits; the queue is measured once `batch` candidates wait, when the
    first of them has waited `max_wait_s`, or as soon as `idle()` says that nothing trains, prepares or waits
    for a place (whichever thread notices measures for all). Without that last condition a search's last
    survivors waited out `max_wait_s` with nothing left to train: 5 of a 16-place search's 22 s on an H100
    (BENCHMARKS.md, "Seeds 125-130 on an H100"). Idle means no reservation either: measuring as soon as no
    member trained (63b63e8, taken out in e281def) held the population quiet between waves, while new members
    prepared. One batch is measured at a time. Each result says which batch measured it (`measured_batch`,
    from 0) and its place in that batch (`measured_in_batch`): without settling (`Measurer.settle`) a
    batch's first reading, right after training, read about 10% more throughput than the readings after it
    (BENCHMARKS.md, "Where a survivor's reading sits in its measurement")."""

    def __init__(self, measurer: HardwareMeasurer, quiet: Callable[[], contextlib.AbstractContextManager],
                 batch: int = 8, max_wait_s: float = 5.0, idle: Callable[[], bool] | None = None,
                 poll_s: float = 0.05) -> None:
        self.measurer, self.quiet, self.idle = measurer, quiet, idle
        self.batch, self.max_wait_s, self.poll_s = max(1, int(batch)), float(max_wait_s), float(poll_s)
        self._lock = threading.Lock()
        self._measuring = threading.Lock()
        self._waiting: list[tuple[str, str, Future]] = []
        self.batches = 0  # batches measured
        self.quiet_s = 0.0  # seconds the device was held quiet for them
        self.measured = 0  # candidates measured in them
        self.ready_wait_s = 0.0  # seconds batches waited for the measurer (its start, their staging), before the hold

    @property
    def description(self) -> str:
        return f"{self.measurer.description}, measured in batches of up to {self.batch} while training pauses" + (
            " (at once where nothing is left to train)" if self.idle is not None else "")

    def prepare(self) -> None:
        self.measurer.prepare()

    def measure(self, space_spec: str, arch_text: str) -> dict[str, Any]:
        done: Future = Future()
        with self._lock:
            self._waiting.append((space_spec, arch_text, done))
            full = len(self._waiting) >= self.batch
        if not full:
            deadline = time.monotonic() + self.max_wait_s
            while (left := deadline - time.monotonic()) > 0:
                try:
                    return self._result(done, left if self.idle is None else min(left, self.poll_s))
                except TimeoutError:
                    if self.idle is not None and self.idle():
                        break
        while not done.done():
            self._measure_waiting()
        return self._result(done, None)

    @staticmethod
    def _result(done: Future, timeout: float | None) -> dict[str, Any]:
        result = done.result(timeout=timeout)
        if isinstance(result, NasutilError):
            raise result
        return result

    def _measure_waiting(self) -> None:
        with self._measuring:
            with self._lock:
                waiting, self._waiting = self._waiting, []
            if not waiting:
                return
            try:
                asked = time.perf_counter()
                self.measurer.wait_ready()  # a worker starting up does not hold the population quiet
                specs = list(dict.fromkeys(s for s, _, _ in waiting))
                if len(specs) == 1:  # the networks built before the hold (one space a batch, as a search has)
                    self.measurer.stage(specs[0], [text for _, text, _ in waiting])
                started = time.perf_counter()
                self.ready_wait_s += started - asked
                with self.quiet():
                    results: list[Any] = []
                    for spec in dict.fromkeys(s for s, _, _ in waiting):
                        mine = [(text, f) for s, text, f in waiting if s == spec]
                        figures = self.measurer.measure_many(spec, [text for text, _ in mine])
                        results += list(zip((f for _, f in mine), figures))
                self.quiet_s += time.perf_counter() - started
                self.batches += 1
                self.measured += len(waiting)
            except BaseException as exc:
                for _, _, f in waiting:
                    if not f.done():
                        f.set_exception(exc)
                raise
            number = self.batches - 1
            for place, (f, figures) in enumerate(results):
                if isinstance(figures, dict):  # which batch, and where in it: a batch's first reading can differ
                    figures = {**figures, "measured_batch": number, "measured_in_batch": place}
                f.set_result(figures)

    def activity(self) -> dict[str, Any]:
        """Batches measured, the candidates in them, the holds' seconds, the waits for the measurer before them, and
        the measurer's own account where it keeps one (`Measurer.activity`)."""
        own = {"batches": self.batches, "measured": self.measured, "quiet_s": round(self.quiet_s, 4),
               "ready_wait_s": round(self.ready_wait_s, 4)}
        inner = getattr(self.measurer, "activity", None)
        return {**own, **(inner() if callable(inner) else {})}

    def close(self) -> None:
        self.measurer.close()
