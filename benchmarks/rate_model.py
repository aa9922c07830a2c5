"""What sets a population's speed-up over one at a time: the engine's gain times the training that halving saves.

    python benchmarks/rate_model.py --out benchmarks/results/cpu/rate_model

No GPU: it reads recorded searches (`population_search.py`'s NAME_runs.jsonl, default: the H100 runs of seeds
146-151, all on the training step that `step_kernels.py` timed in `h100/step_kernels/copies_after`) and, for each
population run, sets its speed-up over one at a time (same seed, same call, same batch) beside two factors:

- the work ratio: the epochs one at a time trained over the epochs the population trained (halving cuts
  candidates at rungs, so a population trains fewer epochs for the same trials);
- the engine's gain: 16 captured steps replayed together over the same graphs replayed one at a time, at the run's
  batch size (`step_kernels.json`, `graph_together` over `graph_alone`).

Were the time around the engine the same share of a population's run as of one at a time's, the speed-up would be
their product (`bound`); `speedup_over_bound` says how near each run came. The goals divided by the engine's gain
say what work ratio each would need. Writes rate_model.json (every run and the summary) and rate_model.csv.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
#: (folder under h100/population, the runs files' names) recorded on the step code of `copies_after`
DEFAULT_RUNS = (
    ("copies_s146", ("population_search_b64_s146", "population_search_b64_s147", "population_search_b256_s146")),
    ("join_s148", ("population_search_b64_s148", "population_search_b256_s147", "population_search_b256_s148")),
    ("stage_s150", ("population_search_b64_s150", "population_search_b64_s151")),
)
GAINS = RESULTS / "h100" / "step_kernels" / "copies_after" / "step_kernels.json"
#: the issue's goals: speed-up over one at a time by batch size
GOALS = {64: 5.0, 256: 3.0}


def engine_gains(path: Path) -> dict[int, float]:
    """Together over alone, steps per second, by batch size."""
    rows = json.loads(path.read_text())["rows"]
    return {int(r["batch"]): r["graph_together"]["steps_per_s"] / r["graph_alone"]["steps_per_s"] for r in rows}


def read_runs(folder: Path, names: tuple[str, ...]) -> list[dict]:
    """Every run of the named files, each with its CSV row's speed-up over one at a time."""
    runs = []
    for name in names:
        rows = {(r["run"], r["seed"]): r for r in csv.DictReader((folder / f"{name}.csv").open())}
        for line in (folder / f"{name}_runs.jsonl").open():
            run = json.loads(line)
            run["speedup_over_baseline"] = rows[(run["run"], str(run["seed"]))]["speedup_over_baseline"]
            runs.append(run)
    return runs


def model(runs: list[dict], gains: dict[int, float], source: str) -> list[dict]:
    """Each population run beside its one at a time: speed-up, work ratio, engine gain, their product."""
    alone = {(r["seed"], r["batch_size"]): r for r in runs if r["run"] == "p1"}
    out = []
    for r in runs:
        if r["run"] == "p1" or (r["seed"], r["batch_size"]) not in alone:
            continue
        base = alone[(r["seed"], r["batch_size"])]
        work = base["epochs_trained"] / r["epochs_trained"]
        gain = gains[r["batch_size"]]
        speedup = float(r["speedup_over_baseline"])
        out.append({"source": source, "run": r["run"], "seed": r["seed"], "batch": r["batch_size"],
                    "speedup": round(speedup, 4), "epochs_one_at_a_time": round(base["epochs_trained"], 4),
                    "epochs": round(r["epochs_trained"], 4), "work_ratio": round(work, 4),
                    "engine_gain": round(gain, 4), "bound": round(work * gain, 4),
                    "speedup_over_bound": round(speedup / (work * gain), 4)})
    return out


def summary(rows: list[dict], gains: dict[int, float]) -> dict:
    by_batch = {}
    for batch in sorted({r["batch"] for r in rows}):
        mine = [r for r in rows if r["batch"] == batch]
        by_batch[str(batch)] = {
            "runs": len(mine), "engine_gain": round(gains[batch], 4),
            "work_ratio": [min(r["work_ratio"] for r in mine), max(r["work_ratio"] for r in mine)],
            "speedup": [min(r["speedup"] for r in mine), max(r["speedup"] for r in mine)],
            "speedup_over_bound": [min(r["speedup_over_bound"] for r in mine), max(r["speedup_over_bound"] for r in mine)],
            "median_speedup_over_bound": round(statistics.median(r["speedup_over_bound"] for r in mine), 4),
            "goal": GOALS.get(batch), "work_ratio_the_goal_needs": round(GOALS[batch] / gains[batch], 4)
            if batch in GOALS else None}
    return {"runs": len(rows), "median_speedup_over_bound": round(statistics.median(r["speedup_over_bound"]
                                                                                    for r in rows), 4),
            "by_batch": by_batch}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gains", type=Path, default=GAINS, help="step_kernels.json with together and alone rates")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if not args.gains.is_file():
        parser.error(f"--gains {args.gains} is not a file (step_kernels.py writes step_kernels.json)")
    gains = engine_gains(args.gains)
    rows = []
    for folder, names in DEFAULT_RUNS:
        rows += model(read_runs(RESULTS / "h100" / "population" / folder, names), gains, folder)
    report = {"gains_from": str(args.gains.relative_to(ROOT)) if args.gains.is_relative_to(ROOT) else str(args.gains),
              "summary": summary(rows, gains), "rows": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "rate_model.json").write_text(json.dumps(report, indent=1) + "\n")
    with (args.out / "rate_model.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(json.dumps(report["summary"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
