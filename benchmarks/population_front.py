"""How a population's way of searching shapes the front, with no GPU: the search's own sampler and halving
policy driven by NAS-Bench-201's tables instead of training, one candidate at a time against P at once.

    python benchmarks/population_front.py --trials 64 128 192 --seeds 20 --out benchmarks/results/cpu/population_front

A candidate's accuracy is its CIFAR-10 200-epoch test accuracy, its rung accuracy (at 1/9 and 1/3 of the
training) the 12-epoch validation accuracy, and its throughput the H200 measurement shipped with the
package (`nb201_h200`, batch 256). The search asks through Optuna's TPE configured as `sampler=tpe`
(multivariate, 10 random start-up trials) with the space's own `suggest`, and cuts with
`nasutil.search.halving.ParetoHalving`. A population of P keeps P + P/4 trials asked (as the trainer's
`ahead` default): P train at once and each holds its place for the share of a training it takes (1 to
the end, the rung's fraction if cut), and a trial is told when its training ends, in that order. Ways
may also let the sampler learn from rung results (`informed`, the search's `RungInformedSampler`), hold
the asks to the results (`gG`, `halving.ask_ahead`), train the predicted fast end first (`aA`,
`anchors`, on the shipped H200 predictor) and prune before training (`qW`, `prune=dominated_throughput`
with `warmup_trials=W`, each decision counted by how it ended: `prune_checks`).

What it shows is the front's hypervolume (accuracy, throughput divided by the largest in the table,
reference (0, 0)) of the trials trained to the end, over the same-seed search one at a time with no
halving, and the trainings spent (the sum of the shares); and, since halving spends less on each trial,
the same against one at a time at the smallest trial budget asked (the equal-work view: compare where
the trainings spent are alike). It does not time anything: the rates are the GPU benchmark's
(`population_search.py`). The tables stand in for Fashion-MNIST training, whose rung
and final accuracies are not tabulated.
"""

from __future__ import annotations

import argparse
import heapq
import json
import re
import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import optuna

from nasutil.data.measured import measured_table
from nasutil.data.nasbench201 import accuracy_table
from nasutil.pareto import hypervolume_2d
from nasutil.registry import get_space
from nasutil.search.halving import ParetoHalving
from nasutil.search.prune import DominatedThroughput, History, Seen
from nasutil.search.rung_informed import RUNG_VALUES, RungInformedSampler

DIRECTIONS = ["maximize", "maximize"]
NAMES = ["accuracy", "throughput"]


@dataclass(frozen=True)
class Way:
    """One way of searching: P trained at once, `ahead` (P/4) more asked, ParetoHalving with its reduction
    factor and first rung (or none), and the start-up proposals spread over throughput (`spread`)."""

    name: str
    population: int
    halving: bool
    spread: bool = False
    reduction_factor: float = 3
    min_fraction: float = 0.111111
    tell_cut: bool = False  # a cut trial told to the sampler with its rung accuracy, not as pruned
    informed: bool = False  # the sampler learns from rung results (nasutil.search.rung_informed)
    ask_ahead: int = 0  # trials asked with no result yet: at most max(ask_ahead, results) (0: no limit)
    anchors: int = 0  # the predicted fast end trained first (nasutil.search.anchors)
    predicted: bool = False  # rungs cut on the predictor's throughput, as the search does (else the measured one)
    tolerance: float = 0.0  # `halving.hardware_tolerance`: throughputs within this fraction not told apart at a rung
    prune_warmup: int | None = None  # `prune=dominated_throughput` with this `warmup_trials` (None: no pruning)
    prune_fidelity: str = "final"  # and this `fidelity`: final, rung (the first rung's accuracies) or auto
    prune_margin: float = 0.0  # and this `margin` (accuracy points)
    rung_neighbours: int = 4  # and at the first rung, a bound from this many cells (`rung_min_neighbours`)
    rung_band: float = 0.1  # within this fraction of the candidate's predicted throughput (`rung_band`)
    select: str = "fronts"  # which candidates at a rung go on (`halving.select`; `sn`: nsga2)

    @property
    def asked_at_once(self) -> int:
        return 1 if self.population == 1 else self.population + max(1, self.population // 4)


WAY = re.compile(r"^p(?P<p>\d+)(?P<other>-other-seed)?(?P<pareto>-pareto(?:-r(?P<r>\d+))?(?:-m(?P<m>\d+))?)?"
                 r"(?P<spread>-spread)?(?P<tell>-tellcut)?(?P<informed>-informed)?(?:-g(?P<g>\d+))?(?:-a(?P<a>\d+))?"
                 r"(?P<pred>-pred)?(?:-t(?P<t>\d+))?(?:-q(?P<q>\d+)(?P<qf>[ra])?(?:m(?P<qm>\d+))?(?:n(?P<qn>\d+))?(?:b(?P<qb>\d+))?)?"
                 r"(?:-s(?P<select>[fn]))?$")


def parse_way(name: str) -> Way:
    """`pP[-other-seed][-pareto[-rR][-mM]][-spread][-tellcut][-informed][-gG][-aA][-pred][-tT][-qW[r|a][mM][nN][bB]][-sf|-sn]`: P at once;
    halving with reduction factor R (3) and its first rung at 1/M of the training (1/9); `tellcut` tells the sampler a
    cut trial's rung accuracy instead of a pruned state; `informed` lets it learn from every rung result
    (as `halving.inform_sampler`); `gG` asks at most max(G, results so far) trials ahead of results (as
    `halving.ask_ahead`); `aA` trains the A predicted-fastest cells first (as `anchors`); `pred` cuts at
    rungs on the shipped H200 predictor's throughput, as the search does, where the others cut on the
    measured one (the front is scored on the measured one either way); `tT` compares throughputs within T%
    as equal at a rung (`halving.hardware_tolerance`); `qW` prunes before training as
    `prune=dominated_throughput prune.warmup_trials=W` does (on the shipped predictor's figures, judged
    against the trained cells' measured throughput, as with `evaluator=auto`), judged on final accuracies, or with
    `r` on the first rung's (`prune.fidelity=rung`), or with `a` on the first rung's until W were trained to the end
    (`prune.fidelity=auto`), with `mM` a margin of M accuracy points (`prune.margin=M`), and at the first rung a
    bound from N cells (`nN`, `prune.rung_min_neighbours`; 4) within B% (`bB`, `prune.rung_band`; 10);
    `sf` lets whole fronts go on at a rung (`halving.select=fronts`, the default), `sn` the first 1/R in NSGA-II's
    order (`nsga2`);
    `other-seed` is one at a time
    on another seed (the noise floor)."""
    match = WAY.match(name)
    if match is None:
        raise SystemExit(f"way {name!r}: expected pP[-other-seed][-pareto[-rR][-mM]][-spread][-tellcut][-informed]"
                         f"[-gG][-aA][-pred][-tT][-qW[r|a][mM][nN][bB]][-sf|-sn], e.g. p16-pareto-informed-g16")
    return Way(name, int(match["p"]), bool(match["pareto"]), bool(match["spread"]),
               float(match["r"] or 3), 1 / float(match["m"]) if match["m"] else 0.111111, bool(match["tell"]),
               bool(match["informed"]), int(match["g"] or 0), int(match["a"] or 0), bool(match["pred"]),
               int(match["t"] or 0) / 100, int(match["q"]) if match["q"] is not None else None,
               {"r": "rung", "a": "auto"}.get(match["qf"] or "", "final"), float(match["qm"] or 0),
               int(match["qn"] or 4), int(match["qb"] or 10) / 100, "nsga2" if match["select"] == "n" else "fronts")


DEFAULT_WAYS = ["p1-other-seed", "p1-pareto", "p16", "p16-pareto", "p64-pareto", "p256-pareto", "p16-pareto-tellcut",
                "p16-pareto-informed", "p64-pareto-informed", "p16-pareto-informed-g16", "p64-pareto-informed-g16",
                "p256-pareto-informed-g16"]


class Tables:
    """What training would have told: final and rung accuracy, and measured throughput, per cell."""

    def __init__(self) -> None:
        accuracy = accuracy_table()
        measured = measured_table("nb201_h200")
        self.final = {a: r["cifar10_test_200ep"] for a, r in accuracy.items()}
        self.rung = {a: r["cifar10_valid_12ep"] for a, r in accuracy.items()}
        self.throughput = {a: measured.figures(a)["throughput_per_s"] for a in accuracy}
        self.top = max(self.throughput.values())
        self._anchors: dict[tuple[int, int], list[dict]] = {}
        self._predicted: dict[str, float] = {}
        self.predictions: dict[str, object] = {}  # each cell's whole `Prediction`, for the prune policy

    def predicted(self, arch: str) -> float:
        """The shipped H200 predictor's throughput for a cell, what the search's rungs compare (every cell
        predicted in one batch, on first use)."""
        if not self._predicted:
            from nasutil.predictor import make_predictor

            predictor = make_predictor(profile="h200")
            cells = sorted(self.final)
            scored = predictor.predict_many("nb201", cells, predictor.target())
            self._predicted = {cell: p.throughput_per_s for cell, p in zip(cells, scored)}
            self.predictions = dict(zip(cells, scored))
        return self._predicted[arch]

    def anchors(self, count: int, seed: int) -> list[dict]:
        """The search's `anchors` for this seed: the fast end on the shipped H200 predictor (not the table)."""
        if (count, seed) not in self._anchors:
            from nasutil.predictor import make_predictor
            from nasutil.search.anchors import fast_end
            from nasutil.search.objectives import Objectives

            predictor = make_predictor(profile="h200")
            objectives = Objectives.from_config({"metrics": ["accuracy", "throughput"]})
            self._anchors[count, seed] = fast_end(get_space("nb201"), "nb201", predictor, predictor.target(),
                                                  objectives, count, seed)
        return self._anchors[count, seed]


def search(way: Way, seed: int, trials: int, tables: Tables) -> dict:
    """One search: the front of the trials trained to the end, and the trainings it spent."""
    space = get_space("nb201")
    sampler = optuna.samplers.TPESampler(multivariate=True, n_startup_trials=10, seed=seed)
    study = optuna.create_study(directions=DIRECTIONS, sampler=RungInformedSampler(sampler) if way.informed else sampler)
    halving = ParetoHalving(way.reduction_factor, way.min_fraction, hardware_tolerance=way.tolerance,
                            select=way.select) \
        if way.halving else None
    if halving is not None:
        halving.name_objectives(NAMES)
    first = tables.anchors(way.anchors, seed) if way.anchors else []
    spread = _spread_start(space, tables, seed, min(trials, way.asked_at_once)) if way.spread else []
    for params in first + [_params(space, arch) for arch in spread]:
        study.enqueue_trial(params)
    policy = DominatedThroughput(warmup_trials=way.prune_warmup, fidelity=way.prune_fidelity, margin=way.prune_margin,
                                 rung_min_neighbours=way.rung_neighbours, rung_band=way.rung_band) \
        if way.prune_warmup is not None else None
    seen: dict[int, Seen] = {}  # what the prune policy knows at an ask, by trial: first rung reached or ended
    asked, clock, spent, pruned = 0, 0.0, 0.0, 0
    started = 0  # trainings begun: each prepared first (built, moved, warmed up, captured), whatever its end
    checks: Counter[str] = Counter()  # how each prune decision ended: pruned, or the first check that stopped it
    waiting: list[tuple[optuna.Trial, str]] = []  # asked, not yet training
    events: list[tuple[float, int, int, optuna.Trial, str, float]] = []  # (when, number, rung, trial, arch, start)
    done: dict[str, tuple[float, float]] = {}
    unanswered: set[int] = set()  # asked, no rung reached and not ended
    answers = 0
    rungs = halving.rungs if halving is not None else ()

    def answer(number: int) -> None:
        nonlocal answers
        if number in unanswered:
            unanswered.discard(number)
            answers += 1

    while asked < trials or waiting or events:
        while (asked < trials and len(waiting) + len(events) < way.asked_at_once
               and not (way.ask_ahead and len(unanswered) >= max(way.ask_ahead, answers))):
            trial = study.ask()
            arch = space.suggest(trial).to_string()
            asked += 1
            if arch in done:  # a repeat of a trained architecture: its result, no training
                study.tell(trial, list(done[arch]))
                answers += 1
                if policy is not None:  # in the search's history as its record is: trained, the result reused
                    tables.predicted(arch)
                    seen[trial.number] = _seen(tables, arch, done[arch][0])
                continue
            if policy is not None:
                tables.predicted(arch)  # every cell predicted, once
                prediction = tables.predictions[arch]
                kept_by = policy.stopped_by(prediction, History(list(seen.values())))
                checks[kept_by or "pruned"] += 1
                if kept_by is None:
                    trial.set_user_attr("prune_stage", "before_training")
                    study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                    seen[trial.number] = Seen(prediction.throughput_per_s, prediction.latency_ms,
                                              prediction.utilization, arch=arch)
                    pruned += 1
                    answers += 1
                    continue
            waiting.append((trial, arch))
            unanswered.add(trial.number)
        while waiting and len(events) < way.population:
            trial, arch = waiting.pop(0)
            started += 1
            first_stop = rungs[0] if rungs else 1.0
            heapq.heappush(events, (clock + first_stop, trial.number, 0, trial, arch, clock))
        if not events:
            continue
        clock, number, rung, trial, arch, start = heapq.heappop(events)
        answer(number)
        if rung < len(rungs):  # at a rung: cut, or on to the next rung (or the end)
            values = [tables.rung[arch], tables.predicted(arch) if way.predicted else tables.throughput[arch]]
            if way.informed:
                trial.set_user_attr(RUNG_VALUES, values)
            if policy is not None and rung == 0:
                seen[number] = _seen(tables, arch, None, rung_accuracy=tables.rung[arch])
            if halving.decide(rung, number, values, DIRECTIONS) is not None:
                if way.tell_cut:
                    study.tell(trial, values)
                else:
                    trial.set_user_attr("prune_stage", "during_training")
                    study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                spent += clock - start
                continue
            after = rungs[rung + 1] if rung + 1 < len(rungs) else 1.0
            heapq.heappush(events, (start + after, number, rung + 1, trial, arch, start))
            continue
        values = (tables.final[arch], tables.throughput[arch])
        done[arch] = values
        study.tell(trial, list(values))
        if policy is not None:
            seen[number] = _seen(tables, arch, values[0], rung_accuracy=tables.rung[arch] if rungs else None)
        spent += clock - start
    points = [(a, t / tables.top) for a, t in done.values()]
    return {"way": way.name, "seed": seed, "trials": trials, "trained": len(done), "trainings_spent": spent,
            "prepared": started, "pruned_before_training": pruned, "prune_checks": dict(checks),
            "makespan": clock, "hypervolume": hypervolume_2d(points, (0.0, 0.0)),
            "fastest_trained": max((t for _, t in done.values()), default=0.0)}


def _seen(tables: Tables, arch: str, accuracy: float | None, rung_accuracy: float | None = None) -> Seen:
    """A trial as the prune policy's history holds it: predicted figures, its accuracy at the first rung where
    it reached it, and where trained to the end its accuracy and the throughput it was scored on (measured)."""
    prediction = tables.predictions[arch]
    return Seen(prediction.throughput_per_s, prediction.latency_ms, prediction.utilization, accuracy,
                tables.throughput[arch] if accuracy is not None else None, arch, rung_accuracy)


def _spread_start(space, tables: Tables, seed: int, count: int) -> list[str]:
    """`count` architectures drawn at random, one from each of `count` equal slices of predicted throughput."""
    rng = np.random.default_rng(seed)
    pool = sorted({space.sample(rng).to_string() for _ in range(20 * count)}, key=lambda a: (tables.throughput[a], a))
    slices = np.array_split(np.arange(len(pool)), count)
    chosen = [pool[int(rng.choice(s))] for s in slices if len(s)]
    rng.shuffle(chosen)  # asked in no order of throughput: rung decisions see them in the order they come
    return chosen


def _params(space, arch: str) -> dict:
    """The trial parameters that make the space's `suggest` return `arch` (one per edge)."""
    from nasutil_search_spaces.nb201 import EDGES

    return {f"edge_{i}<-{j}": op for (i, j), op in zip(EDGES, space.parse(arch).ops)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ways", nargs="+", default=DEFAULT_WAYS)
    parser.add_argument("--baseline", default="p1")
    parser.add_argument("--trials", type=int, nargs="+", default=[64])
    parser.add_argument("--seeds", type=int, default=20, help="seeds FIRST..FIRST+N-1")
    parser.add_argument("--first-seed", type=int, default=1000,
                        help="the first seed (1000; a fresh range checks a setting chosen on another)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--name", default="population_front", help="the result file is NAME.json")
    args = parser.parse_args()
    names = list(dict.fromkeys([args.baseline, *args.ways]))
    try:  # every way named right before any search runs
        ways = {name: parse_way(name) for name in names}
    except SystemExit as bad:
        parser.exit(2, f"population_front.py: error: {bad}\n")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    tables = Tables()
    rows = []
    first: dict[int, float] = {}  # p1's hypervolume at the smallest budget, per seed: the equal-work view
    for trials in sorted(args.trials):
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            mine = {name: search(ways[name], seed + (10_000 if "other-seed" in name else 0), trials, tables)
                    for name in names}
            base = mine[args.baseline]["hypervolume"]
            first.setdefault(seed, base)
            for r in mine.values():
                r["hypervolume_ratio"] = r["hypervolume"] / base
                r["hypervolume_ratio_to_first"] = r["hypervolume"] / first[seed]
            rows += mine.values()
    summary = {}
    for trials in sorted(args.trials):
        for name in names:
            mine = [r for r in rows if r["way"] == name and r["trials"] == trials]
            ratios = [r["hypervolume_ratio"] for r in mine]
            to_first = [r["hypervolume_ratio_to_first"] for r in mine]
            summary[f"{name}/t{trials}"] = {
                "mean_hypervolume_ratio": statistics.fmean(ratios), "worst_hypervolume_ratio": min(ratios),
                "seeds_below_0.95": sum(x < 0.95 for x in ratios),
                "mean_ratio_to_first_budget": statistics.fmean(to_first),
                "worst_ratio_to_first_budget": min(to_first),
                "trainings_spent": statistics.fmean(r["trainings_spent"] for r in mine),
                "pruned_before_training": statistics.fmean(r["pruned_before_training"] for r in mine),
                "prepared": statistics.fmean(r["prepared"] for r in mine),
                "prune_checks": dict(sum((Counter(r["prune_checks"]) for r in mine), Counter())),
                "trained": statistics.fmean(r["trained"] for r in mine)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps({"settings": {k: str(v) for k, v in vars(args).items()},
                                                                 "summary": summary, "runs": rows}, indent=1))
    for key, s in summary.items():
        print(f"{key:28s} hv ratio mean {s['mean_hypervolume_ratio']:.3f} worst {s['worst_hypervolume_ratio']:.3f} "
              f"below 0.95: {s['seeds_below_0.95']:2d}  to p1 at the first budget {s['mean_ratio_to_first_budget']:.3f} "
              f"(worst {s['worst_ratio_to_first_budget']:.3f})  trained {s['trained']:.1f}  "
              f"trainings {s['trainings_spent']:.1f}  prepared {s['prepared']:.1f}  pruned {s['pruned_before_training']:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
