"""Time a population search spends inside its study storage: SQLite against Optuna's journal file.

    python benchmarks/storage_time.py --repeats 3 --out benchmarks/results/cpu/storage_time

A population's members are prepared and validated in threads that share one interpreter, and every trial
also reads and writes the study (asked, its parameters, its rung values and attributes, heartbeats, its end).
Each run here is one real `nasutil-search trainer=torch` on the CPU (digits, 8 candidates at once,
`halving=pareto`, `prune=dominated_throughput`, `anchors=4`), with every public method of the study's storage
timed from its call to its return (Optuna's cached wrapper of the RDB storage for SQLite, `JournalStorage`
for the journal; a call made inside another timed call counts once, in the outer one). The storages take
turns, the order alternated from repeat to repeat. A call's time includes any wait for the interpreter while
other threads train, so it is what the storage costs the search's threads, not the database's own time; the
search's wall time is the second clock. Writes storage_time.json (every run, each method's calls and
seconds) and storage_time.csv (a row per run).
"""

from __future__ import annotations

import argparse
import collections
import csv
import functools
import json
import tempfile
import threading
import time
from pathlib import Path

STORAGES = ("sqlite", "journal")


class StorageClock:
    """Seconds and calls of every public method of the storage classes it wraps, across threads."""

    def __init__(self) -> None:
        self.by_method: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
        self._lock = threading.Lock()
        self._inside = threading.local()
        self._undo: list[tuple[type, str, object]] = []

    def wrap(self, cls: type) -> None:
        for name in dir(cls):
            fn = getattr(cls, name)
            if name.startswith("_") or not callable(fn):
                continue
            self._undo.append((cls, name, cls.__dict__.get(name)))
            setattr(cls, name, self._timed(fn, name))

    def _timed(self, fn, name: str):
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            if getattr(self._inside, "depth", 0):  # a call inside a timed call: counted in the outer one
                return fn(*args, **kwargs)
            self._inside.depth = 1
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self._inside.depth = 0
                with self._lock:
                    entry = self.by_method[name]
                    entry[0] += 1
                    entry[1] += time.perf_counter() - started
        return timed

    def restore(self) -> None:
        for cls, name, original in reversed(self._undo):
            if original is None:
                delattr(cls, name)
            else:
                setattr(cls, name, original)
        self._undo.clear()

    @property
    def seconds(self) -> float:
        return sum(s for _, s in self.by_method.values())

    @property
    def calls(self) -> int:
        return int(sum(c for c, _ in self.by_method.values()))


def one_search(storage: str, trials: int, seed: int, folder: Path) -> dict:
    """One search with its storage's methods timed."""
    from optuna.storages import JournalStorage
    from optuna.storages._cached_storage import _CachedStorage

    from nasutil.cli.search_command import main as search_main

    clock = StorageClock()
    clock.wrap(_CachedStorage)
    clock.wrap(JournalStorage)
    started = time.perf_counter()
    try:
        code = search_main([f"storage={storage}", f"hydra.run.dir={folder}", f"n_trials={trials}", f"seed={seed}",
                            "trainer=torch", "trainer.dataset=digits", "trainer.epochs=2", "trainer.population=8",
                            "halving=pareto", "anchors=4", "prune=dominated_throughput", "evaluator=none",
                            "plots=false", "progress=false"])
    finally:
        wall = time.perf_counter() - started
        clock.restore()
    return {"storage": storage, "exit_code": code, "trials": trials, "wall_s": wall, "storage_s": clock.seconds,
            "calls": clock.calls, "storage_ms_per_trial": 1e3 * clock.seconds / trials,
            "calls_per_trial": clock.calls / trials,
            "by_method": {name: {"calls": int(c), "seconds": s} for name, (c, s) in
                          sorted(clock.by_method.items(), key=lambda kv: -kv[1][1])}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--trials", type=int, default=48)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.repeats < 1 or args.trials < 1:
        parser.exit(2, "storage_time.py: error: --repeats and --trials must be at least 1\n")
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="storage-time-"))
    runs = []
    for repeat in range(args.repeats):
        for storage in (STORAGES if repeat % 2 == 0 else tuple(reversed(STORAGES))):
            run = one_search(storage, args.trials, args.seed, work / f"{storage}-{repeat}")
            runs.append({"repeat": repeat, **run})
            print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in runs[-1].items()
                              if k != "by_method"}), flush=True)
    (args.out / "storage_time.json").write_text(json.dumps({"settings": {**vars(args), "out": str(args.out)},
                                                             "runs": runs}, indent=1))
    with (args.out / "storage_time.csv").open("w", newline="") as fh:
        writer = csv.writer(fh)
        columns = ["repeat", "storage", "exit_code", "trials", "wall_s", "storage_s", "calls",
                   "storage_ms_per_trial", "calls_per_trial"]
        writer.writerow(columns)
        for run in runs:
            writer.writerow([round(run[c], 4) if isinstance(run[c], float) else run[c] for c in columns])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
