"""Where in its measurement a survivor's reading was taken, against one at a time's reading of the same cell.

    python benchmarks/survivor_positions.py --out benchmarks/results/h100/population/survivor_positions.json

Survivors measured beside a population read 0.89-1.14x one at a time's readings of the same cells
(`population_search.py`'s `survivor_ratio_*` columns). This reads every committed `population_search.py` run
file that records each survivor's measurement batch and place in it (`measurements[].in_batch`) and puts each
population reading against the same seed's one-at-a-time (`p1`) reading of the same cell, in four groups:

- the population's reading first in its batch, or after another cell in the same batch;
- one at a time's reading its search's first measurement, or a later one.

One at a time measures each survivor right after its training; a population measures a batch of survivors
back to back in one quiet hold. If the readings part by those positions rather than at random, what sets a
reading is what ran on the device just before it, not the cell or the population. No device is used: the
figures are the committed files'. Runs whose measurements were settled by an unkept reading first are left out
(BENCHMARKS.md, "Settled readings", reads those).
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def readings(run_files: list[Path]) -> list[dict]:
    """Each population survivor reading with one at a time's reading of its cell in the same seed and file:
    the device, file, seed, run, its batch and place, and one at a time's place in its own measurements."""
    out = []
    for path in run_files:
        runs = [json.loads(line) for line in path.open()]
        for seed in sorted({r["seed"] for r in runs}):
            group = [r for r in runs if r["seed"] == seed]
            base = next((r for r in group if r["run"] == "p1"), None)
            if base is None:
                continue
            alone: dict[str, tuple[int, float]] = {}
            for place, m in enumerate(base.get("measurements") or []):
                if m.get("throughput_per_s"):
                    alone.setdefault(m["arch"], (place, m["throughput_per_s"]))
            for r in group:
                if r["run"] == "p1":
                    continue
                for m in r.get("measurements") or []:
                    if m.get("in_batch") is None or m["arch"] not in alone or not m.get("throughput_per_s"):
                        continue
                    place, reading = alone[m["arch"]]
                    out.append({"device": path.relative_to(RESULTS).parts[0], "file": str(path.relative_to(RESULTS)),
                                "seed": seed, "run": r["run"], "batch": m["batch"], "in_batch": m["in_batch"],
                                "alone_place": place, "ratio": m["throughput_per_s"] / reading})
    return out


def settled(run_file: Path) -> bool:
    """Whether the run file's searches settled each measurement with an unkept reading first (`Measurer.settle`,
    which the runs' `hardware` description names, or for files written before it was recorded, their log's):
    those readings are not the positions studied here."""
    described = [json.loads(line).get("hardware") for line in run_file.open()]
    if any(described):
        return any("settled by an unkept reading" in (d or "") for d in described)
    log = run_file.with_name(run_file.name.replace("_runs.jsonl", ".log"))
    return log.exists() and "settled by an unkept reading" in " ".join(log.read_text(errors="replace").split())


def grouped(rows: list[dict]) -> list[dict]:
    """The readings by device and the two positions: how many, the median ratio and its range, and how many
    lie within 1% of one at a time's reading."""
    groups: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for r in rows:
        groups[(r["device"], "first" if r["alone_place"] == 0 else "later",
                "first" if r["in_batch"] == 0 else "later")].append(r["ratio"])
    return [{"device": device, "alone": alone, "in_batch": in_batch, "readings": len(v),
             "median_ratio": statistics.median(v), "min_ratio": min(v), "max_ratio": max(v),
             "within_1pct": sum(abs(x - 1) <= 0.01 for x in v)}
            for (device, alone, in_batch), v in sorted(groups.items())]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    args = parser.parse_args(argv)
    files = [f for f in sorted(RESULTS.glob("*/population/**/*_runs.jsonl")) if not settled(f)]
    rows = readings(files)
    summary = {"files": sorted({r["file"] for r in rows}), "groups": grouped(rows), "readings": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=1) + "\n")
    for g in summary["groups"]:
        print(f"{g['device']}: one at a time's {g['alone']:5s} reading, the population's {g['in_batch']:5s} in its "
              f"batch: {g['readings']:3d} readings, median {g['median_ratio']:.3f} ({g['min_ratio']:.3f}-"
              f"{g['max_ratio']:.3f}), {g['within_1pct']} within 1%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
