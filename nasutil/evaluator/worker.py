"""Isolated measurement: a worker process that runs tasks one after another.

The parent sends a task (`nasutil.evaluator.task`: a candidate to measure, or a group co-location hands
it) over a pipe and waits with a time limit. A task that runs out of memory or raises comes back as its
failed result and the worker goes on; one that hangs or kills its process is recorded as failed and a
fresh worker takes the next task.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing as mp
import os
import pkgutil
import signal
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, NoReturn

from nasutil.evaluator.candidate import BuiltCandidate, Candidate, build
from nasutil.evaluator.config import MeasureConfig
from nasutil.evaluator.measurement import Measurement
from nasutil.evaluator.task import R, Task


class DeviceTurns:
    """Lets sibling workers take turns on the device; survives a holder that is killed mid-turn.

    A turn covers a candidate's copy, capture and timing, or, with `MeasureConfig(device_turn="split")` (the
    fast settings), a candidate takes two: one for the copy and one for the timing, its capture (which only
    records) between them. Letting several workers copy and capture side by side (never beside a timing)
    was measured no faster on an H200: each copy then took 190-240 ms instead of 14, the device switching
    between the workers' contexts (BENCHMARKS.md, "Copies and captures side by side"). Where the workers
    share one context through CUDA MPS, `MeasureConfig(device_turn="timing")` lets the turn cover the timing
    alone (`nasutil.evaluator.mps`)."""

    def __init__(self, ctx) -> None:
        self._lock = ctx.Lock()
        self._holder = ctx.Value("i", 0, lock=False)

    def turn(self, notify: Callable[[str], None] = lambda state: None) -> Turn:
        """A task's turn, entered once for each stretch of its device work (a split measurement: twice)."""
        return Turn(self, notify)

    def release_if_held_by(self, pid: int | None) -> None:
        """Called by the parent after killing `pid`: a dead holder can no longer release the lock."""
        if pid and self._holder.value == pid:
            self._holder.value = 0
            self._lock.release()


class Turn:
    """A context manager that may be entered again once it has been left: each entry waits for the device,
    telling `notify` "waiting" and then "running" (the parent's time limit runs only while not waiting)."""

    def __init__(self, turns: DeviceTurns, notify: Callable[[str], None]) -> None:
        self._turns, self._notify = turns, notify

    def __enter__(self) -> None:
        self._notify("waiting")
        self._turns._lock.acquire()
        try:
            self._turns._holder.value = os.getpid()
            self._notify("running")
        except BaseException:  # a parent gone mid-notice must not leave the siblings waiting for the lock
            self.__exit__()
            raise

    def __exit__(self, *exc_info: object) -> None:
        self._turns._holder.value = 0
        self._turns._lock.release()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


def device_info(device: str) -> dict[str, Any]:
    import torch

    from nasutil.evaluator.run_model import device_name, resolve_device

    dev = resolve_device(device)
    info = {"device_name": device_name(dev), "torch_version": torch.__version__, "pid": os.getpid()}
    if dev.type == "cuda":
        from nasutil.evaluator.counters import NvmlDevice

        info["max_sm_clock_mhz"] = NvmlDevice.for_torch_device(dev).max_sm_clock_mhz()
    return info


def is_fatal_device_error(exc: BaseException) -> bool:
    """CUDA errors other than out-of-memory leave the context unusable: the worker must be replaced."""
    text = f"{type(exc).__name__}: {exc}"
    return "CUDA error" in text or "AcceleratorError" in text or "device-side assert" in text


#: networks built in this process ahead of their measurement (`stage_candidates`), each used once, by what they
#: were built for: a search builds a batch of survivors while its population trains, and the population is held
#: quiet for their device work only
_staged: dict[tuple, list[BuiltCandidate]] = {}


def _without_storage(config: MeasureConfig) -> bool:
    return config.weights == "device" and not config.per_layer and config.device.startswith("cuda")


def _staged_key(candidate: Candidate, config: MeasureConfig) -> tuple:
    return (candidate.space, candidate.arch, config.input_size, config.num_classes, _without_storage(config),
            config.dtype, config.channels_last)


@dataclass(frozen=True)
class Staged:
    """What `stage_candidates` built: how many networks, in how many seconds, or why it could not."""

    built: int
    seconds: float
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Staged:
        return cls(int(data["built"]), float(data["seconds"]), str(data.get("error", "")))


def stage_candidates(payload: dict[str, Any], exclusive=None) -> Staged:
    """Build the payload's candidates now, each cast as its measurement will cast it, for the measurements that
    follow in this process (a candidate listed twice is built twice: a settling reading and a kept one). What an
    earlier call staged and no measurement used is let go first. Nothing here touches the device."""
    import torch

    from nasutil.evaluator.dtypes import torch_dtype
    from nasutil.evaluator.weights import built_without_storage

    started = time.perf_counter()
    config = MeasureConfig(**payload["config"])
    _staged.clear()
    built = 0
    for fields in payload["candidates"]:
        candidate = Candidate(**fields)
        network = build(candidate, config.input_size, config.num_classes, without_storage=_without_storage(config))
        if not built_without_storage(network.model):  # one built on the meta device gets its values in the turn
            memory_format = torch.channels_last if config.channels_last else torch.contiguous_format
            network.model.eval().to(dtype=torch_dtype(config.dtype), memory_format=memory_format)
        _staged.setdefault(_staged_key(candidate, config), []).append(network)
        built += 1
    return Staged(built, time.perf_counter() - started)


def stage_task(candidates: list[Candidate], config: MeasureConfig) -> Task[Staged]:
    return Task("nasutil.evaluator.worker:stage_candidates",
                {"candidates": [asdict(c) for c in candidates], "config": config.to_dict()},
                Staged.from_dict, lambda why, device_name: Staged(0, 0.0, why))


def _built(candidate: Candidate, config: MeasureConfig) -> tuple[BuiltCandidate, bool]:
    """The candidate's network: one staged for it, where there is one (and whether it was), else built now."""
    waiting = _staged.get(_staged_key(candidate, config))
    if waiting:
        return waiting.pop(), True
    return build(candidate, config.input_size, config.num_classes, without_storage=_without_storage(config)), False


def measure_task(candidate: Candidate, config: MeasureConfig, exclusive=None) -> Measurement:
    """Build (or take the network staged for it) and measure one candidate in this process; failures come back
    as failed Measurements.

    `exclusive` (a lock shared by sibling workers) is held while the candidate runs on the device."""
    import torch

    from nasutil.evaluator.run_model import measure_model
    from nasutil.errors import NasutilError

    try:
        t0 = time.perf_counter()
        built, staged = _built(candidate, config)
        build_s = time.perf_counter() - t0
        result = measure_model(built.model, config, space=built.space, arch=built.arch, arch_hash=built.arch_hash,
                               input_size=built.input_size, in_channels=built.in_channels, exclusive=exclusive,
                               counts=built.counts)
        result.timing["build_s"] = build_s
        result.timing["staged"] = float(staged)
    except torch.cuda.OutOfMemoryError as exc:
        result = Measurement.failed(candidate.space, candidate.arch, config, f"out of memory: {_first_line(exc)}")
    except NasutilError as exc:
        result = Measurement.failed(candidate.space, candidate.arch, config, str(exc))
    except Exception as exc:  # a broken candidate must not end the run
        detail = traceback.extract_tb(exc.__traceback__)[-1]
        where = f" ({os.path.basename(detail.filename)}:{detail.lineno})" if detail else ""
        result = Measurement.failed(candidate.space, candidate.arch, config, _first_line(exc) + where)
        if is_fatal_device_error(exc):
            result.timing["fatal"] = True
    if not result.ok:  # give memory of a failed candidate back before the next one
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    return result


def run_candidate(payload: dict[str, Any], exclusive=None) -> Measurement:
    """A candidate task's work in the worker: `measure_task`, which fails the candidate itself."""
    return measure_task(Candidate(**payload["candidate"]), MeasureConfig(**payload["config"]), exclusive)


def candidate_task(candidate: Candidate, config: MeasureConfig) -> Task[Measurement]:
    return Task("nasutil.evaluator.worker:run_candidate", {"candidate": asdict(candidate), "config": config.to_dict()},
                Measurement.from_dict,
                lambda why, device_name: Measurement.failed(candidate.space, candidate.arch, config, why, device_name))


def run_task(runner: str, payload: dict[str, Any], exclusive=None) -> tuple[str, Any, bool]:
    """Run a task's runner in this process: ("result", its dict, fatal), ("user", a NasutilError's message,
    False) or ("failed", why, fatal), where fatal says the device is left unusable and the worker must go."""
    import torch

    from nasutil.errors import NasutilError

    try:
        result = pkgutil.resolve_name(runner)(payload, exclusive)
        return "result", result.to_dict(), bool(getattr(result, "fatal", False))
    except NasutilError as exc:
        return "user", str(exc), False
    except torch.cuda.OutOfMemoryError as exc:
        return "failed", f"out of memory: {(str(exc).splitlines() or [''])[0]}", False
    except Exception as exc:  # a broken task must not end the worker
        return "failed", _first_line(exc), is_fatal_device_error(exc)


def warm_device(device_name: str, exclusive: contextlib.AbstractContextManager | None = None) -> float:
    """Load what this process's first measurement would otherwise load inside its turn on the device: the
    CUDA context, cuDNN and cuBLAS (a small fp16 convolution in channels_last and a matrix product) and the
    graph machinery (one tiny capture). Microseconds of device work, so it may run beside training. On an
    H100 a short pass's workers, warmed, prepared a cell in 20 ms against 37 ms cold, and their readings did
    not move (BENCHMARKS.md, "Warmed workers over 200 fresh cells"). Returns its seconds."""
    import torch

    started = time.perf_counter()
    device = torch.device(device_name)
    if device.type == "cuda":
        with exclusive or contextlib.nullcontext(), torch.inference_mode():
            conv = torch.nn.Conv2d(16, 16, 3, padding=1).to(device, torch.float16, memory_format=torch.channels_last)
            x = torch.randn(8, 16, 8, 8, device=device, dtype=torch.float16).to(memory_format=torch.channels_last)
            graph = torch.cuda.CUDAGraph()
            stream = torch.cuda.Stream(device)
            with torch.cuda.stream(stream):
                conv(x).flatten(1) @ torch.ones(1024, 10, device=device, dtype=torch.float16)
                with torch.cuda.graph(graph, stream=stream):
                    conv(x)
            graph.replay()
            torch.cuda.synchronize(device)
    return time.perf_counter() - started


def _worker_main(conn, device: str, turns: DeviceTurns | None, threads: int | None,
                 registrations: dict[str, Any], warm: bool = True) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops its workers
    if not os.environ.get("NASUTIL_WARNINGS"):
        warnings.simplefilter("ignore")
    if threads:
        import torch

        torch.set_num_threads(threads)
    try:
        from nasutil.plugins import restore_registrations

        restore_registrations(registrations)
        info = device_info(device)
        if warm:
            info["warm_s"] = warm_quietly(device, turns)
        conn.send(("hello", info))
    except Exception as exc:
        conn.send(("error", _first_line(exc)))
        return
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):  # the parent let its end go (an Evaluator never closed, collected): done
            return
        if message is None:
            _leave_at_once()
        runner, payload = message
        kind, answer, fatal = run_task(runner, payload,
                                       turns.turn(lambda state: conn.send(("state", state))) if turns else None)
        conn.send((kind, answer, fatal))
        if fatal:
            return


def _leave_at_once() -> NoReturn:
    """End the worker without the interpreter's teardown. A spawned worker that returns runs Python's whole
    shutdown (torch's modules, the device context), which held a search's end back: a CPU worker took 0.46 s to
    stop that way (BENCHMARKS.md, "Stopping a measuring worker"). Nothing of it is needed here: answers go back
    through the pipe before the parent asks the worker to stop, and the operating system releases the device."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed or gone: nothing to flush
            pass
    os._exit(0)


def warm_quietly(device: str, turns: DeviceTurns | None = None) -> float | None:
    """`warm_device` in the device turn; None where it failed (the first measurement then says why)."""
    try:
        return warm_device(device, turns.turn() if turns else None)
    except Exception:  # noqa: BLE001 - warming is an optimisation, never a reason not to start
        return None


#: the exit status of a worker process that was asked to start workers of its own while it imported the script
#: that started it (a script without `if __name__ == "__main__":`): told apart from any other early death
UNGUARDED_SCRIPT_EXIT = 87

UNGUARDED_SCRIPT = ("the evaluator's worker processes import the script that started them, and this script "
                    "starts measuring as it is imported: put its work under `if __name__ == \"__main__\":` "
                    "(Python's rule for the processes it starts by spawning)")


def _refuse_to_start_while_importing_the_script() -> None:
    """In a worker that is importing its parent's script (Python does so before a spawned process runs
    anything), a measurement started by that import would start workers of its own, endlessly; Python
    refuses with a long RuntimeError and the parent then read an EOFError traceback. Here the worker ends
    quietly with an exit status the parent recognises, and the parent says what to change."""
    if getattr(mp.process.current_process(), "_inheriting", False):
        os._exit(UNGUARDED_SCRIPT_EXIT)


def _start_failure(exitcode: int | None) -> str:
    """Why a worker process ended before it said hello, in one line."""
    if exitcode == UNGUARDED_SCRIPT_EXIT:
        return f"measurement worker could not start: {UNGUARDED_SCRIPT}"
    how = f"exit status {exitcode}" if exitcode is not None and exitcode >= 0 else (
        f"signal {-exitcode}" if exitcode is not None else "no exit status yet")
    return f"measurement worker ended while starting ({how}); its own error, if any, is printed above"


class IsolatedWorker:
    """One long-lived worker process that runs tasks; restarted after a hang or crash. It repeats this
    process's run-time registrations of every plugin kind (`nasutil.plugins`) as it starts, and with `warm`
    (the default) loads its CUDA libraries then (`warm_device`)."""

    def __init__(self, device: str, timeout_s: float = 300.0, start_timeout_s: float = 180.0,
                 turns: DeviceTurns | None = None, threads: int | None = None, warm: bool = True) -> None:
        self.device = device
        self.warm = warm  # load its CUDA libraries as it starts (`warm_device`), before any timing
        self.turns = turns
        self.threads = threads
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s
        self._ctx = mp.get_context("spawn")
        self._proc = None
        self._conn = None
        self.info: dict[str, Any] = {}

    def start(self) -> dict[str, Any]:
        from nasutil.errors import NasutilError
        from nasutil.plugins import runtime_registrations

        _refuse_to_start_while_importing_the_script()
        parent, child = self._ctx.Pipe()
        self._proc = self._ctx.Process(target=_worker_main, daemon=True,
                                      args=(child, self.device, self.turns, self.threads, runtime_registrations(),
                                            self.warm))
        self._proc.start()
        child.close()
        self._conn = parent
        if not parent.poll(self.start_timeout_s):
            self.stop()
            raise NasutilError(f"measurement worker did not start within {self.start_timeout_s:.0f} s")
        try:
            kind, payload = parent.recv()
        except (EOFError, OSError):  # it ended before saying hello
            self._proc.join(timeout=5)
            exitcode = self._proc.exitcode
            self.stop()
            raise NasutilError(_start_failure(exitcode)) from None
        if kind != "hello":
            self.stop()
            raise NasutilError(f"measurement worker could not start: {payload}")
        self.info = payload
        return payload

    def measure(self, candidate: Candidate, config: MeasureConfig) -> Measurement:
        return self.run(candidate_task(candidate, config))

    def run(self, task: Task[R]) -> R:
        """The task's result, or its failed result after a timeout or the worker's death. The time limit
        runs while the task works and while it has the device, not while it waits for a sibling worker to
        finish its turn."""
        if self._proc is None or not self._proc.is_alive():
            self.start()
        assert self._conn is not None and self._proc is not None
        try:
            self._conn.send((task.runner, task.payload))
            left, waiting = self.timeout_s, False
            while True:
                started = time.monotonic()
                if not waiting and not self._conn.poll(max(left, 0.0)):
                    reason = f"timed out after {self.timeout_s:g} s"  # 0.5 once read "after 0 s"
                    break
                kind, *answer = self._conn.recv()  # while waiting, a hung sibling is killed by its own limit
                if not waiting:
                    left -= time.monotonic() - started
                if kind != "state":
                    payload, fatal = answer
                    if fatal:
                        self._proc.join(10)
                        self.stop()
                    return task.outcome(kind, payload, self.info.get("device_name", ""))
                waiting = answer[0] == "waiting"
        except (EOFError, ConnectionResetError, BrokenPipeError):
            self._proc.join(5)
            reason = f"worker process died (exit code {self._proc.exitcode})"
        self.stop()
        return task.failed(reason, self.info.get("device_name", ""))

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
            if self.turns is not None:
                self.turns.release_if_held_by(self._proc.pid)
            self._proc = None
