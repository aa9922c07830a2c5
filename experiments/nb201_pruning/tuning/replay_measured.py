"""Replay the prune policy along recorded searches, scored on measured throughput: a screen of the policy's
settings that runs no search again, and a diagnosis of what a policy pruned that it should have trained.

Input: the trials of a sweep (`--runs RUNS`, its run folders `RUNS/<sampler>-<prune>/s<seed>/trials.csv`,
consolidated first into TRIALS), or TRIALS alone (a gzip CSV: arm, seed, number, outcome, arch, prune_reason).

Screen (`--grid`): the trial sequence of each UNPRUNED search (`<sampler>-none`) is walked in order; at each
candidate the policy, with the given settings, decides on the history the replay built so far (trained cells
with their 200-epoch accuracy and measured throughput, pruned ones with their prediction only), as
`nasutil-search` would. For random search this is the pruned search exactly (it proposes the same candidates
whatever the outcomes); for TPE and NSGA-II a pruned search follows another trajectory, so the replay screens
the policy's decisions, not the sampler's response to them. Per setting, sampler and budget: trainings saved,
the measured hypervolume of the kept trainings over the unpruned search's (reference: 10%, the slowest cell),
and the pruned candidates that would have joined the front.

Diagnosis (`--why`): every candidate that a recorded pruned search (`<sampler>-dominated_throughput`) pruned and
that no trained candidate of that search dominates on measured throughput and accuracy (trained, it would have
joined its front), with what let it through, read from its prune reason: `accuracy` (it is more accurate
than the neighbours' bound), `throughput` (the front member that was to dominate it measured slower).

    python experiments/nb201_pruning/tuning/replay_measured.py TRIALS [--runs RUNS] \\
        [--grid 'error_quantile=1.0' 'error_quantile=0.75 band=0.1' ... --out SCREEN.csv] [--why WHY.csv]

(the keys are the policy's config settings.)
"""

from __future__ import annotations

import argparse
import csv
import re
import statistics
import sys
from collections import Counter
from pathlib import Path

from nasutil.data.measured import measured_table
from nasutil.data.nasbench201 import accuracy_table
from nasutil.pareto import front_2d, hypervolume_2d
from nasutil.predictor import Prediction
from nasutil.search.prune import DominatedThroughput, History, Seen

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))
import analyze_measured  # noqa: E402  (the experiment's analysis, beside this folder)

COLUMNS = ("arm", "seed", "number", "outcome", "arch", "prune_reason")
REASON = re.compile(r"predicted dominated: ([\d.]+)% at ([\d,]+)/s on the front vs <= ([\d.]+)%")


def tables() -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """Predicted throughput, measured throughput and 200-epoch accuracy of every cell."""
    with (HERE / "results" / "predicted_h200.csv").open(newline="") as f:
        predicted = {r["arch"]: float(r["throughput_per_s"]) for r in csv.DictReader(f)}
    measured = {a: figures["throughput_per_s"] for a, figures in measured_table("nb201_h200").rows.items()}
    accuracy = {a: row["cifar10_test_200ep"] for a, row in accuracy_table().items()}
    return predicted, measured, accuracy


def consolidate(runs: Path, out: Path) -> None:
    """Every trial of the sweep's run folders, with its prune reason, one gzip CSV."""
    analyze_measured.consolidate(runs, out, COLUMNS)


read_trials = analyze_measured.read_trials


def candidate(arch: str, predicted: float) -> Prediction:
    return Prediction("nb201", arch, "table", "NVIDIA H200", "fp16", 256, "cudagraph", None,
                      256_000 / predicted, predicted, None)


def replay(archs: list[str], policy: DominatedThroughput, predicted: dict, measured: dict,
           accuracy: dict) -> list[str]:
    """The outcome of each candidate in turn under `policy`: trained, repeat or pruned (as the search loop:
    the policy decides first, then a cell already trained is reused)."""
    seen: list[Seen] = []
    trained: set[str] = set()
    outcomes = []
    for arch in archs:
        p = predicted[arch]
        if policy.decide(candidate(arch, p), History(list(seen))) is not None:
            outcomes.append("pruned")
            seen.append(Seen(p, 256_000 / p, None, arch=arch))
            continue
        outcomes.append("repeat" if arch in trained else "trained")
        trained.add(arch)
        seen.append(Seen(p, 256_000 / p, None, accuracy[arch], measured[arch], arch=arch))
    return outcomes


def hypervolume(archs: list[str], measured: dict, accuracy: dict, reference: tuple[float, float]) -> float:
    points = [(measured[a], accuracy[a]) for a in set(archs)]
    return hypervolume_2d(front_2d(points, x=lambda q: q[0], y=lambda q: q[1]), reference)


def on_front(arch: str, trained: list[str], measured: dict, accuracy: dict) -> bool:
    return not any(measured[t] >= measured[arch] and accuracy[t] >= accuracy[arch] for t in trained)


def parse_setting(text: str) -> dict:
    settings: dict = {}
    for item in text.split():
        key, value = item.split("=", 1)
        settings[key] = value if value == "auto" else (int(value) if key in ("warmup_trials", "min_neighbours")
                                                       else float(value))
    return settings


def screen(searches: dict, setting: str, budgets: list[int], tabs: tuple) -> list[dict]:
    """One row per sampler and budget: the replay of `setting` along every unpruned search."""
    predicted, measured, accuracy = tabs
    reference = (min(measured.values()), 10.0)
    settings = parse_setting(setting)
    policy = DominatedThroughput(**settings)
    per: dict = {}
    for (arm, seed), trials in sorted(searches.items()):
        sampler, _, prune = arm.partition("-")
        if prune != "none":
            continue
        archs = [t["arch"] for t in trials]
        outcomes = replay(archs, policy, predicted, measured, accuracy)
        for budget in budgets:
            base = [t["arch"] for t in trials[:budget] if t["outcome"] == "trained"]
            kept = [a for a, o in zip(archs[:budget], outcomes) if o == "trained"]
            pruned = {a for a, o in zip(archs[:budget], outcomes) if o == "pruned"} - set(kept)
            hv = hypervolume(kept, measured, accuracy, reference) / hypervolume(base, measured, accuracy, reference)
            per.setdefault((sampler, budget), []).append(
                (1 - len(kept) / len(base), hv, sum(on_front(a, kept, measured, accuracy) for a in pruned),
                 sum(o == "pruned" for o in outcomes[:budget])))
    rows = []
    for (sampler, budget), runs in sorted(per.items()):
        saved, hv = [r[0] for r in runs], [r[1] for r in runs]
        rows.append({"setting": setting, "sampler": sampler, "budget": budget, "seeds": len(runs),
                     "saved_mean": round(statistics.mean(saved), 4), "saved_min": round(min(saved), 4),
                     "hv_ratio_mean": round(statistics.mean(hv), 4), "hv_ratio_min": round(min(hv), 4),
                     "seeds_below_0.95": sum(h < 0.95 for h in hv), "seeds_below_0.90": sum(h < 0.90 for h in hv),
                     "pruned": sum(r[3] for r in runs), "pruned_on_front": sum(r[2] for r in runs)})
    return rows


def why(searches: dict, budget: int, tabs: tuple) -> list[dict]:
    """Each candidate a recorded pruned search pruned that would have joined its front: what let it through,
    how much measured hypervolume it would have added to the search's final front (relative), and whether the
    policy as it is now (its shipped defaults), on the same history, would have trained it."""
    predicted, measured, accuracy = tabs
    reference = (min(measured.values()), 10.0)
    policy = DominatedThroughput()
    rows = []
    for (arm, seed), trials in sorted(searches.items()):
        sampler, _, prune = arm.partition("-")
        if prune != "dominated_throughput":
            continue
        trials = trials[:budget]
        trained = [t["arch"] for t in trials if t["outcome"] == "trained"]
        final = hypervolume(trained, measured, accuracy, reference)
        seen: list[Seen] = []
        for t in trials:
            a, p = t["arch"], predicted[t["arch"]]
            history = History(list(seen))
            if t["outcome"] != "pruned_before_training":
                seen.append(Seen(p, 256_000 / p, None, accuracy[a], measured[a], arch=a))
                continue
            seen.append(Seen(p, 256_000 / p, None, arch=a))
            if not on_front(a, trained, measured, accuracy):
                continue
            front_accuracy, front_speed, bound = REASON.match(t["prune_reason"]).groups()
            front_speed = float(front_speed.replace(",", ""))
            causes = [c for c, hit in (("accuracy", accuracy[a] > float(bound)),
                                       ("throughput", measured[a] > front_speed)) if hit]
            rows.append({"sampler": sampler, "seed": seed, "number": int(t["number"]),
                         "accuracy": accuracy[a], "bound": float(bound), "front_accuracy": float(front_accuracy),
                         "front_throughput": front_speed, "measured": round(measured[a], 1),
                         "predicted": round(predicted[a], 1), "cause": "+".join(causes) or "neither",
                         "hv_gain": round(hypervolume(trained + [a], measured, accuracy, reference) / final - 1, 5),
                         "trained_now": policy.decide(candidate(a, p), history) is None})
    return rows


def group_by(rows: list[dict], keys: tuple[str, ...]) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = {}
    for r in rows:
        out.setdefault(tuple(r[k] for k in keys), []).append(r)
    return out


def write_csv(rows: list[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trials", type=Path, help="the consolidated trials (gzip CSV)")
    parser.add_argument("--runs", type=Path, help="a sweep's run folders: consolidated into TRIALS first")
    parser.add_argument("--grid", nargs="+", default=[], help="policy settings to screen, each 'KEY=VALUE ...'")
    parser.add_argument("--out", type=Path, help="the screen's CSV")
    parser.add_argument("--why", type=Path, help="the diagnosis's CSV")
    parser.add_argument("--budgets", type=int, nargs="+", default=[150, 300])
    args = parser.parse_args(argv)
    if args.runs is not None:
        consolidate(args.runs, args.trials)
    searches, tabs = read_trials(args.trials), tables()
    if args.why is not None:
        rows = why(searches, max(args.budgets), tabs)
        write_csv(rows, args.why)
        pruned = Counter(arm.split("-")[0] for (arm, _), trials in searches.items()
                         if arm.endswith("-dominated_throughput")
                         for t in trials[:max(args.budgets)] if t["outcome"] == "pruned_before_training")
        for (sampler, cause), group in sorted(group_by(rows, ("sampler", "cause")).items()):
            print(f"{sampler:>6}: {len(group)} of {pruned[sampler]} pruned would have joined the front, let through by "
                  f"{cause}; HV they would have added: {sum(r['hv_gain'] for r in group):.3f} in all, "
                  f"{max(r['hv_gain'] for r in group):.3f} at most; {sum(r['trained_now'] for r in group)} trained now")
    rows = [row for setting in args.grid for row in screen(searches, setting, args.budgets, tabs)]
    for r in rows:
        print(f"{r['setting']:>28} {r['sampler']:>6}@{r['budget']}: saved {r['saved_mean']:.1%} (min "
              f"{r['saved_min']:.1%}); HV {r['hv_ratio_mean']:.4f} (min {r['hv_ratio_min']:.4f}); pruned on front "
              f"{r['pruned_on_front']} of {r['pruned']}")
    if rows and args.out is not None:
        write_csv(rows, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
