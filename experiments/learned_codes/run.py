"""Train and score every row of the plan (learned_codes.yaml): dataset x k x code design.

Writes `results/results.csv` (one row a trained code: its three accuracies, FLOPs overhead against
replication, epochs, seconds) and the plots `reconstruction_by_k.png` and `accuracy_vs_overhead.png`.
A dataset whose files are not here is skipped with a note. Runs resume where they stopped.
"""

from __future__ import annotations

import csv
import json
import sys
import time
from pathlib import Path

import hydra
from omegaconf import DictConfig

from nasutil.codes import CodeSpec, RunSettings, train_run
from nasutil.codes.report import plot
from nasutil.errors import NasutilError, fail

HERE = Path(__file__).resolve().parent


def cost_of(settings: RunSettings, folder: Path, data_dir: str) -> dict:
    """The trained code's FLOPs per group against the base's (CPU, one group)."""
    from nasutil.codes import checkpoints
    from nasutil.codes.bases import build_base
    from nasutil.codes.code import Code
    from nasutil.codes.cost import code_cost
    from nasutil.codes.data import load_code_data

    data = load_code_data(settings.dataset, data_dir).limited(1, 1)
    base = build_base(settings.base, *data.shape[:2], data.num_classes)
    tensors, _ = checkpoints.load(folder / "base.safetensors")
    checkpoints.load_into(base, tensors, "base", folder / "base.safetensors")
    code = Code(settings.code, settings.base, data.shape, data.num_classes)
    return code_cost(code, base.eval(), data.shape, data.num_classes).to_dict()


@hydra.main(version_base="1.3", config_path=".", config_name="learned_codes")
def main(cfg: DictConfig) -> None:
    runs, results = Path(cfg.runs), Path(cfg.results)
    results.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    for dataset in cfg.datasets:
        for k in cfg.ks:
            for design, parts in cfg.designs.items():
                spec = CodeSpec(k=int(k), **dict(parts))
                settings = RunSettings(base=cfg.base, dataset=dataset, code=spec, base_epochs=int(cfg.base_epochs),
                                       epochs=int(cfg.epochs), batch_size=int(cfg.batch_size[int(k)]),
                                       seed=int(cfg.seed))
                folder = runs / f"{dataset}_{cfg.base}_k{k}_{design}"
                started = time.perf_counter()
                try:
                    scores = train_run(settings, folder, cfg.data_dir, cfg.device,
                                       progress=lambda stage, done, total, f: print(
                                           f"{folder.name}: {stage} {done}/{total} "
                                           + " ".join(f"{key}={value:.4g}" for key, value in f.items()),
                                           flush=True))
                except NasutilError as exc:
                    print(f"skipped {folder.name}: {exc}", file=sys.stderr)
                    continue
                history = [json.loads(line) for line in (folder / "history.jsonl").read_text().splitlines()]
                rows.append({"dataset": dataset, "base": cfg.base, "k": k, "design": design, **spec.to_dict(),
                             **scores.to_dict(), **cost_of(settings, folder, cfg.data_dir),
                             "epochs": settings.epochs, "train_seconds": round(sum(h["seconds"] for h in history), 1),
                             "this_call_seconds": round(time.perf_counter() - started, 1)})
                write(rows, results)
    if rows:
        plot(rows, results)


def write(rows: list[dict], results: Path) -> None:
    keys = list(dict.fromkeys(k for r in rows for k in r))
    tmp = results / "results.csv.tmp"
    with tmp.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(results / "results.csv")


if __name__ == "__main__":
    try:
        main()
    except NasutilError as exc:
        fail(str(exc))
