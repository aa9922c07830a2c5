"""Compile many networks at once: child processes fill Inductor's on-disk cache side by side first.

Dynamo must compile a network in the process that runs it, one network at a time (it is not safe to
call from several threads), and an NB201 network takes 14-17 s to compile on a 16-core host, so a group
of 64 waits a quarter of an hour. Most of that time is Inductor lowering the graph and compiling its
kernels, and Inductor caches both on disk, keyed by the graph, the shapes and the options, not by the
weights (frozen weights count by their shape). Child processes compile copies of the networks in
parallel, each on its share of the host's cores; the compilation here then finds their code in the
cache and only traces the network again.

    with CompileCacheWarmer(workers=8) as warmer:
        ready = [warmer.submit(model, x) for model, x in zip(models, inputs)]
        for model, x, future in zip(models, inputs, ready):
            wait_quietly(future)
            torch.compile(model, **options)(x)      # a cache hit

A warm-up that fails (a network that cannot be serialised, a child that dies, one that has not answered
within `WAIT_S`) costs nothing but the time: the compilation here then does the work itself. On a GPU
every child holds a CUDA context, and a copy of its network while it compiles; `NASUTIL_COMPILE_WORKERS`
bounds how many. A child ends when its warmer closes, or within a second of this process dying
(killed on a time limit, say), and removes the jobs' folder then.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import gc
import io
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn as nn

from nasutil.errors import NasutilError

log = logging.getLogger(__name__)

#: fewer workers than this gain nothing: the process that runs the networks would wait for one child
MIN_WORKERS = 2

#: the longest this process waits for a child's network before compiling it itself
WAIT_S = 900.0

#: the longest a closing warmer lets a child finish the network under way before ending it
CLOSE_WAIT_S = 30.0

#: the environment variable that sets how many children compile at once (0 or 1: none)
WORKERS_VARIABLE = "NASUTIL_COMPILE_WORKERS"


def default_workers() -> int:
    """$NASUTIL_COMPILE_WORKERS, or half the host's cores, at most 16: each child then compiles its
    kernels on two or more threads."""
    given = os.environ.get(WORKERS_VARIABLE, "").strip()
    if given:
        try:
            workers = int(given)
        except ValueError:
            workers = -1
        if workers < 0:
            raise NasutilError(f"{WORKERS_VARIABLE} must be a whole number >= 0 (0: no child processes), "
                               f"got {given!r}")
        return workers
    return min(16, (os.cpu_count() or 1) // 2)


@dataclass(frozen=True)
class CompileJob:
    """What a child needs to compile a network exactly as this process will: the network, serialised
    with its weights, an input of the same shape, strides and type, and the mode it runs in."""

    network: bytes
    device: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype
    training: bool
    autocast_dtype: torch.dtype | None
    options: tuple[tuple[str, object], ...]
    settings: dict[str, object]  # the parent's global settings that Inductor's cache key reads (`_settings`)


def _settings() -> dict[str, object]:
    """The process-wide settings that are part of Inductor's cache key: a child must hold the parent's values
    (a setting put back to its default by hand, as `"ieee"` for `"none"`, counts as another key)."""
    matmul = torch.backends.cuda.matmul
    return {"threads": torch.get_num_threads(),  # code generated for a CPU depends on them
            "fp32_precision": getattr(matmul, "fp32_precision", None),
            "fp16_reduced": matmul.allow_fp16_reduced_precision_reduction,
            "bf16_reduced": matmul.allow_bf16_reduced_precision_reduction,
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "default_dtype": torch.get_default_dtype(),
            "deterministic": (torch.are_deterministic_algorithms_enabled(),
                              torch.is_deterministic_algorithms_warn_only_enabled())}


def _apply_settings(settings: dict[str, object]) -> None:
    matmul = torch.backends.cuda.matmul
    torch.set_num_threads(settings["threads"])
    torch.set_float32_matmul_precision(settings["float32_matmul_precision"])
    if settings["fp32_precision"] is not None:
        matmul.fp32_precision = settings["fp32_precision"]
    matmul.allow_fp16_reduced_precision_reduction = settings["fp16_reduced"]
    matmul.allow_bf16_reduced_precision_reduction = settings["bf16_reduced"]
    torch.set_default_dtype(settings["default_dtype"])
    enabled, warn_only = settings["deterministic"]
    torch.use_deterministic_algorithms(enabled, warn_only=warn_only)


#: the candidates of a space share one forward code object; each is a recompilation of it
_MANY = 1 << 16


@contextlib.contextmanager
def many_networks() -> Iterator[None]:
    """Let Dynamo keep a compiled entry for every network of a group, and fail loudly rather than run a
    network eagerly once its default limit of a few recompilations is reached."""
    from nasutil.evaluator.modes import check_compiled_code_cache

    check_compiled_code_cache()
    config = torch._dynamo.config
    wanted = {"recompile_limit": _MANY, "cache_size_limit": _MANY, "accumulated_recompile_limit": _MANY,
              "accumulated_cache_size_limit": _MANY, "fail_on_recompile_limit_hit": True,
              "fail_on_cache_limit_hit": True}
    known = {name: value for name, value in wanted.items() if hasattr(config, name)}
    with config.patch(known):
        yield


def _signature(model: nn.Module, job: CompileJob) -> tuple:
    """Networks with one structure, input and mode compile to the same cached code: warm each once."""
    return (repr(model), job.device, job.shape, job.stride, job.dtype, job.training, job.autocast_dtype, job.options)


def compile_job(job: CompileJob, threads: int) -> float:
    """Compile and run the network once, as the parent will (inference mode, or a forward under autocast
    and a backward); return the seconds it took."""
    import torch._inductor.config
    import torch.nn.functional as F

    torch._inductor.config.compile_threads = threads
    _apply_settings(job.settings)
    start = time.perf_counter()
    model = torch.load(io.BytesIO(job.network), map_location=job.device, weights_only=False)  # from the parent
    model.train(job.training)
    x = torch.empty_strided(job.shape, job.stride, dtype=job.dtype, device=job.device).normal_()
    with many_networks():
        fast = torch.compile(model, dynamic=False, options=dict(job.options))
        if not job.training:
            with torch.inference_mode():
                fast(x)
        else:
            with torch.autocast(torch.device(job.device).type, dtype=job.autocast_dtype or torch.bfloat16,
                                enabled=job.autocast_dtype is not None):
                out = fast(x)
            labels = torch.zeros(out.shape[0], dtype=torch.long, device=out.device)
            F.cross_entropy(out, labels).backward()
    if job.device.startswith("cuda"):
        torch.cuda.synchronize(job.device)
    return time.perf_counter() - start


#: the prefix of a child's answer on its standard output (anything else there is the network's own printing)
ANSWER = "nasutil-compile-answer"


class _Child:
    """One compile process that lives as long as its warmer: it reads job files, one path a line, on its
    standard input and answers each with one line, so that starting Python and importing torch is paid
    once per child and not once per network."""

    def __init__(self, threads: int, log: Path) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        self.log = log
        with log.open("w") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "nasutil.colocate.compile_cache", "--serve", str(threads),
                                          str(log.parent), str(os.getpid())],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, env=env)

    def run(self, path: Path) -> float:
        self.proc.stdin.write(f"{path}\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith(ANSWER):
                verdict, _, rest = line[len(ANSWER):].strip().partition(" ")
                if verdict == "ok":
                    return float(rest)
                raise RuntimeError(rest)
        last = (self.log.read_text().strip().splitlines() or ["no message"])[-1]
        raise RuntimeError(f"compile child exited with {self.proc.wait()}: {last}")

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self, now: bool = False) -> None:
        """End the child: at once, or once it has finished the network under way (`CLOSE_WAIT_S` at most)."""
        if now:
            self.proc.kill()
        if self.proc.stdin and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()  # the end of its input: it exits
            except OSError:
                pass
        try:
            self.proc.wait(timeout=CLOSE_WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class CompileCacheWarmer:
    """Compile networks in up to `workers` child processes at once, so that Inductor's cache holds their
    code before this process compiles them. `submit` returns a future of the child's seconds (None where
    the network cannot be sent to a child); wait for it before compiling that network here.

    Each child is a fresh interpreter (`python -m nasutil.colocate.compile_cache --serve`), a main
    process like this one: a multiprocessing child computes other cache keys for the same graph, and its
    work would be lost. It imports the network's classes from this process's `sys.path`, and compiles one
    network after another until the warmer closes."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = max(1, default_workers() if workers is None else workers)
        self.threads = max(1, (os.cpu_count() or 1) // self.workers)
        self._pool = concurrent.futures.ThreadPoolExecutor(self.workers, thread_name_prefix="compile-child")
        self._folder = Path(tempfile.mkdtemp(prefix="nasutil-compile-"))
        self._submitted: dict[tuple, Future[float]] = {}
        self._lock = threading.Lock()
        self._children: list[_Child] = []
        self._mine = threading.local()  # each pool thread talks to its own child
        self._closing = False

    def submit(self, model: nn.Module, example: torch.Tensor, *, training: bool = False,
               autocast_dtype: torch.dtype | None = None,
               options: dict[str, object] | None = None) -> Future[float] | None:
        try:
            buffer = io.BytesIO()
            torch.save(model, buffer)
        except Exception as error:  # a network that does not serialise compiles here, uncached
            log.info("compiling without a warm cache: %s", error)
            return None
        job = CompileJob(buffer.getvalue(), str(example.device), tuple(example.shape), tuple(example.stride()),
                         example.dtype, training, autocast_dtype, tuple(sorted((options or {}).items())),
                         _settings())
        key = _signature(model, job)
        with self._lock:
            if self._closing:  # closed meanwhile (the process is ending): compile here, uncached
                return None
            if key not in self._submitted:
                path = self._folder / f"job{len(self._submitted)}.pt"
                try:
                    torch.save(asdict(job), path)
                except OSError as error:  # the jobs' folder is gone or full: compile here, uncached
                    log.info("compiling without a warm cache: %s", error)
                    return None
                self._submitted[key] = self._pool.submit(self._run_child, path)
            return self._submitted[key]

    def _run_child(self, path: Path) -> float:
        if self._closing:
            raise RuntimeError("the warmer closed before this network's turn")
        child = getattr(self._mine, "child", None)
        if child is None or not child.alive:  # the first job of this thread, or its child died
            with self._lock:
                if self._closing:  # no child is started that `close` would not see
                    raise RuntimeError("the warmer closed before this network's turn")
                child = _Child(self.threads, self._folder / f"child{len(self._children)}.log")
                self._children.append(child)
            self._mine.child = child
        return child.run(path)

    def close(self, now: bool = False) -> None:
        """Drop the networks not started and end the children: each once it has finished the network under
        way (`CLOSE_WAIT_S` at most: one this process stopped waiting for may hang), or with now=True at
        once (the process is exiting: nobody will use their work)."""
        with self._lock:
            self._closing = True
            children = list(self._children)
        self._pool.shutdown(wait=False, cancel_futures=True)
        for child in children:
            child.close(now)
        self._pool.shutdown(wait=True)  # each thread returns once its child has ended
        shutil.rmtree(self._folder, ignore_errors=True)

    def __enter__(self) -> CompileCacheWarmer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def wait_quietly(future: Future[float] | None) -> float | None:
    """The child's seconds, or None where it failed (the compilation here then does the work itself)."""
    if future is None:
        return None
    try:
        return future.result(timeout=WAIT_S)
    except concurrent.futures.TimeoutError:
        log.warning("a compile child gave no answer within %.0f s; compiling without its cache", WAIT_S)
        return None
    except Exception as error:
        log.warning("a compile child failed (%s); compiling without its cache", error)
        return None


_shared: CompileCacheWarmer | None = None
_shared_lock = threading.Lock()


def shared_warmer() -> CompileCacheWarmer | None:
    """One warmer for the process (a population's candidates arrive one by one, from many threads), or
    None where the host has too few cores for it to pay."""
    global _shared
    if default_workers() < MIN_WORKERS:
        return None
    with _shared_lock:
        if _shared is None:
            _shared = CompileCacheWarmer()
            _at_exit(lambda warmer=_shared: warmer.close(now=True))
        return _shared


def _at_exit(close: Callable[[], None]) -> None:
    """Run `close` as the interpreter ends, before it joins the pools' threads: those would first compile
    every network still queued, minutes of waiting for nothing."""
    register = getattr(threading, "_register_atexit", None)  # the hook concurrent.futures itself uses
    try:
        if register is None:
            raise RuntimeError
        register(close)  # these run last registered first, so before the pools' own hook
    except RuntimeError:  # no such hook, or the interpreter is already ending
        atexit.register(close)


def close_shared_warmer() -> None:
    """End the shared warmer's children now, once the networks they are compiling are done (at exit they
    are ended at once): each holds a CUDA context on the device it compiled for, which a caller measuring
    device memory, or done compiling, wants back."""
    global _shared
    with _shared_lock:
        warmer, _shared = _shared, None
    if warmer is not None:
        warmer.close()


def _watch_parent(folder: Path, parent: int) -> None:
    """End this child within a second of its parent's death (it may have died while this one started),
    removing the jobs' folder the parent can no longer remove: nobody will read what it compiles, and on
    a GPU it holds a CUDA context."""

    if sys.platform == "win32":  # no reparenting, and signal 0 means something else there
        return
    direct = os.getppid() == parent  # else a launcher stands between them, or the parent is gone already

    def alive() -> bool:
        if direct:
            return os.getppid() == parent
        try:
            os.kill(parent, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True

    def watch() -> None:
        while alive():
            time.sleep(1.0)
        shutil.rmtree(folder, ignore_errors=True)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def _serve(threads: int, folder: Path, parent: int) -> int:
    """A child: compile each job whose file (written by this module's parent, in its private folder) is
    named on a line of the standard input, answering each, until the input ends."""
    _watch_parent(folder, parent)
    for line in sys.stdin:
        try:
            seconds = compile_job(CompileJob(**torch.load(line.strip(), weights_only=False)), threads)
            answer = f"ok {seconds}"
        except Exception as error:
            answer = f"failed {type(error).__name__}: {error}".replace("\n", " ")
        torch._dynamo.reset()  # the next network starts from empty in-memory caches (the disk ones stay)
        gc.collect()
        if torch.cuda.is_initialized():
            torch.cuda.empty_cache()  # between jobs a child holds its CUDA context, not the last network's memory
        print(f"{ANSWER} {answer}", flush=True)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] != ["--serve"] or len(sys.argv) != 5:
        sys.exit("usage: python -m nasutil.colocate.compile_cache --serve THREADS FOLDER PARENT_PID")
    sys.exit(_serve(int(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])))
