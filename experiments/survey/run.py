"""Measure the CNN survey's plan (survey.yaml) and write `survey.csv` plus per-layer CSVs into `out`.

Every measurement goes through nasutil's evaluator and its SQLite cache in `out/cache.sqlite`, so a
run that is cut short resumes where it stopped, and the CSVs are rewritten from everything measured
so far after each model. The plan runs in phases (`phases`), cheapest first:
  grid     every model at every batch size in eager and cudagraph mode (fp16, bf16 for a subset): survey.csv
  layers   per-layer kernel times of a few models in eager mode: layers_<model>.csv
  compile  torch.compile for a subset at the compile batch sizes: survey_compile.csv
           (tens of seconds of compilation each, so a subset)
"""

from __future__ import annotations

import csv
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import hydra
from omegaconf import DictConfig

from nasutil.errors import fail
from nasutil.evaluator import Candidate, Evaluator, MeasureConfig, Measurement
from nasutil.evaluator.cache import MeasurementCache

COLUMNS = ("space", "arch", "status", "error", "device_name", "dtype", "batch_size", "mode", "input_size", "params",
           "flops_per_image", "latency_ms", "latency_cv", "throughput_per_s", "achieved_tflops", "peak_tflops",
           "utilization", "sm_clock_mhz", "noisy", "driver_version", "torch_version")
PHASES = ("grid", "layers", "compile")


def base_config(cfg: DictConfig, **changes) -> MeasureConfig:
    config = MeasureConfig(device=cfg.device, dtype=cfg.dtype, batch_size=int(cfg.batch_sizes[0]), mode="eager",
                           counters=bool(cfg.counters), num_classes=1000)
    return config.with_(**changes) if changes else config


def grid_configs(cfg: DictConfig, model: str) -> list[MeasureConfig]:
    """One model's grid: its batch sizes, smallest first, in each grid mode and dtype."""
    dtypes = [cfg.dtype] + ([cfg.extra_dtype] if cfg.get("extra_dtype") and model in cfg.extra_dtype_models else [])
    return [base_config(cfg, dtype=dtype, batch_size=int(batch), mode=mode)
            for dtype in dtypes for batch in cfg.batch_sizes for mode in cfg.grid_modes]


def compile_configs(cfg: DictConfig) -> list[MeasureConfig]:
    return [base_config(cfg, batch_size=int(batch), mode="compile") for batch in cfg.compile_batch_sizes]


def write_csv(path: Path, rows: list[dict]) -> None:
    keys = list(dict.fromkeys(k for row in rows for k in row))
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(path)  # a run killed mid-write leaves the previous file whole


def measure_models(evaluator: Evaluator, jobs: list[tuple[str, list[MeasureConfig]]], workers: int,
                   on_done) -> None:
    """Each model's configurations run in turn on one worker; models run on `workers` workers at once."""
    def one(job: tuple[str, list[MeasureConfig]]) -> None:
        model, configs = job
        on_done(model, evaluator.measure_configs(Candidate.model(model), configs))

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, jobs))


class PhaseTable:
    """A phase's measurements in plan order, rewritten to its CSV as models finish."""

    def __init__(self, path: Path, phase: str, models: list[str]) -> None:
        self.path, self.phase = path, phase
        self.order = {m: i for i, m in enumerate(models)}
        self.rows: dict[str, list[dict]] = {}

    def add(self, model: str, results: list[Measurement]) -> None:
        self.rows[model] = [m.to_row(COLUMNS) for m in results]
        failed = [m for m in results if not m.ok]
        mark = f", {len(failed)} failed: {str(failed[0].error)[:100]}" if failed else ""
        print(f"[{self.phase}] {model}: {len(results) - len(failed)}/{len(results)} ok{mark}", file=sys.stderr,
              flush=True)
        ordered = sorted(self.rows.items(), key=lambda kv: self.order[kv[0]])
        write_csv(self.path, [row for _, rows in ordered for row in rows])


@hydra.main(config_path=".", config_name="survey", version_base=None)
def main(cfg: DictConfig) -> None:
    unknown = sorted(set(cfg.phases) - set(PHASES))
    if unknown:
        fail(f"error: unknown phase(s) {unknown}; choose from {list(PHASES)}")
    out = Path(hydra.utils.to_absolute_path(cfg.out))
    out.mkdir(parents=True, exist_ok=True)
    cache = MeasurementCache(out / "cache.sqlite")
    workers = int(cfg.workers)
    for phase in [p for p in PHASES if p in cfg.phases]:
        if phase == "layers":
            measure_layers(cfg, cache, out)
            continue
        models = list(cfg.models if phase == "grid" else cfg.compile_models)
        table = PhaseTable(out / ("survey.csv" if phase == "grid" else "survey_compile.csv"), phase, models)
        jobs = [(m, grid_configs(cfg, m) if phase == "grid" else compile_configs(cfg)) for m in models]
        with Evaluator(base_config(cfg), cache=cache, workers=workers, timeout_s=float(cfg.timeout_s)) as evaluator:
            measure_models(evaluator, jobs, workers, table.add)


def measure_layers(cfg: DictConfig, cache: MeasurementCache, out: Path) -> None:
    layered = base_config(cfg, batch_size=int(cfg.per_layer_batch), counters=False, per_layer=True)
    with Evaluator(layered, cache=cache, timeout_s=float(cfg.timeout_s)) as evaluator:
        for spec in cfg.per_layer_models:
            m = evaluator.measure(Candidate.model(spec))
            print(f"[layers] {spec}: {m.status}{'' if m.ok else ': ' + str(m.error)[:80]}", file=sys.stderr, flush=True)
            if m.ok and m.layers:
                write_csv(out / f"layers_{spec.split(':', 1)[1]}.csv", [dict(layer) for layer in m.layers])


if __name__ == "__main__":
    main()
