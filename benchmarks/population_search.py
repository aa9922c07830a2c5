"""End-to-end searches with real training, a population against one candidate at a time: the same seed,
trial budget and settings, run in one process, warm, the order of runs alternated from seed to seed.

    python benchmarks/population_search.py --batch-size 64 --seeds 11 12 13 \\
        --runs p1 p1-eager p16-pareto p64-pareto p256-pareto --out benchmarks/results/h200/population

Each run is one `nasutil-search trainer=torch` (Fashion-MNIST by default, accuracy x predicted H200
throughput, TPE, no pruning before training and nothing measured unless `--settings` says otherwise).
A run is named `pP[-eager][-HALVING][-fF][-sf|-sn][-rR][-lL][-aA][-wW][-eE][-hH][-kK|-kn][-qf|-qr|-qa][-ty][-vN][-j][@TRIALS][.K]`: P candidates trained at once, `eager` for
`trainer.graphs=false` (a plain eager PyTorch step), `HALVING` a `halving` option (`pareto`, `accuracy`),
`-fF` its rungs at 1/F^2 and 1/F of the training with reduction factor F (the defaults: F=3; `-f4` is 1/16
and 1/4), `-sf`/`-sn` which candidates go on at the Pareto cut's rungs (`halving.select=fronts`, the
default, or `nsga2`, NSGA-II's order; written out, a run names its rule whatever the default), `-rR` at
most R of them stepping in one round (`trainer.round_size=R`), `-lL` L rounds queued ahead of
the device (`trainer.lead_rounds=L`; the default 2), `-aA` A candidates prepared while the places are full
(`trainer.ahead=A`; the default P/4), `-wW` W eager warm-up steps before each capture
(`trainer.warm_up_steps=W`; the default 3), `-eE` E images a validation or test forward
(`trainer.eval_batch=E`; the default 1,024), `-hH` at most H members doing host work at once
(`trainer.host_turns=H`; the default 4), `-kK` at most K trials asked ahead of their first result
(`halving.ask_ahead=K`; the default 16; `-kn` no limit), `-qf`/`-qr`/`-qa` the prune policy of `--settings` judging on final
accuracies (`prune.fidelity=final`), at the first rung (`rung`) or there until enough were trained to the end (`auto`),
`-ty` the last members taking steps a round in proportion to the steps they have left once the search asks no
more (`trainer.finish_together=true`; by default one step a round each to the end), `-vN` validations at rungs
on the validation split's first N images (`trainer.rung_valid_images=N`; by default all), `-j` the study in Optuna's
journal file (`storage=journal`) instead of SQLite, `.K` a repeat of the same
run in the same call (`p16-pareto.2`: within one seed, what the halving chooses to train moves a run's rate
by a third), `@TRIALS` a trial budget of its own (`p16-pareto@128` against `p1` at 64: halving spends less
per trial, so compare where the work is alike). `p1` is the project's default: one candidate at a time,
each step a CUDA graph.

Per run, from its study: trials finished (trained to the end, cut at a rung, pruned before training),
failed trials, wall time from the search's start to its end (Hydra, data loading and all), candidates
(finished trials) per GPU-hour, and the hypervolume of the front of trained trials (accuracy in %,
throughput divided by the largest of the seed's runs, reference (0, 0)). Runs with fewer trials
(`--eager-trials` for the eager runs, which take about 25 s a candidate, and train no `anchors`: their few
trials rate the eager step on the sampler's own proposals) are also rated over the span
from their first trial's start to their last trial's end, which leaves out the start-up they share.
With `--plain-loop`, each eager run's cells are trained again right after it by a textbook PyTorch loop
(benchmarks/plain_eager.py, which shares only the network builder and the dataset reader with nasutil): an
independent clock for the eager rate, and the `speedup_over_plain_loop` column divides by it. The few
cells of an eager run are the sampler's first proposals, whose cost varies fourfold from seed to seed; with
`--plain-sample K`, K of the baseline's own trained cells (drawn with the seed) are trained by the plain loop
after it, and `speedup_over_plain_search` divides by the baseline's whole search as that loop would run it
(its span times the loop's seconds over the trials' seconds on those K cells).
Writes population_search_runs.jsonl (a line per run as it ends; with `evaluator=auto`, each measured survivor's
throughput, SM clock and latency spread under `measurements`), NAME.json and NAME.csv. With measured
survivors, each run's row puts them against the baseline's readings of the same cells: how many both
measured (`survivors_shared`), the range of throughput ratios and how many agree within 1%.
Before and after each run, `host_pace_before_ms` and `host_pace_after_ms` time the host itself: the median
milliseconds to build and cast one of a fixed set of NAS-Bench-201 networks on the CPU. A population's rate is
bound by its host work, and the same seed once ran 1.65x slower in one process than in the next on one machine,
every host phase alike: the probe tells a slow host from a slow search.
With `--engine-floor`, each graph run's training (every ended trial's cell for the epochs it trained) is
replayed right after it on the engine alone (benchmarks/engine_floor.py): `engine_floor_s`, the seconds the
engine needs for that work, over the span is `engine_share`; `speedup_over_baseline_span` is the run's rate
over the baseline's, both over their spans; and `engine_bound_over_baseline` the same with the run at its
engine floor: the most a search around the engine could read over the baseline as the baseline ran.
A population's row also gives its members joined over time (from the trainer's summary): `members_time_mean`,
their mean weighted by time from the first join to the last leave (`membership_span_s`), and
`first_join_after_s`, the first member's preparation; the mean in each tenth of the span is in the run's
`population_activity` (`members_by_tenth`). `mean_STRETCH_s` says where its trials spent their time (building,
waiting for a place, preparing, waiting to join, training, after leaving: `PHASE_STRETCHES`), and each run's
`timeline` holds every trial's start and end with the population's clock placed on the study's.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import re
import statistics
import tempfile
import time
from pathlib import Path

import optuna

from nasutil.pareto import hypervolume_2d
from nasutil.search.trainers.torch_trainer import HOST_PHASES as TRAINER_HOST_PHASES

RUN = re.compile(r"^p(?P<population>\d+)(?P<eager>-eager)?(?:-(?P<halving>pareto|accuracy))?(?:-f(?P<factor>\d+))?(?:-s(?P<select>[fn]))?"
                 r"(?:-r(?P<round>\d+))?(?:-l(?P<lead>\d+))?(?:-a(?P<ahead>\d+))?(?:-w(?P<warm>\d+))?(?:-e(?P<eval>\d+))?(?:-h(?P<turns>\d+))?(?:-k(?P<ask>\d+|n))?(?:-q(?P<fidelity>[fra]))?"
                 r"(?P<together>-ty)?(?:-v(?P<rung_images>\d+))?(?P<journal>-j)?(?:@(?P<trials>\d+))?(?:\.(?P<repeat>\d+))?$")


HOST_PHASES = [phase for phase, _ in TRAINER_HOST_PHASES]  # a candidate's host work, as the trainer times it
PACE_CELLS = 8  # networks the host probe builds, the same ones every time


def host_pace_ms() -> float:
    """Median milliseconds to build one of `PACE_CELLS` fixed NAS-Bench-201 networks and cast it to half
    precision in channels-last format on the CPU: what a member's build and cast ask of the host."""
    import numpy as np
    import torch

    from nasutil import get_space

    space = get_space("nb201")
    rng = np.random.default_rng(0)
    cells = [space.sample(rng) for _ in range(PACE_CELLS)]
    space.build(cells[0], num_classes=10, input_size=28)  # first-use costs, untimed
    times = []
    for arch in cells:
        started = time.perf_counter()
        space.build(arch, num_classes=10, input_size=28).to(torch.float16, memory_format=torch.channels_last)
        times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(times)


def parse_run(name: str) -> dict:
    match = RUN.match(name)
    if match is None:
        raise SystemExit(f"run {name!r}: expected pP[-eager][-pareto|-accuracy][-fF][-sf|-sn][-rR][-lL][-aA][-wW][-eE][-hH][-kK|-kn][-qf|-qr|-qa][-ty][-vN][-j][@TRIALS][.K], "
                         "e.g. p16-pareto@128")
    spec = {"population": int(match["population"]), "eager": bool(match["eager"]),
            "halving": match["halving"] or "none", "budget": int(match["trials"]) if match["trials"] else None}
    if match["round"]:
        spec["round_size"] = int(match["round"])
    if match["lead"]:
        spec["lead_rounds"] = int(match["lead"])
    if match["ahead"]:
        spec["ahead"] = int(match["ahead"])
    if match["warm"]:
        spec["warm_up_steps"] = int(match["warm"])
    if match["eval"]:
        spec["eval_batch"] = int(match["eval"])
    if match["turns"]:
        spec["host_turns"] = int(match["turns"])
    if match["ask"]:
        if not match["halving"]:
            raise SystemExit(f"run {name!r}: -kK needs a halving (-pareto, -accuracy)")
        spec["ask_ahead"] = None if match["ask"] == "n" else int(match["ask"])
    if match["fidelity"]:
        spec["prune_fidelity"] = {"f": "final", "r": "rung", "a": "auto"}[match["fidelity"]]
    if match["journal"]:
        spec["storage"] = "journal"
    if match["together"]:
        spec["finish_together"] = True
    if match["rung_images"]:
        if not match["halving"]:
            raise SystemExit(f"run {name!r}: -vN needs a halving (-pareto, -accuracy): without one there are no rungs")
        spec["rung_valid_images"] = int(match["rung_images"])
    if match["select"]:
        if match["halving"] != "pareto":
            raise SystemExit(f"run {name!r}: -sf and -sn are rules of the Pareto cut (-pareto)")
        spec["select"] = {"f": "fronts", "n": "nsga2"}[match["select"]]
    if match["factor"]:
        if not match["halving"] or int(match["factor"]) < 2:
            raise SystemExit(f"run {name!r}: -fF needs a halving (-pareto, -accuracy) and F >= 2")
        spec["reduction_factor"] = int(match["factor"])
    return spec


def search(name: str, seed: int, trials: int, args: argparse.Namespace, work: Path) -> dict:
    from engine_floor import run_work
    from nasutil.cli.search_command import main as search_main

    spec = parse_run(name)
    run_dir = work / f"{name.replace('@', '-t')}-s{seed}"
    study_name = f"{name.replace('@', '-t')}-s{seed}"
    overrides = [f"study_name={study_name}", f"hydra.run.dir={run_dir}", f"n_trials={trials}", f"seed={seed}",
                 "prune=none", "evaluator=none", "plots=false", "progress=false", "trainer=torch",
                 f"trainer.dataset={args.dataset}", f"trainer.epochs={args.epochs}",
                 f"trainer.batch_size={args.batch_size}", f"trainer.population={spec['population']}",
                 f"halving={spec['halving']}", *args.settings]
    if "round_size" in spec:
        overrides.append(f"trainer.round_size={spec['round_size']}")
    if "lead_rounds" in spec:
        overrides.append(f"trainer.lead_rounds={spec['lead_rounds']}")
    if "ahead" in spec:
        overrides.append(f"trainer.ahead={spec['ahead']}")
    if "warm_up_steps" in spec:
        overrides.append(f"trainer.warm_up_steps={spec['warm_up_steps']}")
    if "eval_batch" in spec:
        overrides.append(f"trainer.eval_batch={spec['eval_batch']}")
    if "host_turns" in spec:
        overrides.append(f"trainer.host_turns={spec['host_turns']}")
    if "ask_ahead" in spec:  # how many trials may wait for their first result (null: no limit)
        overrides.append(f"halving.ask_ahead={'null' if spec['ask_ahead'] is None else spec['ask_ahead']}")
    if "prune_fidelity" in spec:  # with a prune policy in --settings that takes it (dominated_throughput)
        overrides.append(f"prune.fidelity={spec['prune_fidelity']}")
    if "finish_together" in spec:  # the last members in proportion to the steps they have left
        overrides.append(f"trainer.finish_together={str(spec['finish_together']).lower()}")
    if "rung_valid_images" in spec:  # rungs validated on part of the split
        overrides.append(f"trainer.rung_valid_images={spec['rung_valid_images']}")
    if "storage" in spec:  # the study in Optuna's journal file instead of SQLite
        overrides.append(f"storage={spec['storage']}")
    if "select" in spec:  # which candidates at a rung go on
        overrides.append(f"halving.select={spec['select']}")
    if "reduction_factor" in spec:  # two rungs, as the defaults have: at 1/F^2 and 1/F of the training
        factor = spec["reduction_factor"]
        overrides += [f"halving.reduction_factor={factor}", f"halving.min_fraction={1 / factor ** 2:.6g}"]
    if spec["eager"]:  # a few trials rate the eager step: representative ones, not the predicted-fastest anchors
        overrides += ["trainer.graphs=false", "anchors=0"]
    os.environ["NASUTIL_CACHE_DIR"] = str(work / f"cache-{study_name}")  # each run measures its own survivors
    began, started = datetime.datetime.now(), time.perf_counter()  # the study stamps its trials by this clock
    code = search_main(overrides)
    wall = time.perf_counter() - started
    study = run_study(run_dir, study_name, code)
    finished = [t for t in study.trials if t.state.is_finished() and not t.user_attrs.get("surplus")]
    done = [t for t in finished if t.state == optuna.trial.TrialState.COMPLETE and "accuracy" in t.user_attrs]
    ended = [t for t in finished if t.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)]
    starts = [t.datetime_start for t in ended if t.datetime_start]
    ends = [t.datetime_complete for t in ended if t.datetime_complete]
    span = (max(ends) - min(starts)).total_seconds() if starts and ends else float("nan")
    cut = [t for t in ended if str(t.user_attrs.get("prune_policy", "")).startswith("halving:")]
    summary_file = run_dir / "summary.json"
    summary = json.loads(summary_file.read_text()) if summary_file.exists() else {}
    activity = summary.get("trainer_activity")
    return {"run": name, **spec, "seed": seed, "trials_asked": trials, "exit_code": code, "wall_s": wall,
            "span_s": span, "finished": len(ended), "trained": len(done), "cut_at_rung": len(cut),
            "pruned_before_training": sum(t.user_attrs.get("prune_stage") == "before_training" for t in ended),
            "failed": sum(t.state == optuna.trial.TrialState.FAIL for t in study.trials),
            "failures": [failure(t) for t in study.trials if t.state == optuna.trial.TrialState.FAIL],
            "epochs_trained": sum(float(t.user_attrs.get("training_epochs") or 0.0) for t in ended),
            "candidates_per_gpu_hour": len(ended) / wall * 3600,
            "candidates_per_gpu_hour_span": len(ended) / span * 3600 if span == span and span > 0 else None,
            "best_accuracy": max((t.user_attrs["accuracy"] for t in done), default=None),
            "points": [(t.values[0], t.values[1]) for t in done], "numbers": [t.number for t in done],
            "point_archs": [t.user_attrs.get("arch") for t in done],
            "trial_seconds": trial_seconds(done),
            "measured": sum(t.user_attrs.get("hardware_source") == "measured" for t in done),
            "measurements": [_measurement(t) for t in done if t.user_attrs.get("hardware_source") == "measured"],
            "population_activity": activity, "work": run_work(ended), "timeline": timeline(ended, activity),
            "hardware": summary.get("hardware"), "phases_s": summary.get("phases_s"),
            "measuring_activity": summary.get("measuring_activity"),
            "before_first_trial_s": (min(starts) - began).total_seconds() if starts else None,
            "after_last_trial_s": wall - (max(ends) - began).total_seconds() if ends else None}


def failure(trial) -> str:
    """Why a trial failed, as the search stored it: its number, the reason's first line, cut short, and the
    innermost frame of its traceback where one is stored (where the error was raised)."""
    reason = str(trial.user_attrs.get("fail_reason") or trial.system_attrs.get("fail_reason") or "no reason stored")
    where = [line for line in str(trial.user_attrs.get("fail_traceback") or "").splitlines()
             if line.strip().startswith("File ")]
    return f"{trial.number}: {reason.splitlines()[0][:240] if reason.strip() else ''}" + \
        (f" ({where[-1].strip()[:160]})" if where else "")


def timeline(ended: list, activity: dict | None) -> dict:
    """Where a run's span went: each ended trial's start and end in seconds from the first start (its number,
    epochs trained, and whether it was measured), and the population's first join and last leave on that clock:
    the span before the first join and after the last leave is the search's alone. `first_reservation_s` places
    the population's own clock (its `membership_timeline` and each trial's `trial_phases`) on this one."""
    timed = [t for t in ended if t.datetime_start and t.datetime_complete]
    if not timed:
        return {}
    origin = min(t.datetime_start for t in timed).timestamp()
    trials = [[t.number, round(t.datetime_start.timestamp() - origin, 3),
               round(t.datetime_complete.timestamp() - origin, 3), round(float(t.user_attrs.get("training_epochs") or 0.0), 4),
               t.user_attrs.get("hardware_source") == "measured"] for t in sorted(timed, key=lambda t: t.number)]
    out: dict = {"trials": trials}
    if activity and activity.get("first_join_at") is not None:
        out["first_join_s"] = round(activity["first_join_at"] - origin, 3)
        out["last_leave_s"] = round(activity["last_leave_at"] - origin, 3)
        first_reservation = activity["first_join_at"] - activity.get("first_join_after_s", 0.0)
        out["first_reservation_s"] = round(first_reservation - origin, 3)
    return out


def run_study(run_dir: Path, study_name: str, code: int) -> optuna.Study:
    """A finished run's study, from its SQLite file or (`-j`) its journal."""
    journal, database = run_dir / "journal.log", run_dir / "study.db"
    if journal.exists():
        from optuna.storages.journal import JournalFileBackend

        storage: optuna.storages.BaseStorage | str = optuna.storages.JournalStorage(JournalFileBackend(str(journal)))
    elif database.exists():
        storage = f"sqlite:///{database}"
    else:
        raise SystemExit(f"run {study_name}: the search stopped before it made its study (exit code {code})")
    return optuna.load_study(study_name=study_name, storage=storage)


def trial_seconds(done: list) -> list[tuple[str, float]]:
    """Each trained trial's cell and its seconds from start to end, for the plain loop to train again: a repeat
    of a cell already trained ends without training (`training_epochs` 0, a few milliseconds), and a loop's
    seconds over those would rate nothing."""
    return [(t.user_attrs.get("arch"), (t.datetime_complete - t.datetime_start).total_seconds()) for t in done
            if t.datetime_start and t.datetime_complete and float(t.user_attrs.get("training_epochs") or 0.0) > 0]


def _measurement(t: optuna.trial.FrozenTrial) -> dict:
    """A measured survivor's reading, the SM clock and spread it was read at, and which measurement batch
    read it (and where in it)."""
    return {"arch": t.user_attrs.get("arch"),
            **{key: t.user_attrs.get(f"measured_{key}") for key in ("throughput_per_s", "sm_clock_mhz", "latency_cv",
                                                                    "batch", "in_batch")}}


def order_for(runs: list[str], index: int) -> list[str]:
    """The runs in turn: forwards for even seeds, backwards for odd ones."""
    return list(runs) if index % 2 == 0 else list(reversed(runs))


def summarise(results: list[dict], baseline: str, eager: str | None) -> list[dict]:
    """Each run with its hypervolume (throughput scaled by its seed's largest) and its ratios to the seed's
    baseline (candidates per hour, hypervolume) and eager run (candidates per hour over the trials' span)."""
    rows = []
    for seed in sorted({r["seed"] for r in results}):
        group = [r for r in results if r["seed"] == seed]
        top = max((p[1] for r in group for p in r["points"]), default=1.0) or 1.0
        base = next((r for r in group if r["run"] == baseline), None)
        slow = next((r for r in group if r["run"] == eager), None) if eager else None
        for r in group:
            r["hypervolume"] = hypervolume_2d([(a, t / top) for a, t in r["points"]], (0.0, 0.0))
        one_reading = on_one_reading(group, base)
        for r in group:
            row = {k: v for k, v in r.items()
                   if k not in ("points", "numbers", "trial_seconds", "plain_loop", "plain_sample", "measurements",
                                "work", "engine_member_ms", "point_archs", "timeline")}
            activity = r.get("population_activity") or {}
            row["mean_together"], row["device_busy"] = activity.get("mean_together"), activity.get("device_bound")
            row["mean_paused"], row["mean_unjoined"] = activity.get("mean_paused"), activity.get("mean_unjoined")
            row["mean_turn_wait_ms"] = activity.get("mean_turn_wait_ms")
            row["mean_paused_wait_ms"] = activity.get("mean_paused_wait_ms")
            row["quiet_s"] = activity.get("quiet_s")  # held quiet for measurements of survivors
            for key in ("members_time_mean", "first_join_after_s", "membership_span_s"):  # members joined over time
                row[key] = activity.get(key)
            row.update(phase_means(activity.get("trial_phases") or {}))
            for phase in HOST_PHASES:  # a candidate's host work, phase by phase (the trainer's HostTimes)
                row[f"mean_{phase}_ms"] = activity.get(f"mean_{phase}_ms")
            if base is not None:
                row["speedup_over_baseline"] = r["candidates_per_gpu_hour"] / base["candidates_per_gpu_hour"]
                row["hypervolume_ratio"] = r["hypervolume"] / base["hypervolume"] if base["hypervolume"] else None
                if one_reading:
                    row["hypervolume_ratio_one_reading"] = one_reading[r["run"]] / one_reading[base["run"]]
                row.update(survivors_against(r, base))
                row.update(against_the_engine(r, base))
            if slow is not None and slow.get("candidates_per_gpu_hour_span"):
                row["speedup_over_eager"] = r["candidates_per_gpu_hour"] / slow["candidates_per_gpu_hour_span"]
            if slow is not None and slow.get("plain_loop"):
                plain_rate = 3600 / statistics.fmean(p["seconds"] for p in slow["plain_loop"])
                row["speedup_over_plain_loop"] = r["candidates_per_gpu_hour"] / plain_rate
            if base is not None and base.get("plain_sample"):
                row["plain_over_baseline"], plain_rate = plain_search_rate(base)
                row["speedup_over_plain_search"] = r["candidates_per_gpu_hour"] / plain_rate
            rows.append(row)
    return rows


#: a trial's stretches in a population (`trial_phases`), each from one phase to the next: waiting for a host turn and
#: building, waiting for a place, preparing (to the device, warm-up, capture), waiting to join, training among the
#: others, and after leaving (the result, the test forward, the trainer's return)
PHASE_STRETCHES = (("build", "asked", "built"), ("wait_for_place", "built", "reserved"),
                   ("prepare", "reserved", "prepared"), ("wait_to_join", "prepared", "joined"),
                   ("train", "joined", "left"), ("after_leaving", "left", "returned"))


def phase_means(phases: dict[str, dict[str, float]]) -> dict[str, float]:
    """Each stretch's mean seconds over the trials that went through both its ends (`mean_STRETCH_s`): where a
    population's trials spent their time, so that a population short of members says whether its trials were
    waiting for a place, being prepared or waiting to join."""
    means = {}
    for name, start, end in PHASE_STRETCHES:
        spans = [p[end] - p[start] for p in phases.values() if start in p and end in p]
        if spans:
            means[f"mean_{name}_s"] = statistics.fmean(spans)
    return means


def on_one_reading(group: list[dict], base: dict | None) -> dict[str, float]:
    """Each run's hypervolume with every cell the baseline measured scored on the baseline's reading: survivors
    measured beside a population read 0.89-1.14x of one at a time's readings of the same cells (the
    `survivor_ratio_*` columns), so the plain ratio mixes what the search found with how its survivors read.
    Empty without a baseline, or for runs that did not record their points' cells."""
    if base is None or any(len(r.get("point_archs") or []) != len(r["points"]) for r in group):
        return {}
    reading = {m["arch"]: m["throughput_per_s"] for m in base.get("measurements") or [] if m.get("throughput_per_s")}
    points = {r["run"]: [(a, reading.get(arch, t)) for (a, t), arch in zip(r["points"], r["point_archs"])]
              for r in group}
    top = max((t for pts in points.values() for _, t in pts), default=1.0) or 1.0
    volumes = {run: hypervolume_2d([(a, t / top) for a, t in pts], (0.0, 0.0)) for run, pts in points.items()}
    return volumes if volumes.get(base["run"]) else {}


def against_the_engine(run: dict, base: dict) -> dict:
    """Over the trials' spans (start-up left out): the run's rate over the baseline's, and the most it could
    read if it trained at the engine's floor (`engine_floor.py`), the baseline as it ran; empty without the
    floor (`--engine-floor`)."""
    if not (run.get("span_s") and base.get("span_s") and run.get("engine_floor_s")):
        return {}
    base_rate = base["finished"] / base["span_s"]
    return {"speedup_over_baseline_span": run["finished"] / run["span_s"] / base_rate,
            "engine_bound_over_baseline": run["finished"] / run["engine_floor_s"] / base_rate}


def survivors_against(run: dict, base: dict) -> dict:
    """A run's measured survivors against the baseline's readings of the same cells (the baseline one at a
    time, its survivors measured on a device nothing else trains on): how many cells both measured, the
    range of throughput ratios, and how many agree within 1%. Empty where they share none."""
    if run is base:
        return {}
    alone = {m["arch"]: m["throughput_per_s"] for m in base.get("measurements") or [] if m.get("throughput_per_s")}
    ratios = [m["throughput_per_s"] / alone[m["arch"]] for m in run.get("measurements") or []
              if m.get("throughput_per_s") and m.get("arch") in alone]
    if not ratios:
        return {}
    return {"survivors_shared": len(ratios), "survivor_ratio_min": min(ratios), "survivor_ratio_max": max(ratios),
            "survivors_within_1pct": sum(abs(x - 1) <= 0.01 for x in ratios)}


def plain_search_rate(base: dict) -> tuple[float, float]:
    """The baseline's search as a plain eager loop would run it, one cell after another: the cells the
    loop trained took `ratio` times their trials' seconds, so the baseline's span (its trials back to
    back) times `ratio` is the loop's time for all of them. Returns the ratio and candidates per hour."""
    sample = base["plain_sample"]
    ratio = sum(p["seconds"] for p in sample) / sum(p["trial_seconds"] for p in sample)
    return ratio, base["finished"] / (base["span_s"] * ratio) * 3600


def write_csv(rows: list[dict], path: Path) -> None:
    columns = ["run", "seed", "population", "eager", "halving", "trials_asked", "finished", "trained", "cut_at_rung",
               "pruned_before_training", "failed", "wall_s", "span_s", "candidates_per_gpu_hour",
               "candidates_per_gpu_hour_span", "speedup_over_baseline", "speedup_over_eager",
               "speedup_over_plain_loop", "plain_over_baseline", "speedup_over_plain_search", "best_accuracy",
               "hypervolume", "hypervolume_ratio", "hypervolume_ratio_one_reading", "epochs_trained", "measured",
               "mean_together", "device_busy", "mean_paused", "mean_unjoined", "mean_turn_wait_ms", "mean_paused_wait_ms",
               "quiet_s",
               *(f"mean_{phase}_ms" for phase in HOST_PHASES), "survivors_shared", "survivor_ratio_min",
               "survivor_ratio_max", "survivors_within_1pct", "host_pace_before_ms", "host_pace_after_ms",
               "engine_steps", "engine_floor_s", "engine_alone_floor_s", "engine_share", "engine_together_gain",
               "engine_alone_ms_median", "engine_clock_gap", "speedup_over_baseline_span",
               "engine_bound_over_baseline", "members_time_mean", "first_join_after_s", "membership_span_s",
               *(f"mean_{name}_s" for name, _, _ in PHASE_STRETCHES)]
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(columns)
        for row in rows:
            writer.writerow([round(v, 4) if isinstance(v, float) else v for v in (row.get(c) for c in columns)])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", nargs="+", default=["p1", "p1-eager", "p16-pareto"])
    parser.add_argument("--baseline", default="p1", help="the run the others are compared with")
    parser.add_argument("--trials", type=int, default=32)
    parser.add_argument("--eager-trials", type=int, default=2, help="trials of the eager runs (25 s a candidate)")
    parser.add_argument("--dataset", default="fashion_mnist")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seeds", type=int, nargs="+", default=[11])
    parser.add_argument("--settings", nargs="*", default=[], help="more key=value settings for every run")
    parser.add_argument("--warm-up", type=int, default=4, help="trials of an unrecorded search first (0: none)")
    parser.add_argument("--plain-loop", action="store_true",
                        help="after each eager run, train its cells again with benchmarks/plain_eager.py (the "
                             "independent clock for the eager rate)")
    parser.add_argument("--plain-sample", type=int, default=0, metavar="K",
                        help="train K of the baseline's cells again with the plain loop, which rates the "
                             "baseline's whole search as a plain eager loop would run it")
    parser.add_argument("--engine-floor", action="store_true",
                        help="after each run, replay its training on the engine alone (engine_floor.py): the "
                             "share of its span the engine needs, and the most it could read over the baseline")
    parser.add_argument("--name", default="population_search")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--from-runs", type=Path, nargs="+", metavar="RUNS_JSONL",
                        help="run nothing: summarise the runs of these files (seeds run in separate calls)")
    args = parser.parse_args()
    for run in args.runs:
        try:
            parse_run(run)
        except SystemExit as exc:
            parser.exit(2, f"population_search.py: error: {exc}\n")
        if args.runs.count(run) > 1:
            parser.exit(2, f"population_search.py: error: run {run!r} is named twice: name its repeat {run}.2\n")
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    if args.from_runs:
        results = [json.loads(line) for path in args.from_runs for line in path.read_text().splitlines() if line]
        args.seeds = sorted({r["seed"] for r in results})
        args.runs = [name for name in args.runs if any(r["run"] == name for r in results)]
    else:
        results = run_all(args)
    report(args, results)
    return 0


def run_all(args: argparse.Namespace) -> list[dict]:
    """Every run of every seed, in the alternating order, each appended to NAME_runs.jsonl as it ends."""
    work = Path(tempfile.mkdtemp(prefix="population-search-"))
    if args.warm_up:
        search("p1", 0, args.warm_up, args, work / "warm-up")
    results = []
    for index, seed in enumerate(args.seeds):
        for name in order_for(args.runs, index):
            spec = parse_run(name)
            trials = spec["budget"] or (args.eager_trials if spec["eager"] else args.trials)
            before = host_pace_ms()
            results.append(search(name, seed, trials, args, work))
            results[-1]["host_pace_before_ms"], results[-1]["host_pace_after_ms"] = before, host_pace_ms()
            if spec["eager"] and args.plain_loop:
                results[-1]["plain_loop"] = plain_loop(results[-1], args)
            if name == args.baseline and args.plain_sample:
                results[-1]["plain_sample"] = plain_loop(results[-1], args, sample=args.plain_sample)
            if getattr(args, "engine_floor", False) and not spec["eager"]:
                results[-1].update(engine_floor(results[-1], args))
            with (args.out / f"{args.name}_runs.jsonl").open("a") as fh:  # kept if a later run is cut short
                fh.write(json.dumps({**results[-1], "settings": args.settings, "batch_size": args.batch_size}) + "\n")
            r = results[-1]
            print(json.dumps({k: r[k] for k in ("run", "seed", "wall_s", "finished", "trained", "cut_at_rung",
                                                  "failed", "candidates_per_gpu_hour")}), flush=True)
            report(args, results, echo=False)  # NAME.json and .csv of the runs so far: kept if the call is cut short
    return results


def plain_loop(run: dict, args: argparse.Namespace, sample: int | None = None) -> list[dict]:
    """A run's cells (all, or `sample` of them drawn with the run's seed) trained again by a textbook
    loop, each beside the seconds its trial took."""
    import random

    import torch

    from plain_eager import load_split, train_plain

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data = load_split(args.dataset, device)
    cells = run["trial_seconds"]
    if sample is not None:
        cells = random.Random(run["seed"]).sample(cells, min(sample, len(cells)))
    timed = []
    for arch, trial_seconds in cells:
        result = train_plain(arch, data, batch_size=args.batch_size, epochs=args.epochs, seed=run["seed"],
                             device=device)
        timed.append({**result, "trial_seconds": trial_seconds})
        print(json.dumps({"plain_loop": arch, "seconds": round(result["seconds"], 2),
                          "trial_seconds": round(trial_seconds, 2)}), flush=True)
    return timed


def engine_floor(run: dict, args: argparse.Namespace) -> dict:
    """The engine's own time for the run's training, replayed right after it on the same device."""
    from engine_floor import in_steps, summary, time_engine

    timings = time_engine(run["work"], run["population"], args.dataset, args.batch_size, run["seed"],
                          data_dir=os.environ.get("NASUTIL_DATA_DIR", "data"))
    result = summary(in_steps(run["work"], timings["batches"]), timings, run["population"], run["span_s"])
    print(json.dumps({"engine_floor": run["run"], "seed": run["seed"], "floor_s": round(result["engine_floor_s"], 2),
                      "span_s": round(run["span_s"], 2), "clock_gap": round(result["engine_clock_gap"], 4)}),
          flush=True)
    return result


def plain(value):
    """A setting as JSON takes it: paths (alone or in a list) as text."""
    if isinstance(value, list):
        return [plain(v) for v in value]
    return str(value) if isinstance(value, Path) else value


def report(args: argparse.Namespace, results: list[dict], echo: bool = True) -> None:
    eager = next((r for r in args.runs if parse_run(r)["eager"]), None)
    rows = summarise(results, args.baseline, eager)
    by_run = {}
    for name in args.runs:
        mine = [r for r in rows if r["run"] == name]
        by_run[name] = {key: statistics.fmean(r[key] for r in mine if r.get(key) is not None)
                        for key in ("candidates_per_gpu_hour", "speedup_over_baseline", "speedup_over_eager",
                                    "speedup_over_plain_loop", "speedup_over_plain_search", "hypervolume_ratio") if any(r.get(key) is not None for r in mine)}
        for key in ("hypervolume_ratio", "hypervolume_ratio_one_reading"):
            by_run[name][f"worst_{key}"] = min((r[key] for r in mine if r.get(key) is not None), default=None)
        by_run[name]["failed"] = sum(r["failed"] for r in mine)
    summary = {"settings": {k: plain(v) for k, v in vars(args).items()}, "runs": rows,
               "plain_loop": {f"{r['run']}/s{r['seed']}": r["plain_loop"] for r in results if r.get("plain_loop")},
               "plain_sample": {f"{r['run']}/s{r['seed']}": r["plain_sample"] for r in results if r.get("plain_sample")},
               "points": {f"{r['run']}/s{r['seed']}": r["points"] for r in results}, "by_run": by_run}
    (args.out / f"{args.name}.json").write_text(json.dumps(summary, indent=1))
    write_csv(rows, args.out / f"{args.name}.csv")
    if echo:
        print(json.dumps(by_run, indent=1))


if __name__ == "__main__":
    raise SystemExit(main())
