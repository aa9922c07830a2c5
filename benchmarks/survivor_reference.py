"""Survivor readings of a search against an independent clock: each cell a search measured, timed again by the
plain loop of `nasutil.evaluator.reference` in a fresh process right after the search.

    python benchmarks/survivor_reference.py OUT/population_search_b64_s134_runs.jsonl --out OUT/survivor_reference

A search with `evaluator=auto` measures each trained survivor through the evaluator (its worker process, its
turns, settling, windows and clock checks). The quiet readings of `tests/test_population_gpu.py` and one at a
time's readings go through that same evaluator, so their agreement says nothing about the evaluator itself.
Here every cell of `population_search.py`'s run file (`measurements`) is built by the search space, cast to the
target's settings (fp16, batch 256, channels_last, random input, as the evaluator's defaults) and captured in a
CUDA graph by this process, then replayed back to back and timed with CUDA events (7 windows of 20 replays,
the median): nothing of the evaluator's procedure is shared but the network builder. Each reading's ratio is
the evaluator's throughput over the plain loop's; the rows say where the reading sat (its run, its measurement
batch and place in it) and the SM clock of both. Writes survivor_reference.csv and survivor_reference.json (per
run and over all: the median ratio, how many lie within 1% and 3%, the worst).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from pathlib import Path

BATCH = 256


def distinct(rows: list[dict]) -> list[dict]:
    """The readings once each: a trial that repeats an arch trained before carries its reading over, and would
    count it twice."""
    seen, out = set(), []
    for row in rows:
        key = (row["file"], str(row["seed"]), row["run"], row["arch"], str(row["batch"]), str(row["in_batch"]),
               float(row["throughput_per_s"]))
        if key not in seen:
            seen.add(key)
            out.append(row)
    return out


def survivor_readings(run_files: list[Path]) -> list[dict]:
    """Every survivor reading of every run in the files, once: file, seed, run, arch, batch, place and reading."""
    rows = []
    for path in run_files:
        for line in path.open():
            run = json.loads(line)
            for m in run.get("measurements") or []:
                if not m.get("throughput_per_s"):
                    continue
                rows.append({"file": path.name, "seed": run["seed"], "run": run["run"], "arch": m["arch"],
                             "batch": m.get("batch"), "in_batch": m.get("in_batch"),
                             "throughput_per_s": float(m["throughput_per_s"]),
                             "sm_clock_mhz": m.get("sm_clock_mhz")})
    return distinct(rows)


def compare(rows: list[dict], reference_ms: dict[str, float]) -> list[dict]:
    """Each reading with the plain loop's throughput of its cell and their ratio (evaluator over loop)."""
    out = []
    for row in rows:
        ms = reference_ms.get(row["arch"])
        if ms is None:
            continue
        loop = BATCH / (ms / 1e3)
        out.append(dict(row, reference_ms=ms, reference_throughput_per_s=loop, ratio=row["throughput_per_s"] / loop))
    return out


def summary(rows: list[dict]) -> dict:
    """Median ratio, counts within 1% and 3%, and the worst, for a set of compared readings."""
    if not rows:
        return {"readings": 0}
    ratios = [r["ratio"] for r in rows]
    worst = max(ratios, key=lambda v: abs(v - 1))
    return {"readings": len(rows), "median_ratio": statistics.median(ratios),
            "within_1pct": sum(abs(v - 1) <= 0.01 for v in ratios),
            "within_3pct": sum(abs(v - 1) <= 0.03 for v in ratios), "worst_ratio": worst}


def grouped(rows: list[dict]) -> dict:
    """The summary over all readings, per run name, and by place: first in its batch or after another cell."""
    by_run: dict[str, list[dict]] = {}
    for r in rows:
        by_run.setdefault(r["run"], []).append(r)
    return {"all": summary(rows), "runs": {k: summary(v) for k, v in by_run.items()},
            "first_in_batch": summary([r for r in rows if r["in_batch"] == 0]),
            "later_in_batch": summary([r for r in rows if r["in_batch"] not in (None, 0)])}


def time_cells(archs: list[str]) -> tuple[dict[str, float], dict[str, float]]:
    """The plain loop's milliseconds per replay for each cell, and the SM clock (MHz) right after its windows."""
    import torch

    from nasutil import get_space
    from nasutil.evaluator.counters import NvmlDevice
    from nasutil.evaluator.reference import graph_replay_ms

    space = get_space("nb201")
    nvml = NvmlDevice.for_torch_device(torch.device("cuda"))
    ms, clocks = {}, {}
    with torch.inference_mode():
        for arch in archs:
            model = space.build(space.parse(arch), num_classes=10).eval()
            model = model.to("cuda", torch.float16, memory_format=torch.channels_last)
            x = torch.randn(BATCH, 3, 32, 32, device="cuda", dtype=torch.float16).contiguous(
                memory_format=torch.channels_last)
            ms[arch] = graph_replay_ms(model, x, replays=20, windows=7)
            clocks[arch] = nvml.sm_clock_mhz()
            del model, x
    return ms, clocks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", type=Path, nargs="+", help="population_search.py run files (*_runs.jsonl)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    try:
        rows = survivor_readings(args.runs)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"survivor_reference: cannot read the run files: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    if not rows:
        print("survivor_reference: no measured survivors in the run files", file=sys.stderr)
        return 2
    import torch

    if not torch.cuda.is_available():
        print("survivor_reference: the plain loop needs a CUDA device, and none is available", file=sys.stderr)
        return 2
    archs = sorted({r["arch"] for r in rows})
    ms, clocks = time_cells(archs)
    compared = compare(rows, ms)
    for r in compared:
        r["reference_sm_clock_mhz"] = clocks.get(r["arch"])
    args.out.mkdir(parents=True, exist_ok=True)
    columns = list(compared[0])
    with (args.out / "survivor_reference.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        writer.writerows(compared)
    result = {"cells": len(archs), **grouped(compared)}
    (args.out / "survivor_reference.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("cells", "all", "first_in_batch", "later_in_batch")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
