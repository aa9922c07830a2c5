"""Measure the CNN survey's plan (survey.yaml) and write `survey.csv` plus per-layer CSVs into `out`.

Every measurement goes through nasutil's evaluator and its SQLite cache in `out/cache.sqlite`, so a
run that is cut short resumes where it stopped, and the CSVs are always rewritten from everything
measured so far.
"""

from __future__ import annotations

import csv
from pathlib import Path

import hydra
from omegaconf import DictConfig

from nasutil.evaluator.cache import MeasurementCache
from nasutil.evaluator.candidate import Candidate
from nasutil.evaluator.config import MeasureConfig
from nasutil.evaluator.evaluator import Evaluator
from nasutil.evaluator.measurement import Measurement

COLUMNS = ("space", "arch", "status", "error", "device_name", "dtype", "batch_size", "mode", "input_size", "params",
           "flops_per_image", "latency_ms", "latency_cv", "throughput_per_s", "achieved_tflops", "peak_tflops",
           "utilization", "sm_clock_mhz", "noisy", "driver_version", "torch_version")


def plan(cfg: DictConfig) -> list[tuple[MeasureConfig, list[str]]]:
    """(configuration, models) pairs in the order they are measured: cheap modes first."""
    steps = []
    dtypes = [(cfg.dtype, list(cfg.models))]
    if cfg.get("extra_dtype"):
        dtypes.append((cfg.extra_dtype, list(cfg.extra_dtype_models)))
    for mode in cfg.modes:
        for dtype, models in dtypes:
            for batch in cfg.batch_sizes:
                if mode == "compile" and batch not in cfg.compile_batch_sizes:
                    continue
                config = MeasureConfig(device=cfg.device, dtype=dtype, batch_size=int(batch), mode=mode,
                                       counters=bool(cfg.counters), num_classes=1000)
                steps.append((config, models))
    return steps


def flat(m: Measurement) -> dict:
    row = m.to_dict(with_layers=False)
    out = {k: row.get(k) for k in COLUMNS}
    out.update({f"counter_{k}": v for k, v in (row.get("counters") or {}).items()})
    return out


def write_csv(path: Path, rows: list[dict]) -> None:
    keys = list(dict.fromkeys(k for row in rows for k in row))
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)


@hydra.main(config_path=".", config_name="survey", version_base=None)
def main(cfg: DictConfig) -> None:
    out = Path(hydra.utils.to_absolute_path(cfg.out))
    out.mkdir(parents=True, exist_ok=True)
    cache = MeasurementCache(out / "cache.sqlite")
    rows = []
    for config, models in plan(cfg):
        with Evaluator(config, cache=cache, workers=int(cfg.workers), timeout_s=float(cfg.timeout_s)) as evaluator:
            results = evaluator.measure_many([Candidate.model(m) for m in models], progress=True, total=len(models),
                                             description=f"{config.dtype} batch {config.batch_size} {config.mode}")
            rows += [flat(m) for m in results]
        write_csv(out / "survey.csv", rows)
    layered = MeasureConfig(device=cfg.device, dtype=cfg.dtype, batch_size=int(cfg.per_layer_batch), mode="eager",
                            counters=False, per_layer=True, num_classes=1000)
    with Evaluator(layered, cache=cache, timeout_s=float(cfg.timeout_s)) as evaluator:
        for spec in cfg.per_layer_models:
            m = evaluator.measure(Candidate.model(spec))
            if m.ok and m.layers:
                write_csv(out / f"layers_{spec.split(':', 1)[1]}.csv", [dict(layer) for layer in m.layers])


if __name__ == "__main__":
    main()
