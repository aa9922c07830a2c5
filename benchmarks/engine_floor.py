"""The co-location engine's own time for the training a search did: how close a search comes to the engine.

A population search trains its candidates with the engine that `cotrain_speed.py` times (each candidate's
step one CUDA graph, the members' graphs replayed round by round on their own streams). Everything else in a
search (building, warming up and capturing candidates, validating them, the sampler, the storage, measuring
survivors, a tail with few members left) is time the engine does not need. This module replays the very
training a search did, on the same device, with nothing else:

- `run_work(trials)`: each ended trial's architecture and the epochs it trained (`training_epochs`, a
  fraction for a candidate cut at a rung), in the order the trials were numbered; `in_steps(work, batches)`
  the same in steps;
- `time_engine(work, population, ...)`: every distinct cell's step captured, then replayed alone (ms a
  step) and in groups of `population` cells in trial order, round by round on their own streams (ms a
  member-step in its group); each timed by the wall clock with the device synchronised and by CUDA events;
- `floor_seconds(work, timings, population)`: the seconds the engine needs for the work: each trial's steps at
  its group's ms a member-step (a population) or at its own ms a step alone (one at a time).

A run's `engine_floor_s` over its span is the share of the span the engine would need (`engine_share`; the
rest is the search around it). The floor is an ideal: it counts every member as stepping beside a full group
for all its steps, where a real population fills and empties. Called from
`population_search.py --engine-floor`.
"""

from __future__ import annotations

import gc
import statistics
from collections.abc import Iterable, Sequence

#: steps replayed before timing (cuDNN, the allocator and the clocks settle) and steps timed
WARM_UP_STEPS = 5
TIMED_STEPS = 30


def run_work(trials: Iterable) -> list[tuple[str, float]]:
    """(architecture, epochs trained) of each ended trial that trained at all, by trial number. `trials` are
    Optuna FrozenTrials (or anything with `number` and `user_attrs`)."""
    work = []
    for t in sorted(trials, key=lambda t: t.number):
        arch, epochs = t.user_attrs.get("arch"), float(t.user_attrs.get("training_epochs") or 0.0)
        if arch and epochs > 0:
            work.append((str(arch), epochs))
    return work


def in_steps(work: Sequence[tuple[str, float]], batches: int) -> list[tuple[str, int]]:
    """`work` in steps: epochs times the steps of an epoch (`batches`), at least one step each."""
    return [(arch, max(1, round(epochs * batches))) for arch, epochs in work]


def groups(work: Sequence[tuple[str, int]], population: int) -> list[list[int]]:
    """Indices into `work` in groups of `population`, in trial order (the last group may be smaller)."""
    size = max(1, int(population))
    return [list(range(start, min(start + size, len(work)))) for start in range(0, len(work), size)]


def floor_seconds(work: Sequence[tuple[str, int]], timings: dict, population: int) -> float:
    """Seconds the engine needs for `work`: one at a time, each trial's steps at its cell's ms a step alone;
    a population, at its group's ms a member-step together."""
    if population <= 1:
        return sum(steps * timings["alone_ms"][arch] for arch, steps in work) / 1e3
    member_ms = timings["together_member_ms"]
    if len(member_ms) != len(groups(work, population)):
        raise ValueError(f"timings hold {len(member_ms)} groups, the work makes {len(groups(work, population))}")
    return sum(work[i][1] * ms for group, ms in zip(groups(work, population), member_ms) for i in group) / 1e3


def time_engine(work: Sequence[tuple[str, float]], population: int, dataset: str, batch_size: int, seed: int,
                data_dir: str = "data", warm_up: int = WARM_UP_STEPS, steps: int = TIMED_STEPS) -> dict:
    """Capture each distinct cell of `work` as the trainer does (its dataset's real tensors, its batch size,
    bf16 autocast, channels_last) and time it alone and, for a population, in groups. Returns ms a step alone
    per cell, ms a member-step per group, and the CUDA-event readings of both."""
    import torch

    from cotrain_speed import Quiet, timed
    from nasutil import get_space
    from nasutil.search.trainers.torch_trainer import TorchTrainer, _Run

    gc.collect()  # what the search left cached: the replay captures every cell at once, and a call's fourth
    torch.cuda.empty_cache()  # run ran out of an H100's memory with 40 GiB reserved by the three before
    trainer = TorchTrainer(dataset=dataset, data_dir=data_dir, batch_size=batch_size, epochs=1, device="cuda",
                           seed=seed, compile=False)
    data = trainer._load()
    space = get_space("nb201")
    cells = list(dict.fromkeys(arch for arch, _ in work))
    runs = {}
    try:
        for n, arch in enumerate(cells):
            torch.manual_seed(seed * 100_003 + n)
            model = space.build(space.parse(arch), num_classes=data["num_classes"], input_size=data["input_size"])
            run = _Run(trainer, model, space.in_channels, Quiet(), n, data)
            run.prepare()
            runs[arch] = run
        torch.cuda.synchronize()
        alone, alone_events = {}, {}
        for arch, run in runs.items():
            for _ in range(warm_up):
                run.step_unit.advance()
            wall, events = timed(run.step_unit.advance, steps, [run.step_unit.stream])
            alone[arch], alone_events[arch] = 1e3 * wall / steps, 1e3 * events / steps
        together, together_events = [], []
        if population > 1:
            for group in groups(work, population):
                members = [runs[work[i][0]] for i in group]

                def round_() -> None:
                    for member in members:
                        member.step_unit.advance()

                for _ in range(warm_up):
                    round_()
                wall, events = timed(round_, steps, [m.step_unit.stream for m in members])
                together.append(1e3 * wall / (steps * len(members)))
                together_events.append(1e3 * events / (steps * len(members)))
    finally:
        for run in runs.values():
            run.step_unit.release()
        torch.cuda.synchronize()
        runs.clear()
        gc.collect()
        torch.cuda.empty_cache()
    return {"alone_ms": alone, "alone_ms_events": alone_events, "together_member_ms": together,
            "together_member_ms_events": together_events, "cells": len(cells),
            "batches": len(data["train"][1]) // batch_size}  # the steps of an epoch, as the trainer takes them


def clock_agreement(timings: dict) -> float:
    """The largest relative gap between the wall clock's and CUDA events' readings of any timing: the
    independent check of every figure `time_engine` returns."""
    pairs = [(timings["alone_ms"][a], timings["alone_ms_events"][a]) for a in timings["alone_ms"]]
    pairs += list(zip(timings["together_member_ms"], timings["together_member_ms_events"]))
    return max((abs(w - e) / e for w, e in pairs if e), default=0.0)


def summary(work: Sequence[tuple[str, int]], timings: dict, population: int, span_s: float) -> dict:
    """A run's floor, its share of the span, and the engine's figures behind it."""
    floor = floor_seconds(work, timings, population)
    alone_floor = floor_seconds(work, timings, 1)
    return {"engine_floor_s": floor, "engine_alone_floor_s": alone_floor,
            "engine_share": floor / span_s if span_s and span_s == span_s else None,
            "engine_together_gain": alone_floor / floor if floor else None,
            "engine_steps": sum(steps for _, steps in work),
            "engine_alone_ms_median": statistics.median(timings["alone_ms"].values()) if timings["alone_ms"] else None,
            "engine_member_ms": timings["together_member_ms"],
            "engine_clock_gap": clock_agreement(timings)}
