"""A population search's training replayed with the same work, its members stepping one a round to the end
against stepping in proportion to the steps they have left once the search asks no more
(`trainer.finish_together`).

    python benchmarks/population_tail.py RUNS.jsonl --run p16-pareto-qa --repeats 2 --out OUT

Two whole searches differ in what their rungs cut: a change in how members step changes when each reaches its
rung, so which candidates train to the end, and that moves a search's rate by more than the change itself.
Here the training one recorded run did (`population_search.py`'s runs file: each trial's architecture, the
share of its epoch it trained, when it was asked) is done again through the trainer's population, the same
work in both arms: each trial's thread calls `TorchTrainer.train` at the second the original trial was asked,
with a reporter that cuts it at the rung where the original was cut, and once the last trial is handed in the
trainer hears `closing()`, as a search's trainer does. Building, warming up, capturing, validating at the rungs
and testing at the end all run as in a search; the sampler, the storage and measuring survivors do not.

The arms alternate (ABBA...), each with a fresh trainer, after one unrecorded replay of the first trials
(cuDNN, the caching allocator, the clocks). Per arm: the span from the first `train` call to the last return,
by the wall clock, and the population's own span from its first join to its last leave (`membership_span_s`),
a second clock; members at once by tenth of that span, and the rounds stepped in proportion. Writes NAME.json.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

from nasutil import get_space
from nasutil.search.controller import StoppedEarly

#: the rungs of the default halving (reduction factor 3 from 1/9): the fractions a run's cut trials stopped at
RUNGS = (1 / 9, 1 / 3)


class CutAt:
    """A reporter that cuts the trial at the rung where the recorded trial was cut (`cut`: the fraction of
    its training; 1.0 or more: trained to the end)."""

    def __init__(self, cut: float) -> None:
        self.cut, self.rungs = cut, RUNGS

    def report_rung(self, fraction: float, accuracy: float) -> None:
        if self.cut < 1.0 and fraction >= self.cut - 1e-3:
            raise StoppedEarly(1, accuracy, "halving:replay", fraction)

    def report(self, step: int, accuracy: float) -> None:
        return None


def recorded_work(run: dict) -> list[tuple[float, str, float]]:
    """(seconds after the first trial was asked, architecture, share of the training) of every trial that
    trained at all, in the order asked: the run's `timeline` of trials (number, start, end, epochs) lined up
    with its `work` (architecture, epochs) of the same trials, both in trial order."""
    trained = [t for t in sorted(run["timeline"]["trials"], key=lambda t: t[0]) if t[3] > 0]
    if len(trained) != len(run["work"]):
        raise SystemExit(f"run {run['run']!r}: {len(trained)} trained trials in its timeline, "
                         f"{len(run['work'])} in its work")
    work = [(float(t[1]), arch, float(epochs)) for t, (arch, epochs) in zip(trained, run["work"])]
    return sorted(work, key=lambda w: w[0])


def replay(work: list[tuple[float, str, float]], population: int, batch_size: int, seed: int, dataset: str,
           finish_together: bool, device: str = "cuda") -> dict:
    """Every trial of `work` trained by one fresh trainer's population, each asked at its recorded second."""
    from nasutil.search.trainers.torch_trainer import TorchTrainer

    trainer = TorchTrainer(dataset=dataset, data_dir=os.environ.get("NASUTIL_DATA_DIR", "data"), epochs=1,
                           batch_size=batch_size, device=device, seed=seed, population=population,
                           finish_together=finish_together)
    trainer._load()  # the data on the device before the clock starts, as a search's first trial finds it
    space = get_space("nb201")
    errors: list[str] = []
    ended: list[float] = []

    def one(number: int, arch: str, share: float) -> None:
        try:
            trainer.train(space, arch, CutAt(share), trial_number=number)
        except StoppedEarly:
            pass
        except Exception as exc:  # counted: a replay with failures is no comparison
            errors.append(f"{number}: {type(exc).__name__}: {exc}")
        ended.append(time.perf_counter())

    threads = []
    started = time.perf_counter()
    for number, (at, arch, share) in enumerate(work):
        delay = started + at - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        thread = threading.Thread(target=one, args=(number, arch, share), name=f"trial-{number}")
        thread.start()
        threads.append(thread)
    trainer.closing()  # the last trial is asked: the search asks no more
    for thread in threads:
        thread.join()
    span = max(ended) - started
    activity = trainer._population.activity() if trainer._population is not None else {}
    return {"finish_together": finish_together, "span_s": span, "errors": errors,
            **{k: activity.get(k) for k in ("membership_span_s", "members_time_mean", "members_by_tenth",
                                            "mean_together", "finishing_rounds", "finishing_from_s", "rounds",
                                            "device_bound")}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", type=Path, help="a population_search.py runs file (NAME_runs.jsonl)")
    parser.add_argument("--run", default="p16-pareto-qa", help="the recorded run to replay")
    parser.add_argument("--repeats", type=int, default=2, help="replays of each arm")
    parser.add_argument("--warm-trials", type=int, default=8, help="trials of the unrecorded first replay")
    parser.add_argument("--dataset", default="fashion_mnist")
    parser.add_argument("--device", default="cuda", help="cpu: to try the replay out (digits, --limit), not to time it")
    parser.add_argument("--limit", type=int, default=None, help="replay only the first LIMIT trials")
    parser.add_argument("--name", default="population_tail")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("population_tail.py needs a CUDA device (or --device cpu to try it out)", file=sys.stderr)
        return 2
    runs = [json.loads(line) for line in args.runs.read_text().splitlines() if line.strip()]
    chosen = [r for r in runs if r["run"] == args.run]
    if not chosen:
        print(f"no run {args.run!r} in {args.runs} (has: {', '.join(r['run'] for r in runs)})", file=sys.stderr)
        return 2
    run = chosen[0]
    work = recorded_work(run)[:args.limit]
    population, batch, seed = int(run["population"]), int(run["batch_size"]), int(run["seed"])
    args.out.mkdir(parents=True, exist_ok=True)
    replay(work[:args.warm_trials], population, batch, seed, args.dataset, True, args.device)  # warm, unrecorded
    arms = []
    for k in range(2 * args.repeats):
        together = (k % 4) in (0, 3)  # ABBA ABBA ...
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        result = replay(work, population, batch, seed, args.dataset, together, args.device)
        arms.append(result)
        print(json.dumps({k: v for k, v in result.items() if k != "members_by_tenth"}), flush=True)
        print(json.dumps(result["members_by_tenth"]), flush=True)
    spans = {flag: [a["span_s"] for a in arms if a["finish_together"] is flag] for flag in (True, False)}
    own = {flag: [a["membership_span_s"] for a in arms if a["finish_together"] is flag] for flag in (True, False)}
    device = torch.cuda.get_device_name() if args.device.startswith("cuda") else args.device
    summary = {"device": device, "torch": torch.__version__, "source": str(args.runs), "run": args.run, "seed": seed,
               "batch_size": batch, "population": population, "trials": len(work),
               "epochs_of_work": round(sum(w[2] for w in work), 4), "arms": arms,
               "median_span_s": {"together": statistics.median(spans[True]),
                                 "apart": statistics.median(spans[False])},
               "median_membership_span_s": {"together": statistics.median(own[True]),
                                            "apart": statistics.median(own[False])},
               "failed": sum(len(a["errors"]) for a in arms)}
    summary["apart_over_together"] = summary["median_span_s"]["apart"] / summary["median_span_s"]["together"]
    (args.out / f"{args.name}.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: summary[k] for k in ("median_span_s", "median_membership_span_s", "apart_over_together",
                                              "failed")}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
