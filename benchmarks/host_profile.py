"""Where a search's host time goes: every thread's stack sampled while one `nasutil-search` runs in-process.

A population search is paced by its host work (asking, building, capturing, validating, storing) as much
as by the device; a profiler that follows one thread (cProfile) sees the main thread only. This one reads
`sys._current_frames()` every `--interval-ms` and counts, per thread role (the population's driver, the
trial threads, the main thread), the innermost frame of the project's code and the innermost frame
overall. A sample is taken only when the sampler gets the interpreter, so a thread that holds it for long
stretches is under-counted: read the shares as where threads stand, not exact CPU time.

    python benchmarks/host_profile.py --out OUT -- trainer=torch trainer.population=16 halving=pareto n_trials=64
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import threading
import time
from pathlib import Path


def role(thread: threading.Thread | None) -> str:
    name = thread.name if thread is not None else "?"
    if name == "population-driver":
        return "driver"
    if name == "MainThread":
        return "main"
    return "trial" if "ThreadPoolExecutor" in name or name.startswith("Thread") else name.split("-")[0]


def frame_name(frame) -> str:
    code = frame.f_code
    return f"{Path(code.co_filename).name}:{code.co_name}"


def ours(frame) -> str:
    """The innermost frame in the project's code (or the outermost frame where none is)."""
    last = frame
    while frame is not None:
        if "/nasutil/" in frame.f_code.co_filename:
            return frame_name(frame)
        last, frame = frame, frame.f_back
    return frame_name(last)


def sample(stop: threading.Event, interval_s: float, counts: dict) -> None:
    me = threading.get_ident()
    while not stop.is_set():
        threads = {t.ident: t for t in threading.enumerate()}
        for ident, frame in sys._current_frames().items():
            if ident == me:
                continue
            kind = role(threads.get(ident))
            counts[kind]["samples"] += 1
            counts[kind]["ours:" + ours(frame)] += 1
            counts[kind]["leaf:" + frame_name(frame)] += 1
        time.sleep(interval_s)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--name", default="host_profile")
    parser.add_argument("--interval-ms", type=float, default=5.0)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("overrides", nargs="*", help="the search's settings, after --")
    args = parser.parse_args()
    from nasutil.cli.search_command import main as search_main

    counts: dict = collections.defaultdict(collections.Counter)
    stop = threading.Event()
    sampler = threading.Thread(target=sample, args=(stop, args.interval_ms / 1e3, counts), daemon=True)
    started = time.perf_counter()
    sampler.start()
    try:
        code = search_main(args.overrides)
    finally:
        stop.set()
        sampler.join()
    wall = time.perf_counter() - started
    if code:  # the search said why on stderr; a profile of it would profile nothing
        return code
    report = {"overrides": args.overrides, "exit_code": code, "wall_s": round(wall, 2), "roles": {}}
    for kind, counter in counts.items():
        total = counter.pop("samples")
        report["roles"][kind] = {
            "samples": total,
            **{part: dict([(k[5:], round(v / total, 4)) for k, v in counter.most_common()
                           if k.startswith(part + ":")][:args.top]) for part in ("ours", "leaf")}}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
