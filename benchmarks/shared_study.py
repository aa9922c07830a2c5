"""Workers sharing one study: trials per second on PostgreSQL, SQLite and Optuna's journal file.

    python benchmarks/shared_study.py --workers 1,4 --trials 200 --out benchmarks/results/cpu
    python benchmarks/shared_study.py --workers 16 --trials 500 --storages postgresql --tag _16 --out benchmarks/results/cpu
    python benchmarks/shared_study.py --workers 1,2 --trials 64 --storages journal --devices cuda:0,cuda:1 \
        --settings trainer=torch trainer.dataset=fashion_mnist trainer.population=16 trainer.epochs=1 \
        trainer.batch_size=64 evaluator=none prune=none plots=false progress=false --tag _two_gpus --out DIR

Each run starts N `nasutil-search` processes (by default: tabular trainer, analytical predictor, no
pruning; `--settings` replaces those overrides) as workers 0..N-1 of one new study, with `--devices`
handed to each (worker N trains on devices[N % len]), and reports the wall time from the first start to
the last exit, the trials finished and per hour, the trials recorded as surplus (asked for after the
budget was taken), failures, trials left neither finished nor failed (lost), duplicated trial numbers,
architectures finished more than once (a sampler may propose one twice), and the finished trials per
device. PostgreSQL is a throwaway
server on 127.0.0.1 (tests/postgres_server.py), started only when asked for.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import csv
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import optuna

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from postgres_server import postgres_server  # noqa: E402

SETTINGS = ["predictor=analytical", "prune=none", "plots=false", "progress=false", "trainer.fidelities=[200]"]


def run(storage_args: list[str], storage, workers: int, trials: int, folder: Path, name: str,
        settings: list[str], devices: str | None = None) -> dict:
    placed = [f"devices=[{devices}]"] if devices else []
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-m", "nasutil.search", *settings, *storage_args, *placed, f"worker={i}",
                               f"study_name={name}", f"n_trials={trials}", f"hydra.run.dir={folder / name / f'w{i}'}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for i in range(workers)]
    errors = [p.communicate()[1] for p in procs]
    wall = time.perf_counter() - start
    study = optuna.load_study(study_name=name, storage=storage)
    states = collections.Counter(t.state.name for t in study.trials)
    surplus = sum(bool(t.user_attrs.get("surplus")) for t in study.trials)
    done = [t for t in study.trials if t.state.name == "COMPLETE"]
    archs = [t.user_attrs.get("arch") for t in done if t.user_attrs.get("arch") is not None]
    per_device = collections.Counter(str(t.user_attrs.get("device")) for t in done)
    return {"workers": workers, "trials": trials, "wall_s": round(wall, 2),
            "trials_per_s": round(states["COMPLETE"] / wall, 2),
            "trials_per_hour": round(states["COMPLETE"] / wall * 3600, 1), "complete": states["COMPLETE"],
            "surplus": surplus, "failed": states["FAIL"] - surplus, "lost": states["RUNNING"] + states["WAITING"],
            "duplicate_numbers": len(study.trials) - len({t.number for t in study.trials}),
            "duplicate_archs": len(archs) - len(set(archs)),
            "per_device": ";".join(f"{d}:{n}" for d, n in sorted(per_device.items())),
            "exit_codes": ",".join(str(p.returncode) for p in procs),
            "lock_errors": sum(e.count("database is locked") for e in errors),
            "first_error": next((e.strip().splitlines()[-1] for e, p in zip(errors, procs)
                                 if p.returncode and e.strip()), "")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,4")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--storages", default="postgresql,sqlite,journal")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/cpu"))
    parser.add_argument("--tag", default="", help="suffix of the CSV's name")
    parser.add_argument("--settings", nargs="+", default=SETTINGS, metavar="OVERRIDE",
                        help=f"every worker's search overrides (default: {' '.join(SETTINGS)})")
    parser.add_argument("--devices", default=None, metavar="DEV,DEV,...",
                        help="the devices the workers share (worker N trains on devices[N %% len])")
    args = parser.parse_args()
    chosen = args.storages.split(",")
    counts = [int(w) for w in args.workers.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp, \
            (postgres_server() if "postgresql" in chosen else contextlib.nullcontext()) as url:
        folder = Path(tmp)
        from optuna.storages.journal import JournalFileBackend

        for workers in counts:
            journal = folder / f"journal-{workers}.log"
            sqlite = folder / f"sqlite-{workers}.db"
            plans = [("postgresql", ["storage=postgresql", f"storage.url={url}"], url),
                     ("sqlite", ["storage=url", f"storage.url=sqlite:///{sqlite}"], f"sqlite:///{sqlite}"),
                     ("journal", ["storage=journal", f"storage.path={journal}"], None)]
            for label, storage_args, storage in plans:
                if label not in chosen:
                    continue
                if storage is None:
                    storage = optuna.storages.JournalStorage(JournalFileBackend(str(journal)))
                row = {"storage": label, **run(storage_args, storage, workers, args.trials, folder,
                                                f"{label}-{workers}", args.settings, args.devices)}
                rows.append(row)
                print(row, flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / f"shared_study{args.tag}.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
