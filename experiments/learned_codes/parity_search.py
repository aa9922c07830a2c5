"""Search the parity model of a code for GPU cost, against the parity model that copies the base.

1. The baseline (the parity-models design as published): a ResNet-18 base on Fashion-MNIST, the sum
   encoder, the subtraction decoder and a parity model of the base's own architecture, trained by
   `nasutil codes train` (`runs/copy`).
2. The search: `workers` nasutil-search processes on one journal (`trainer=codes`), for `search_seconds`,
   every candidate an architecture of `search_space` trained as the parity model behind the same
   frozen base, encoder and decoder, for the same epochs; objectives degraded-mode accuracy (validation)
   and predicted throughput; prune-before-train on.
3. Cost, measured: every trained parity network and the baseline's, `cost_batch` parity queries, fp16,
   CUDA graph, timed by the evaluator's window timer and by a plain replay loop in the same process.
4. The pick: the cheapest trained parity model whose test degraded-mode accuracy is within
   `tolerance_points` of the baseline's, retrained as a `codes train` run (`runs/searched`).
5. Serving on one GPU (`nasutil.codes.serving`): the base alone, replicated, and with each code
   (base and parity path co-located by streams), one output per group unavailable at random.

Writes results/parity_search/{trials.csv, summary.json, serving.csv, front.png}.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import hydra
from omegaconf import DictConfig

from nasutil.codes import CodeSpec, RunSettings, train_run
from nasutil.errors import NasutilError, fail

STUDY = "parity-search"


def settings_for(cfg: DictConfig, parity: str) -> RunSettings:
    return RunSettings(base=cfg.base, dataset=cfg.dataset, code=CodeSpec(k=int(cfg.k), encoder=cfg.encoder,
                       decoder="subtract", parity=parity), base_epochs=int(cfg.base_epochs), epochs=int(cfg.epochs),
                       batch_size=int(cfg.batch_size), seed=int(cfg.seed))


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def search(cfg: DictConfig, runs: Path, base_file: Path) -> Path:
    """Run the workers until the deadline; returns the journal."""
    base_dir = runs / "search_base"
    base_dir.mkdir(parents=True, exist_ok=True)
    shared = base_dir / f"{cfg.dataset}-{cfg.base}-s{int(cfg.seed)}.safetensors"  # where trainer=codes looks
    if not shared.exists():
        shutil.copyfile(base_file, shared)
    journal = runs / "journal.log"
    if int(cfg.search_seconds) <= 0:
        return journal  # only read what an earlier search stored
    common = [f"search_space={cfg.search_space}", f"sampler={cfg.sampler}", f"prune={cfg.prune}", "evaluator=none",
              "trainer=codes", f"trainer.base={cfg.base}", f"trainer.dataset={cfg.dataset}",
              f"trainer.data_dir={Path(cfg.data_dir).resolve()}", f"trainer.k={int(cfg.k)}",
              f"trainer.encoder={cfg.encoder}", f"trainer.epochs={int(cfg.epochs)}",
              f"trainer.base_epochs={int(cfg.base_epochs)}", f"trainer.batch_size={int(cfg.batch_size)}",
              f"trainer.base_dir={base_dir}", f"trainer.device={cfg.device}", f"trainer.seed={int(cfg.seed)}",
              "storage=journal", f"storage.path={journal}", f"study_name={STUDY}", "n_trials=100000",
              f"timeout_s={int(cfg.search_seconds)}", "progress=false", "plots=false", f"seed={int(cfg.seed)}"]
    procs = []
    for worker in range(int(cfg.workers)):
        folder = runs / f"worker{worker}"
        cmd = [sys.executable, "-c", "import sys; from nasutil.cli.entry import nasutil_search; "
               "sys.exit(nasutil_search())", *common, f"worker={worker}", f"hydra.run.dir={folder}"]
        procs.append((folder, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
    for folder, proc in procs:
        out, _ = proc.communicate()
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "console.log").write_text(out)
        if proc.returncode != 0:
            log(f"worker in {folder.name} ended with {proc.returncode}: {out.strip().splitlines()[-1:]}")
    return journal


def trained_trials(journal: Path) -> list[dict]:
    import optuna

    from nasutil.search.storage import journal_storage

    study = optuna.load_study(study_name=STUDY, storage=journal_storage(str(journal)).storage)
    rows = []
    for t in study.trials:
        attrs = t.user_attrs
        if t.state != optuna.trial.TrialState.COMPLETE or "accuracy" not in attrs or attrs.get("duplicate_of") is not None:
            continue
        detail = attrs.get("accuracy_detail") or {}
        rows.append({"trial": t.number, "arch": attrs["arch"], "valid_degraded_accuracy": attrs["accuracy"],
                     "test_degraded_accuracy": detail.get("test_degraded_accuracy"),
                     "test_reconstruction_accuracy": detail.get("test_reconstruction_accuracy"),
                     "predicted_throughput_per_s": attrs.get("predicted_throughput_per_s"),
                     "flops_per_image": attrs.get("flops_per_image"), "params": attrs.get("params")})
    pruned = sum(1 for t in study.trials if t.user_attrs.get("prune_stage") == "before_training")
    log(f"study: {len(study.trials)} trials, {len(rows)} trained, {pruned} pruned before training")
    return rows


def measured_cost_ms(spec: str, cfg: DictConfig, shape: tuple[int, int, int]) -> dict:
    """One parity network's forward on `cost_batch` queries: evaluator timer and a plain replay loop."""
    import torch

    from nasutil.codes.bases import build_base
    from nasutil.counting import count_model
    from nasutil.evaluator.reference import capture_graph, graph_replay_ms
    from nasutil.evaluator.timing import time_windows

    model = build_base(spec, shape[0], shape[1], 10).eval().to("cuda", torch.float16)
    model = model.to(memory_format=torch.channels_last)
    x = torch.randn(int(cfg.cost_batch), *shape, device="cuda", dtype=torch.float16)
    x = x.contiguous(memory_format=torch.channels_last)
    flops = count_model(build_base(spec, shape[0], shape[1], 10).eval(), shape[1], shape[0], per_layer=False).flops_per_image
    with torch.inference_mode():
        graph = capture_graph(model, x)
        timing = time_windows(graph.replay, torch.device("cuda"), warmup=3, repeats=7, min_window_ms=5.0,
                              max_iters=10000, prefill=True)
        plain = graph_replay_ms(model, x)
    return {"latency_ms": timing.median_ms, "plain_loop_ms": plain, "flops_per_query": flops}


def serving_rows(cfg: DictConfig, runs: dict[str, Path]) -> list[dict]:
    import torch

    from nasutil.codes.data import load_code_data
    from nasutil.codes.run import load_run, read_settings
    from nasutil.codes.serving import serve

    data = load_code_data(cfg.dataset, cfg.data_dir)
    images = data.test[0].to(cfg.device)
    labels = data.test[1]
    rows = []
    for name, folder in runs.items():
        base, code = load_run(folder, read_settings(folder), data, torch.device(cfg.device))
        code.eval()
        ways = ["coded"] if name != next(iter(runs)) else ["unprotected", "replicated", "coded"]
        for groups in cfg.serve_groups:
            for way in ways:
                r = serve(way, base, code, images, labels, groups=int(groups), max_requests=int(cfg.serve_requests))
                row = {"parity": name if way == "coded" else "-", **r.to_dict()}
                rows.append(row)
                log(f"serving {way} ({row['parity']}), {groups} groups: p50 {r.p50_ms:.3f} ms, p99 {r.p99_ms:.3f} ms, "
                    f"{r.queries_per_s:,.0f} queries/s, accuracy {100 * r.accuracy:.2f}%, replay {r.replay_ms:.3f} ms")
            torch.cuda.empty_cache()
    return rows


def plot(trials: list[dict], copy: dict, picked: dict | None, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from nasutil.pareto import front_2d

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.scatter([t["latency_ms"] for t in trials], [t["test_degraded_accuracy"] for t in trials], s=12,
               color="tab:blue", alpha=0.5, label="searched parity models (nb201 cells)")
    front = front_2d(trials, lambda t: -t["latency_ms"], lambda t: t["test_degraded_accuracy"])
    front.sort(key=lambda t: t["latency_ms"])
    ax.plot([t["latency_ms"] for t in front], [t["test_degraded_accuracy"] for t in front], color="tab:blue",
            drawstyle="steps-post", label="Pareto front")
    ax.scatter([copy["latency_ms"]], [copy["test_degraded_accuracy"]], marker="*", s=160, color="tab:red",
               label="parity = base's architecture (ResNet-18)")
    if picked is not None:
        ax.scatter([picked["latency_ms"]], [picked["test_degraded_accuracy"]], marker="D", s=60, color="tab:green",
                   label="picked: cheapest at equal accuracy")
    ax.set_xscale("log")
    ax.set_xlabel("parity model latency, ms (H200, fp16, CUDA graph)")
    ax.set_ylabel("degraded-mode accuracy, test (%)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "front.png", dpi=130)
    plt.close(fig)


def write_csv(path: Path, rows: list[dict]) -> None:
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)


@hydra.main(version_base="1.3", config_path=".", config_name="parity_search")
def main(cfg: DictConfig) -> None:
    runs, results = Path(cfg.runs_dir), Path(cfg.results_dir)
    runs.mkdir(parents=True, exist_ok=True)
    results.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("NASUTIL_DATA_DIR", str(Path(cfg.data_dir).resolve()))
    progress = lambda stage, done, total, f: log(f"{stage} {done}/{total} " + " ".join(  # noqa: E731
        f"{key}={value:.4g}" for key, value in f.items()))

    log("baseline: parity model = the base's architecture")
    copy_scores = train_run(settings_for(cfg, "copy"), runs / "copy", cfg.data_dir, cfg.device, progress)
    journal = search(cfg, runs, runs / "copy" / "base.safetensors")
    trials = trained_trials(journal)
    if not trials:
        raise NasutilError("the search trained no candidate")

    from nasutil.codes.data import load_code_data

    shape = load_code_data(cfg.dataset, cfg.data_dir).shape
    copy = {"arch": cfg.base, "test_degraded_accuracy": 100 * copy_scores.degraded_accuracy,
            "test_reconstruction_accuracy": 100 * copy_scores.reconstruction_accuracy,
            **measured_cost_ms(cfg.base, cfg, shape)}
    for t in trials:
        t.update(measured_cost_ms(f"{cfg.search_space}:{t['arch']}", cfg, shape))
    log(f"measured {len(trials) + 1} parity networks")
    equal = [t for t in trials if t["test_degraded_accuracy"] >= copy["test_degraded_accuracy"] - cfg.tolerance_points]
    picked = min(equal, key=lambda t: t["latency_ms"]) if equal else None

    serving_runs = {"copy": runs / "copy"}
    retrained = None
    if picked is not None:
        folder = runs / "searched"
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / "base.safetensors").exists():
            shutil.copyfile(runs / "copy" / "base.safetensors", folder / "base.safetensors")
        scores = train_run(settings_for(cfg, f"{cfg.search_space}:{picked['arch']}"), folder, cfg.data_dir,
                           cfg.device, progress)
        retrained = {"test_degraded_accuracy": 100 * scores.degraded_accuracy,
                     "test_reconstruction_accuracy": 100 * scores.reconstruction_accuracy}
        serving_runs["searched"] = folder
    serving = serving_rows(cfg, serving_runs)

    write_csv(results / "trials.csv", trials)
    write_csv(results / "serving.csv", serving)
    import torch

    summary = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "settings": {
        k: cfg[k] for k in ("dataset", "base", "k", "encoder", "base_epochs", "epochs", "batch_size", "search_space",
                            "sampler", "prune", "workers", "search_seconds", "cost_batch", "tolerance_points")},
        "baseline": copy, "trained_candidates": len(trials), "at_equal_accuracy": len(equal), "picked": picked,
        "picked_retrained": retrained,
        "speedup_at_equal_accuracy": copy["latency_ms"] / picked["latency_ms"] if picked else None,
        "most_accurate": max(trials, key=lambda t: t["test_degraded_accuracy"])}
    (results / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    plot(trials, copy, picked, results)
    log(f"baseline {copy['latency_ms']:.3f} ms at {copy['test_degraded_accuracy']:.2f}%; "
        + (f"picked {picked['latency_ms']:.3f} ms at {picked['test_degraded_accuracy']:.2f}% "
           f"({summary['speedup_at_equal_accuracy']:.1f}x cheaper)" if picked else "no candidate at equal accuracy"))


if __name__ == "__main__":
    try:
        main()
    except NasutilError as exc:
        fail(str(exc))
