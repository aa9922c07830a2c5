"""Measure a group in a fresh worker process with a time limit: an out-of-memory error, a crash or a hang
fails that group, never the caller."""

from __future__ import annotations

import multiprocessing as mp
import signal
import warnings

from nasutil.colocate.measure import GroupMeasurement, measure_group
from nasutil.errors import NasutilError
from nasutil.evaluator import Candidate, MeasureConfig


def _child(conn, candidates: list[dict], config: dict, strategy: str, fallback: bool,
           registrations: dict[str, str], cache_location: str | None = None, remeasure: bool = False,
           freezing: bool = False, strategies: dict[str, str] | None = None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    warnings.simplefilter("ignore")
    import torch

    from nasutil.colocate.strategies import register_path as register_strategy_path
    from nasutil.registry import register_path

    cands, cfg = [Candidate(**c) for c in candidates], MeasureConfig(**config)
    cache = None
    try:
        for name, path in registrations.items():
            register_path(name, path)
        for name, path in (strategies or {}).items():
            try:
                register_strategy_path(name, path)
            except Exception as error:
                raise NasutilError(f"strategy {name!r} could not be rebuilt in the worker from {path} "
                                   f"(its class must be importable and take no arguments): {error}") from None
        if cache_location is not None:
            from nasutil.evaluator.cache import MeasurementCache

            cache = MeasurementCache(cache_location)
        result = measure_group(cands, cfg, strategy, fallback=fallback, cache=cache, remeasure=remeasure,
                               freezing=freezing)
        conn.send(("ok", result.to_dict()))
    except NasutilError as exc:
        conn.send(("user", str(exc)))
    except torch.cuda.OutOfMemoryError as exc:
        conn.send(("failed", f"out of memory: {str(exc).splitlines()[0]}"))
    except Exception as exc:  # a broken group must not take the caller down
        conn.send(("failed", f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"))
    finally:
        if cache is not None:
            cache.close()


def measure_group_isolated(candidates: list[Candidate], config: MeasureConfig, strategy: str = "streams", *,
                           fallback: bool = True, timeout_s: float = 600.0, cache_location: str | None = None,
                           remeasure: bool = False, freezing: bool = False) -> GroupMeasurement:
    """`measure_group` in a spawned process. A user error (unknown arch, a strategy that does not apply
    with fallback=False) is raised here as NasutilError; anything else comes back as a failed result."""
    from dataclasses import asdict

    from nasutil.colocate.strategies import registered_paths
    from nasutil.registry import runtime_registrations

    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_child, daemon=True, args=(child, [asdict(c) for c in candidates], config.to_dict(),
                                                         strategy, fallback, runtime_registrations(), cache_location,
                                                         remeasure, freezing, registered_paths([strategy])))
    proc.start()
    child.close()
    try:
        if not parent.poll(timeout_s):
            return GroupMeasurement.failed(candidates, config, strategy, f"timed out after {timeout_s:.0f} s")
        kind, payload = parent.recv()
    except (EOFError, ConnectionResetError):
        proc.join(5)
        return GroupMeasurement.failed(candidates, config, strategy, f"worker process died (exit code {proc.exitcode})")
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        parent.close()
    if kind == "user":
        raise NasutilError(payload)
    if kind == "failed":
        return GroupMeasurement.failed(candidates, config, strategy, payload)
    return GroupMeasurement.from_dict(payload)
