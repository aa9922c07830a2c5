"""Measure NAS-Bench-201 cells on the GPU for the utilization study (nb201_study.yaml says what and how long).

Stages, each optional:
  sweep      batch sweeps of a few cells (the heaviest cell and a random sample) -> sweep.csv, saturation.json
  ops        an operator table at the saturating batch, for predicting the cells not measured -> profile_saturated.json
  b256       cells in a fixed random order at batch 256 until the stage's budget runs out -> measured_b256.csv
  saturated  the same at the saturating batch -> measured_saturated.csv
  all        every cell at batch 256 in one pass with the fast settings (`MeasureConfig.fast`)
             -> measured_all_b256.csv, its rate in all_b256_runs.json (with mps=true: measured_all_b256_mps.csv
             and all_b256_mps_runs.json, which analyze.py does not read)
The measuring stages append to their CSVs and skip cells already there, so every run extends the sample
(an interrupted `all` pass resumes where it stopped).
"""

from __future__ import annotations

import contextlib
import csv
import json
import sys
import time
from pathlib import Path

import hydra
import numpy as np
from omegaconf import DictConfig

from nasutil import NasutilError
from nasutil.data.nasbench201 import accuracy_table
from nasutil.errors import fail
from nasutil.evaluator import Candidate, Evaluator, MeasureConfig
from nasutil.evaluator.mps import require_server, shared_device_context
from nasutil.evaluator.sweep import sweep_batch

FIELDS = ("space", "arch", "status", "device_name", "dtype", "batch_size", "mode", "input_size", "latency_ms",
          "latency_cv", "throughput_per_s", "achieved_tflops", "peak_tflops", "utilization", "flops_per_image",
          "params", "sm_clock_mhz", "driver_version", "torch_version", "error")
HEAVIEST = "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|nor_conv_3x3~0|nor_conv_3x3~1|nor_conv_3x3~2|"
STAGES = ("sweep", "ops", "b256", "saturated", "all")


def cell_order(seed: int) -> list[str]:
    """All 15,625 cells in one fixed random order: any prefix is a uniform random sample."""
    cells = sorted(accuracy_table())
    return [cells[i] for i in np.random.default_rng(seed).permutation(len(cells))]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def base_config(cfg: DictConfig, batch_size: int) -> MeasureConfig:
    return MeasureConfig(device=cfg.device, dtype=cfg.dtype, batch_size=batch_size, mode=cfg.mode, counters=False,
                         num_classes=10)


def run_sweep(cfg: DictConfig, out: Path, order: list[str]) -> int:
    cells = [HEAVIEST] + [c for c in order if c != HEAVIEST][: int(cfg.sweep_cells) - 1]
    rows, saturation = [], {}
    with Evaluator(base_config(cfg, 1), timeout_s=float(cfg.timeout_s)) as evaluator:
        for arch in cells:
            result = sweep_batch(evaluator, Candidate("nb201", arch), max_batch=int(cfg.sweep_max_batch))
            saturation[arch] = result.saturation_batch
            rows += [{**p.to_row(FIELDS), "saturation_batch": result.saturation_batch} for p in result.points]
            log(f"[sweep] {arch}: saturates at batch {result.saturation_batch}, "
                f"best {result.best_throughput_per_s or 0:.0f} images/s")
    write_rows(out / "sweep.csv", rows, FIELDS + ("saturation_batch",), append=False)
    found = [b for b in saturation.values() if b]
    batch = int(cfg.saturating_batch or max(found))
    (out / "saturation.json").write_text(json.dumps({"saturating_batch": batch, "per_cell": saturation}, indent=1))
    return batch


def saturating_batch(cfg: DictConfig, out: Path) -> int:
    if cfg.saturating_batch:
        return int(cfg.saturating_batch)
    path = out / "saturation.json"
    if not path.exists():
        fail("error: no saturating batch yet: run the sweep stage or set saturating_batch=N")
    return int(json.loads(path.read_text())["saturating_batch"])


def build_ops(cfg: DictConfig, out: Path, batch: int) -> None:
    """The operator table of nb201's ops at the saturating batch (no networks: analyze.py fits the overlap
    constants on measured cells), as `nasutil profile build --networks 0` builds it."""
    from nasutil.predictor.profile_build import build_profile

    path = out / "profile_saturated.json"
    log(f"[ops] operator table of nb201 at {cfg.dtype}, batch {batch}, {cfg.mode} -> {path}")
    try:
        profile = build_profile(cfg.device, ["nb201"], dtype=cfg.dtype, configs=[(batch, cfg.mode)], networks=0,
                                log=log, progress=False)
    except NasutilError as exc:
        fail(f"error: {exc}")
    profile.save(path)
    log(f"[ops] wrote {path}: {', '.join(f'{t.key} ({len(t.times_us)} ops)' for t in profile.operators)}")


def write_rows(path: Path, rows: list[dict], fields: tuple[str, ...], append: bool) -> None:
    new = not (append and path.exists())
    with path.open("w" if new else "a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
        if new:
            writer.writeheader()
        writer.writerows(rows)


def measured_cells(path: Path) -> set[str]:
    if not path.exists():
        return set()
    with path.open(newline="") as fh:
        return {r["arch"] for r in csv.DictReader(fh) if r.get("status") == "ok"}


def measure_sample(cfg: DictConfig, path: Path, batch: int, order: list[str], budget_s: float, label: str) -> None:
    """Measure the next cells of `order` not yet in `path` until `budget_s` is spent; append them."""
    done_before = measured_cells(path)
    todo = [c for c in order if c not in done_before]
    workers = int(cfg.workers)
    chunk = workers * 8
    started, done = time.perf_counter(), 0
    with Evaluator(base_config(cfg, batch), workers=workers, timeout_s=float(cfg.timeout_s)) as evaluator:
        while todo and time.perf_counter() - started < budget_s:
            part, todo = todo[:chunk], todo[chunk:]
            results = list(evaluator.measure_many([Candidate("nb201", a) for a in part]))
            write_rows(path, [m.to_row(FIELDS) for m in results], FIELDS, append=True)
            done += len(results)
            failed = sum(not m.ok for m in results)
            log(f"[{label}] {done} cells in {time.perf_counter() - started:.0f} s"
                f"{f', {failed} failed in the last {len(part)}' if failed else ''}")
    log(f"[{label}] {len(measured_cells(path))} cells measured in all at batch {batch}")


def measure_all(cfg: DictConfig, out: Path, order: list[str]) -> None:
    """Every cell at batch 256 with the fast settings, in chunks appended as they finish; the rate of
    each run (first cell started to last cell written, worker start-up excluded) goes to
    all_b256_runs.json after every chunk, so an interrupted run still records its part."""
    mps = bool(cfg.get("mps", False))
    suffix = "_mps" if mps else ""  # readings under MPS are kept apart: they read above readings without it
    path = out / f"measured_all_b256{suffix}.csv"
    runs_path = out / f"all_b256{suffix}_runs.json"
    runs = json.loads(runs_path.read_text()) if runs_path.exists() else []
    done_before = measured_cells(path)
    todo = [c for c in order if c not in done_before]
    workers = int(cfg.workers)
    config = base_config(cfg, int(cfg.batch_size)).with_(device_turn="timing" if mps else "whole").fast()
    try:
        config = config.with_(**dict(cfg.get("all_settings") or {}))
    except (TypeError, NasutilError) as exc:  # a field MeasureConfig lacks, or a value it refuses
        fail(f"error: all_settings: {exc}")
    run = {"cells": 0, "seconds": 0.0, "cells_per_s": None, "workers": workers, "failed": 0, "clock_retries": 0,
           "retimed_for_cv": 0, "config": {k: v for k, v in config.to_dict().items() if k != "device"}}
    runs.append(run)
    try:
        with shared_device_context() if mps else contextlib.nullcontext(), \
                Evaluator(config, workers=workers, timeout_s=float(cfg.timeout_s)) as evaluator:
            evaluator.start()
            if mps:
                require_server()
            started = time.perf_counter()
            for at in range(0, len(todo), 256):
                part = todo[at: at + 256]
                results = list(evaluator.measure_many([Candidate("nb201", a) for a in part]))
                write_rows(path, [m.to_row(FIELDS) for m in results], FIELDS, append=True)
                elapsed = time.perf_counter() - started
                run.update(cells=run["cells"] + len(results), seconds=round(elapsed, 1),
                           cells_per_s=round((run["cells"] + len(results)) / elapsed, 2),
                           failed=run["failed"] + sum(not m.ok for m in results),
                           clock_retries=run["clock_retries"] + sum(m.timing.get("clock_retries", 0) for m in results),
                           retimed_for_cv=run["retimed_for_cv"] + sum(bool(m.timing.get("remeasured")) for m in results))
                runs_path.write_text(json.dumps(runs, indent=1))
                log(f"[all] {run['cells']}/{len(todo)} cells in {elapsed:.0f} s ({run['cells_per_s']} cells/s, "
                    f"{run['failed']} failed)")
    except NasutilError as exc:  # no MPS daemon, or workers that missed it: the chunks written so far stay
        fail(f"error: {exc}")
    log(f"[all] {len(measured_cells(path))} cells measured in all")


@hydra.main(config_path=".", config_name="nb201_study", version_base=None)
def main(cfg: DictConfig) -> None:
    unknown = sorted(set(cfg.stages) - set(STAGES))
    if unknown:
        fail(f"error: unknown stage(s) {unknown}; choose from {list(STAGES)}")
    out = Path(hydra.utils.to_absolute_path(cfg.out))
    out.mkdir(parents=True, exist_ok=True)
    order = cell_order(int(cfg.seed))
    batch = run_sweep(cfg, out, order) if "sweep" in cfg.stages else None
    if "ops" in cfg.stages:
        build_ops(cfg, out, batch or saturating_batch(cfg, out))
    if "b256" in cfg.stages:
        measure_sample(cfg, out / "measured_b256.csv", int(cfg.batch_size), order, float(cfg.budget_s.b256), "b256")
    if "saturated" in cfg.stages:
        batch = batch or saturating_batch(cfg, out)
        measure_sample(cfg, out / "measured_saturated.csv", batch, order, float(cfg.budget_s.saturated),
                       f"batch {batch}")
    if "all" in cfg.stages:
        measure_all(cfg, out, order)


if __name__ == "__main__":
    main()
