"""A real-training search with a population of candidates trained together against one at a time: same
seed, same trial budget, same everything else.

    python benchmarks/population_search.py --out benchmarks/results/h200/population

Runs `nasutil-search` (trainer=torch on Fashion-MNIST, accuracy x predicted H200 throughput, no
pruning, nothing measured) once per population size and reports, from each study: finished trials,
wall time, candidates trained per GPU-hour, and the hypervolume of the front (accuracy in %,
throughput in images/s divided by the largest seen in either run; reference point (0, 0)).
Writes population_search.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import optuna

from nasutil.pareto import hypervolume_2d


def search(run_dir: Path, population: int, seed: int, args: argparse.Namespace) -> dict:
    from nasutil.cli.search_command import main as search_main

    name = f"population-{population}-s{seed}"
    overrides = [f"study_name={name}", f"hydra.run.dir={run_dir}", f"n_trials={args.trials}", f"seed={seed}",
                 "prune=none", "evaluator=none", "plots=false", "progress=false", "trainer=torch",
                 f"trainer.dataset={args.dataset}", f"trainer.epochs={args.epochs}",
                 f"trainer.batch_size={args.batch_size}", f"trainer.population={population}"]
    started = time.perf_counter()
    code = search_main(overrides)
    wall = time.perf_counter() - started
    study = optuna.load_study(study_name=name, storage=f"sqlite:///{run_dir / 'study.db'}")
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    points = [(t.values[0], t.values[1]) for t in done]
    numbers = [t.number for t in done]
    return {"population": population, "seed": seed, "exit_code": code, "wall_s": wall, "completed": len(done),
            "trials": len(study.trials), "candidates_per_gpu_hour": len(done) / wall * 3600,
            "best_accuracy": max((p[0] for p in points), default=None), "points": points,
            "archs": [t.user_attrs.get("arch") for t in done], "numbers": numbers}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--populations", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--trials", type=int, default=32)
    parser.add_argument("--dataset", default="fashion_mnist")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    runs = []
    for seed in args.seeds:
        for population in args.populations:
            runs.append(search(Path(f"/tmp/population-search/{seed}-{population}"), population, seed, args))
            with (args.out / "population_search_runs.jsonl").open("a") as fh:  # kept if a later run is cut short
                fh.write(json.dumps(runs[-1]) + "\n")
    top = max(p[1] for r in runs for p in r["points"])
    for r in runs:
        r["hypervolume"] = hypervolume_2d([(a, t / top) for a, t in r["points"]], (0.0, 0.0))
        # the front of the first n trials asked, for a few n: does a population catch up as trials grow?
        r["hypervolume_by_trials"] = {n: hypervolume_2d([(a, t / top) for (a, t), k in zip(r["points"], r["numbers"])
                                                         if k < n], (0.0, 0.0))
                                      for n in sorted({min(args.trials, m) for m in (24, 48, args.trials)})}
        print(json.dumps({k: v for k, v in r.items() if k not in ("points", "archs", "numbers")}), flush=True)
    base = {r["seed"]: r for r in runs if r["population"] == args.populations[0]}
    summary = {"settings": {k: v for k, v in vars(args).items() if k != "out"}, "runs": runs,
               "speedup": {f"{r['population']}/s{r['seed']}": r["candidates_per_gpu_hour"]
                           / base[r["seed"]]["candidates_per_gpu_hour"] for r in runs},
               "hypervolume_ratio": {f"{r['population']}/s{r['seed']}": r["hypervolume"] / base[r["seed"]]["hypervolume"]
                                     for r in runs}}
    (args.out / "population_search.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps({"speedup": summary["speedup"], "hypervolume_ratio": summary["hypervolume_ratio"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
