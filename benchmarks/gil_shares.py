"""Who holds the interpreter in a search: py-spy's samples of the thread holding the GIL, by what it was doing.

    py-spy record --gil --nonblocking -r 200 -f raw -o spy_gil.txt -- \
        python benchmarks/population_search.py --batch-size 64 --trials 64 --seeds 70 --baseline p16-pareto \
        --runs p16-pareto --settings anchors=4 --name spy_gil --out OUT/spy_gil
    python benchmarks/gil_shares.py spy_gil.txt --out OUT/gil_shares.csv      # or the file gzipped (.gz)

A population's host work runs in threads of one process, so every candidate's build, copy, warm-up,
capture and validation, the sampler's asks and the storage's writes take turns at one interpreter with
the driver that launches the steps. py-spy's `--gil` samples only the thread that holds it; this script
sorts those samples (its raw, collapsed-stack output: one stack and a count a line) into the kinds of
work below, each stack counted under the first kind whose frame it holds, and writes each kind's samples
and share. The whole process is in the file: the unrecorded warm-up search and its imports included.
"""

from __future__ import annotations

import argparse
import csv
import gzip
from collections import Counter
from pathlib import Path

#: (kind, frames that mark it): a stack is counted under the first kind one of whose frames it holds
KINDS = (
    ("imports", ("_find_and_load",)),
    ("driver (launching steps)", ("Population._drive",)),
    ("warm-up and capture", ("TrainingStep._capture",)),
    ("validation", ("_Run.checkpoint",)),
    ("to the device", ("_Run.__init__",)),
    ("a profile spelled out (repr)", ("dataclasses.py:262", "dataclasses.py:265")),
    ("building a candidate, other trainer work", ("TorchTrainer.train (nasutil/search/trainers/torch_trainer.py",)),
    ("sampler", ("sample_relative", "sample_independent")),
    ("asking for a trial", ("Study.ask", "TrialRunner._ask")),
    ("storage (reads and writes)", ("Study.tell", "_tell", "set_trial", "RDBStorage", "_CachedStorage",
                                    "sqlalchemy")),
    ("Hydra", ("hydra/",)),
)


def shares(lines: list[str]) -> list[dict]:
    """Samples and share of each kind (and `other`) in py-spy's raw output."""
    counts: Counter[str] = Counter()
    for line in lines:
        if not line.strip():
            continue
        stack, _, count = line.rstrip("\n").rpartition(" ")
        kind = next((name for name, marks in KINDS if any(mark in stack for mark in marks)), "other")
        counts[kind] += int(count)
    total = sum(counts.values())
    order = [name for name, _ in KINDS] + ["other"]
    return [{"kind": name, "samples": counts[name], "share": round(counts[name] / total, 4) if total else 0.0}
            for name in order]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("raw", type=Path, help="py-spy record -f raw output")
    parser.add_argument("--out", type=Path, required=True, help="CSV to write")
    args = parser.parse_args()
    if not args.raw.is_file():
        parser.exit(2, f"gil_shares.py: error: no file {args.raw}\n")
    try:
        text = gzip.decompress(args.raw.read_bytes()).decode() if args.raw.suffix == ".gz" else args.raw.read_text()
        rows = shares(text.splitlines())
    except (ValueError, OSError, UnicodeDecodeError):
        parser.exit(2, f"gil_shares.py: error: {args.raw} is not py-spy's raw output (a stack and a count a line)\n")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["kind", "samples", "share"])
        writer.writeheader()
        writer.writerows(rows)
    for row in rows:
        print(f"{row['kind']:30s} {row['samples']:7d} {100 * row['share']:5.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
