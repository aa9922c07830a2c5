"""Candidate-steps per second when NAS-Bench-201 candidates train together on one GPU, against training
them one at a time in eager PyTorch.

    python benchmarks/cotrain_speed.py --out benchmarks/results/h200/cotrain

For each population size P and batch size B, the same P sampled cells are trained by:
- `reference_eager`: a plain PyTorch loop written here, independent of nasutil, as the trainer ran before
  its steps were captured: torch.optim.SGD (Nesterov), CosineAnnealingLR, fp16 autocast with a
  GradScaler, and a check of the loss on the host every step; one candidate at a time;
- `eager`: the trainer's step (`nasutil.colocate.training_step`) run eagerly, one candidate at a time
  (both eager ways time every candidate of the population unless `--eager-candidates` says fewer);
- `graph_alone`: each candidate's step captured in a CUDA graph, replayed for one candidate at a time;
- `graph_together`: all P graphs replayed round by round, each candidate on its own stream (what a
  population of P trials does).
Inputs are 3x32x32 (CIFAR-10's shape) drawn at random: only speed is measured here
(`cotrain_equivalence.py` compares accuracy on a real dataset). Each rate is timed over `--steps` steps
after `--warm-up` steps, wall clock with the device synchronised, and checked against CUDA events.
Memory per candidate is what the device's free memory lost per candidate once every graph was captured
and the compile children had ended (`reserved_per_candidate_mb`: what this process's allocator reserved).
`--compile` compiles the graph populations' candidates by Inductor first (`trainer.compile=true`: child
processes fill the compile cache side by side, then each candidate compiles and is captured); the same
population uncompiled is then timed together too (`plain_graph_together`), and `prepare_s` is the wall
time from the candidates' creation to every graph captured. Writes NAME.json and NAME.csv, and NAME.jsonl
row by row (`--name`: cotrain_speed, or cotrain_speed_compiled with `--compile`).
"""

from __future__ import annotations

import argparse
import csv
import gc
import json
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from nasutil import get_space
from nasutil.colocate.compile_cache import close_shared_warmer
from nasutil.search.trainers.torch_trainer import TorchTrainer, _Run


class Quiet:
    def report(self, step: int, accuracy: float) -> None:
        pass


def timed(fn, steps: int, streams=()) -> tuple[float, float]:
    """Seconds for `steps` calls of fn, by the wall clock (device synchronised) and by CUDA events (the
    end event waits for the `streams` that fn's work runs on)."""
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    start.record()
    for _ in range(steps):
        fn()
    for stream in streams:
        torch.cuda.current_stream().wait_stream(stream)
    end.record()
    torch.cuda.synchronize()
    return time.perf_counter() - t0, start.elapsed_time(end) / 1e3


def models(archs: list[str], seed: int) -> list[torch.nn.Module]:
    space, out = get_space("nb201"), []
    for n, arch in enumerate(archs):
        torch.manual_seed(seed * 100_003 + n)
        out.append(space.build(space.parse(arch), num_classes=10, input_size=32))
    return out


def data(rows: int) -> dict:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(rows, 3, 32, 32, generator=g).cuda()
    y = torch.randint(0, 10, (rows,), generator=g).cuda()
    small = (x[:256], y[:256])
    return {"train": (x, y), "valid": small, "test": small, "num_classes": 10, "input_size": 32, "channels": 3}


def trainer_runs(archs, batch, graphs, dataset, seed, compile: bool = False) -> list[_Run]:
    trainer = TorchTrainer(dataset="digits", batch_size=batch, epochs=1, device="cuda", graphs=graphs, seed=seed,
                           compile=compile)
    return [_Run(trainer, m, 3, Quiet(), n, dataset) for n, m in enumerate(models(archs, seed))]


def prepared_runs(archs, batch, dataset, seed, compile: bool) -> tuple[list[_Run], float]:
    """The population's runs with every step captured (compiled first, where asked), and the seconds that took.
    All runs exist before the first captures, so that their compile children work side by side."""
    start = time.perf_counter()
    runs = trainer_runs(archs, batch, True, dataset, seed, compile)
    for run in runs:
        run.step()
    torch.cuda.synchronize()
    return runs, time.perf_counter() - start


def reference_eager(archs, batch, dataset, seed, warm_up, steps) -> list[tuple[float, float]]:
    """The trainer's eager loop before CUDA-graph steps, written out in plain PyTorch."""
    x, y = dataset["train"]
    out = []
    for model in models(archs, seed):
        model = model.cuda().to(memory_format=torch.channels_last).train()
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)
        schedule = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=warm_up + steps)
        scaler = torch.amp.GradScaler("cuda")
        order = torch.randperm(len(y), device="cuda")
        position = [0]

        def step():
            i = position[0]
            idx = order[i * batch:(i + 1) * batch]
            position[0] += 1
            with torch.autocast("cuda", dtype=torch.float16):
                loss = F.cross_entropy(model(x[idx].contiguous(memory_format=torch.channels_last)), y[idx])
            if not torch.isfinite(loss):
                raise RuntimeError("diverged")
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            schedule.step()

        for _ in range(warm_up):
            step()
        out.append(timed(step, steps))
    return out


def one_at_a_time(runs: list[_Run], warm_up: int, steps: int) -> list[tuple[float, float]]:
    out = []
    for run in runs:
        for _ in range(warm_up):
            run.step()
        out.append(timed(run.step, steps, _streams([run])))
    return out


def _streams(runs: list[_Run]) -> list[torch.cuda.Stream]:
    return [r.step_unit.stream for r in runs if r.step_unit.stream is not None]


def together(runs: list[_Run], warm_up: int, steps: int) -> tuple[float, float]:
    def round_() -> None:
        for run in runs:
            run.step()

    for _ in range(warm_up):
        round_()
    return timed(round_, steps, _streams(runs))


def rate(pairs: list[tuple[float, float]], steps: int) -> dict:
    """Candidate-steps per second over candidates trained one after another, by wall clock and events, and
    each candidate's milliseconds a step (wall clock): candidates differ, so a baseline timed on a few of
    them is not the population's."""
    wall, events = sum(p[0] for p in pairs), sum(p[1] for p in pairs)
    return {"steps_per_s": len(pairs) * steps / wall, "steps_per_s_events": len(pairs) * steps / events,
            "ms_per_step": 1e3 * wall / (len(pairs) * steps),
            "ms_per_candidate": [round(1e3 * p[0] / steps, 3) for p in pairs]}


def write_csv(results: list[dict], path: Path) -> None:
    """One line per population and batch; the compiled columns are empty for plain runs."""
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["population", "batch", "compiled", "reference_eager_steps_per_s", "eager_steps_per_s",
                    "graph_alone_steps_per_s", "graph_together_steps_per_s", "graph_together_steps_per_s_events",
                    "speedup_over_eager", "speedup_over_reference_eager", "memory_per_candidate_mb",
                    "largest_population_projected", "prepare_s", "plain_graph_together_steps_per_s",
                    "speedup_over_plain_together", "eager_candidates"])
        for r in results:
            plain = r.get("plain_graph_together")
            w.writerow([r["population"], r["batch"], r.get("compiled", False), round(r["reference_eager"]["steps_per_s"], 1),
                        round(r["eager"]["steps_per_s"], 1), round(r["graph_alone"]["steps_per_s"], 1),
                        round(r["graph_together"]["steps_per_s"], 1), round(r["graph_together"]["steps_per_s_events"], 1),
                        round(r["speedup_over_eager"], 2), round(r["speedup_over_reference_eager"], 2),
                        round(r["memory_per_candidate_mb"], 1), r["largest_population_projected"],
                        round(r["prepare_s"], 1) if "prepare_s" in r else "",
                        round(plain["steps_per_s"], 1) if plain else "",
                        round(r["speedup_over_plain_together"], 2) if plain else "", r.get("eager_candidates", "")])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--populations", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--batches", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warm-up", type=int, default=5)
    parser.add_argument("--eager-candidates", type=int, default=0,
                        help="candidates timed in the eager ways (the first N of the population; 0: all of them)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compile", action="store_true", help="graph populations compiled by Inductor first")
    parser.add_argument("--name", help="the result files' name")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    name = args.name or ("cotrain_speed_compiled" if args.compile else "cotrain_speed")
    args.out.mkdir(parents=True, exist_ok=True)
    torch.backends.cudnn.benchmark = False
    results = []
    for batch in args.batches:
        dataset = data(batch * (2 * (args.warm_up + args.steps) + 5))  # no epoch ends while timed
        for population in args.populations:
            archs = [a.to_string() for a in get_space("nb201").sample_many(population, seed=args.seed + population)]
            few = archs[:args.eager_candidates or population]
            row = {"population": population, "batch": batch, "steps": args.steps, "eager_candidates": len(few)}
            row["reference_eager"] = rate(reference_eager(few, batch, dataset, args.seed, args.warm_up, args.steps),
                                          args.steps)
            row["eager"] = rate(one_at_a_time(trainer_runs(few, batch, False, dataset, args.seed), args.warm_up,
                                              args.steps), args.steps)
            gc.collect()
            torch.cuda.empty_cache()
            free_before, reserved_before = torch.cuda.mem_get_info()[0], torch.cuda.memory_reserved()
            runs, row["prepare_s"] = prepared_runs(archs, batch, dataset, args.seed, args.compile)
            row["compiled"] = args.compile
            close_shared_warmer()  # the compile children's CUDA contexts are not the candidates' memory
            row["graph_alone"] = rate(one_at_a_time(runs, args.warm_up, args.steps), args.steps)
            used = free_before - torch.cuda.mem_get_info()[0]
            row["reserved_per_candidate_mb"] = (torch.cuda.memory_reserved() - reserved_before) / population / 2**20
            wall, events = together(runs, args.warm_up, args.steps)
            row["graph_together"] = {"steps_per_s": population * args.steps / wall,
                                     "steps_per_s_events": population * args.steps / events,
                                     "ms_per_step": 1e3 * wall / (population * args.steps)}
            total = torch.cuda.get_device_properties(0).total_memory
            row["memory_per_candidate_mb"] = used / population / 2**20
            row["graph_memory_mb"] = statistics.fmean(r.step_unit.graph_bytes for r in runs) / 2**20
            row["largest_population_projected"] = int(0.9 * free_before // max(1, used / population))
            row["device_memory_gb"] = total / 2**30
            base = row["eager"]["steps_per_s"]
            row["speedup_over_eager"] = row["graph_together"]["steps_per_s"] / base
            row["speedup_over_reference_eager"] = row["graph_together"]["steps_per_s"] / row["reference_eager"]["steps_per_s"]
            row["speedup_over_graph_alone"] = row["graph_together"]["steps_per_s"] / row["graph_alone"]["steps_per_s"]
            del runs
            gc.collect()
            torch.cuda.empty_cache()
            if args.compile:  # the same population uncompiled, timed together in the same process
                plain, row["plain_prepare_s"] = prepared_runs(archs, batch, dataset, args.seed, False)
                wall, events = together(plain, args.warm_up, args.steps)
                row["plain_graph_together"] = {"steps_per_s": population * args.steps / wall,
                                               "steps_per_s_events": population * args.steps / events}
                row["speedup_over_plain_together"] = (row["graph_together"]["steps_per_s"]
                                                      / row["plain_graph_together"]["steps_per_s"])
                del plain
                gc.collect()
                torch.cuda.empty_cache()
            results.append(row)
            print(json.dumps(row), flush=True)
            with (args.out / f"{name}.jsonl").open("a") as fh:
                fh.write(json.dumps(row) + "\n")
    summary = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "results": results}
    (args.out / f"{name}.json").write_text(json.dumps(summary, indent=1))
    write_csv(results, args.out / f"{name}.csv")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
