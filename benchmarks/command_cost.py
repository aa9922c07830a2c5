"""What the documented commands cost on the machine at hand: each run as a new user runs it (a fresh
folder, the default settings), timed by the wall clock from start to exit.

    python benchmarks/command_cost.py --out benchmarks/results/cpu/command_cost
    python benchmarks/command_cost.py --list                         # the commands, by index
    python benchmarks/command_cost.py --only 5 6 --timeout 1800 --out benchmarks/results/cpu/command_cost
    python benchmarks/command_cost.py --only 0 1 2 3 4 --repeats 3 --out benchmarks/results/cpu/command_cost

COMMANDS holds every command of README.md's and docs/search.md's ```bash blocks that costs too much to
run in the test suite on a CPU (tests/test_documented_commands.py classifies each documented command
and checks that each costly one is here, with a row of exit code 0). The first five are README's
"what these cost" table: their rows go to command_cost.csv, which tests/test_readme_figures.py checks
that table against; the rows of the others go to command_cost_docs.csv. Both files are merged by
command: a run with `--only` replaces the rows of the commands it ran and keeps every other row.

`--repeats N` runs every chosen command N times, a row each (`run` 1..N), in rounds whose order
alternates (forwards, then backwards), so that no command always runs first on a machine that has just
been idle. A population search's cost varies from run to run even from one seed (which candidates its
rungs cut depends on which finished first), so its figure is a median and a range, not one run.

Each command runs in a fresh temporary folder (its working directory, with NASUTIL_CACHE_DIR inside
it), through `python -m nasutil` / `-m nasutil.search` / `-m nasutil.cli.codes_app` (what the
`nasutil`, `nasutil-search` and `nasutil-codes` console scripts run). A `nasutil-search` command gets
`hydra.run.dir` (or `hydra.sweep.dir`) in that folder and `progress=false` added; every other command
runs exactly as written. A command still running after `--timeout` seconds is sent SIGINT (a search
then writes its outputs and exits 130), and SIGKILL a minute later; its row says so in `error`.

The rows: the command, its exit code, wall time, the trials its studies finished (summary.json of each
run or sweep job, else the study.db of a search that was stopped) and seconds per finished trial, the
last line of stderr where it failed, the machine's processor count, GPU (or none), torch version, the
date and the 1-minute load average when the command started (other work on the machine slows it).
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
import re
import shlex
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS = [
    # README's cost table (command_cost.csv)
    "nasutil-search",
    "nasutil-search sampler=nsga2 prune=utilization_quantile n_trials=200",
    "nasutil-search trainer=torch n_trials=20",
    "nasutil-search trainer=torch trainer.population=8 halving=pareto n_trials=40",
    "nasutil-search -m seed=0,1,2 prune=none,dominated_throughput",
    # the other costly commands of README.md and docs/search.md (command_cost_docs.csv)
    "nasutil-search n_trials=200 sampler=tpe prune=utilization_quantile prune.quantile=0.3",
    "nasutil-search trainer.dataset=imagenet16_120 early_stopping=hyperband",
    "nasutil-search trainer=torch search_space=nb201 n_trials=20 trainer.epochs=5",
    "nasutil-search search_space=cell search_space.settings.nodes=4 trainer=torch",
    "nasutil-search trainer=torch trainer.dataset=fashion_mnist trainer.population=8",
    "nasutil-search trainer=torch trainer.dataset=fashion_mnist trainer.population=16 halving=pareto",
    "nasutil-search trainer=torch trainer.dataset=fashion_mnist trainer.population=16 halving=pareto n_trials=128",
    "nasutil measure --model timm:efficientnet_b0 --sweep --slo-ms 5",
    "nasutil measure --model torchvision:resnet50 --batch-size 128 --mode compile --per-layer",
    "nasutil measure nb201 --sample 1000 --workers 8 --fast --json --out cells.jsonl",
    "nasutil colocate nb201 --sample 16 --batch-size 32 --strategy streams",
    "nasutil colocate nb201 --sample 16 --strategy streams --slo-ms 2 --json",
    "nasutil colocate nb201 --sample 64 --pack 8 --batch-size 1",
    "nasutil colocate nb201 --sample 16 --batch-size 32 --compile",
    "nasutil codes train --out runs/fmnist-k2 --dataset fashion_mnist --base mlp --k 2",
    "nasutil codes train --out runs/fmnist-pm --dataset fashion_mnist --k 2 --encoder sum --decoder subtract --parity copy",
    "nasutil-codes k=4 encoder=sum decoder=subtract parity=copy epochs=50",
    "nasutil-codes -m k=2,4 encoder=mlp,sum dataset=fashion_mnist",
    "nasutil-search trainer=codes trainer.dataset=digits n_trials=4",
]
README_TABLE = COMMANDS[:5]  # README's "what these cost" table
FILES = {True: "command_cost.csv", False: "command_cost_docs.csv"}  # by: is the command in README_TABLE
FIELDS = ["command", "run", "exit_code", "wall_s", "trials", "s_per_trial", "error", "cpus", "gpu", "torch", "date",
          "load_avg"]
MODULES = {"nasutil": "nasutil", "nasutil-search": "nasutil.search", "nasutil-codes": "nasutil.cli.codes_app"}


def result_file(command: str) -> str:
    return FILES[command in README_TABLE]


def argv(command: str, folder: Path) -> list[str]:
    args = shlex.split(command)
    if args[0] not in MODULES:
        raise ValueError(f"not a nasutil command: {command}")
    extra = []
    if args[0] == "nasutil-search":
        extra = [f"hydra.sweep.dir={folder}" if "-m" in args else f"hydra.run.dir={folder}", "progress=false"]
    return [sys.executable, "-m", MODULES[args[0]], *args[1:], *extra]


def finished_trials(folder: Path) -> int | None:
    """Trials finished by the studies under `folder`: summary.json of each run, else (a search stopped
    before it wrote one) the COMPLETE and PRUNED trials of its study.db; None where it made no study."""
    if not any(folder.rglob("summary.json")) and not any(folder.rglob("study.db")):
        return None
    total = sum(json.loads(p.read_text())["counts"]["finished"] for p in folder.rglob("summary.json"))
    for db in folder.rglob("study.db"):
        if (db.parent / "summary.json").is_file():
            continue
        try:
            with sqlite3.connect(db, timeout=5) as con:
                total += con.execute("SELECT count(*) FROM trials WHERE state IN ('COMPLETE', 'PRUNED')").fetchone()[0]
        except sqlite3.Error:
            pass
    return total


def run(command: str, workdir: Path, timeout: float) -> dict:
    folder = workdir / "run"
    load = round(os.getloadavg()[0], 2)
    started = time.perf_counter()
    proc = subprocess.Popen(argv(command, folder), cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True,
                            env={**os.environ, "NASUTIL_CACHE_DIR": str(workdir / "cache")})
    stopped = False
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stopped = True
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: a search writes what it finished
        try:
            stdout, stderr = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
    wall = time.perf_counter() - started
    finished = finished_trials(workdir)
    if stopped:
        done = "" if finished is None else f"; {finished} trials finished by then"
        error = f"stopped after {timeout:.0f} s on this machine (not finished{done})"
    else:
        error = failure(stdout, stderr) if proc.returncode else ""
    return {"command": command, "exit_code": proc.returncode, "wall_s": round(wall, 1), "trials": finished,
            "s_per_trial": round(wall / finished, 2) if finished else None, "error": error, "load_avg": load}


def failure(stdout: str, stderr: str) -> str:
    """The line that says why a command failed: the CLI's one-line error, else a failed result it printed
    (`nasutil measure` exits 1 when every candidate failed), else the last line of stderr."""
    errors = [line.strip() for line in stderr.splitlines() if re.match(r"^nasutil(-search|-codes)?: ", line)]
    failed = [line.strip() for line in stdout.splitlines() if re.search(r"\bfailed\b|timed out|error", line)]
    rest = [line.strip() for line in stderr.splitlines() if line.strip()]
    return " ".join((errors or failed or rest or ["(nothing on stderr)"])[-1].replace("│", " ").split())[:500]


def machine() -> dict:
    import torch

    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "none"
    return {"cpus": os.cpu_count(), "gpu": gpu, "torch": torch.__version__, "date": dt.date.today().isoformat()}


def read_rows(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def merge(path: Path, new: list[dict]) -> None:
    """Write `new` into the CSV at `path`, replacing every row of the commands it holds and keeping the
    others, in COMMANDS order (a command's runs in their order); rows of commands no longer in COMMANDS
    are dropped (and said so)."""
    rows: dict[str, list[dict]] = {}
    for row in read_rows(path):
        rows.setdefault(row["command"], []).append(row)
    for command in {r["command"] for r in new}:
        rows[command] = sorted((r for r in new if r["command"] == command), key=lambda r: int(r.get("run") or 1))
    for command in [c for c in rows if c not in COMMANDS]:
        print(f"dropping the rows of {command!r} from {path}: no longer in COMMANDS", file=sys.stderr)
        del rows[command]
    present = [row for c in COMMANDS for row in rows.get(c, [])]
    fields = [f for f in FIELDS if any(f in row for row in present)]  # a file without load_avg keeps its header
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(present)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", type=int, help="indices into the command list (default: all)")
    parser.add_argument("--out", type=Path, help="folder of command_cost.csv and command_cost_docs.csv")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds a command may run (default 3600)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="runs of each command, in rounds of alternating order (default 1)")
    parser.add_argument("--list", action="store_true", help="print the commands with their indices and stop")
    args = parser.parse_args()
    if args.list:
        for index, command in enumerate(COMMANDS):
            print(f"{index:3d}  {result_file(command):22s} {command}")
        return 0
    if args.out is None:
        parser.error("--out is required")
    bad = [i for i in args.only or [] if not 0 <= i < len(COMMANDS)]
    if bad:
        parser.error(f"--only: no command {bad} (0..{len(COMMANDS) - 1})")
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    args.out.mkdir(parents=True, exist_ok=True)
    about = machine()
    chosen = [c for i, c in enumerate(COMMANDS) if not args.only or i in args.only]
    rows: list[dict] = []
    for round_ in range(1, args.repeats + 1):
        for command in chosen if round_ % 2 else chosen[::-1]:
            with tempfile.TemporaryDirectory(prefix="command-cost-") as folder:
                row = {**run(command, Path(folder), args.timeout), **about, "run": round_}
            print(json.dumps(row), flush=True)
            rows.append(row)
            # after each command: a long run keeps what it measured
            merge(args.out / result_file(command), [r for r in rows if r["command"] == command])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
