"""What README's search commands cost on the machine at hand: each run as a new user runs it (a fresh
folder, the default settings), timed by the wall clock from start to exit.

    python benchmarks/command_cost.py --out benchmarks/results/cpu/command_cost

Writes command_cost.csv: the command, its exit code, wall time, the trials its studies finished
(summary.json of each run or sweep job) and seconds per finished trial, with the machine's processor
count, GPU (or none) and the date. README's "what the commands cost" table is checked against it.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS = [
    "nasutil-search",
    "nasutil-search sampler=nsga2 prune=utilization_quantile n_trials=200",
    "nasutil-search trainer=torch n_trials=20",
    "nasutil-search trainer=torch trainer.population=8 halving=pareto n_trials=40",
    "nasutil-search -m seed=0,1,2 prune=none,dominated_throughput",
]


def run(command: str, folder: Path) -> dict:
    args = shlex.split(command)
    sweep = "-m" in args
    place = f"hydra.sweep.dir={folder}" if sweep else f"hydra.run.dir={folder}"
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "nasutil.search", *args[1:], place, "progress=false"],
                          capture_output=True, text=True, env={**os.environ, "NASUTIL_CACHE_DIR": str(folder / "cache")})
    wall = time.perf_counter() - started
    finished = sum(json.loads(p.read_text())["counts"]["finished"] for p in folder.rglob("summary.json"))
    return {"command": command, "exit_code": proc.returncode, "wall_s": round(wall, 1), "trials": finished,
            "s_per_trial": round(wall / finished, 2) if finished else None,
            "error": proc.stderr.strip().splitlines()[-1] if proc.returncode else ""}


def machine() -> dict:
    import torch

    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "none"
    return {"cpus": os.cpu_count(), "gpu": gpu, "torch": torch.__version__, "date": dt.date.today().isoformat()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", type=int, help="indices into the command list (default: all)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    about = machine()
    rows = []
    for index, command in enumerate(COMMANDS):
        if args.only and index not in args.only:
            continue
        with tempfile.TemporaryDirectory(prefix="command-cost-") as folder:
            rows.append({**run(command, Path(folder) / "run"), **about})
        print(json.dumps(rows[-1]), flush=True)
    with (args.out / "command_cost.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
