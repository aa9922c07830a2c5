"""Re-measure the survey's batch-256 CUDA-graph GPM counters with converged windows, against a reference.

The survey's grid read its counters over one 120 ms window, which under-reads light models (GPM
readings settle only over about a second). This measures every model again at fp16, batch 256, CUDA
graph, with the evaluator's converged counter windows, and for eight models also reads an independent
reference: the model's CUDA graph replayed back to back for 2 s after a 0.5 s lead-in, between two
GPM samples. Writes results/counters_b256.csv; the analysis takes the batch-256 counters from it.

    python experiments/survey/counters.py          # on the GPU machine, about 2 minutes on an H200
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import torch
from omegaconf import OmegaConf

from nasutil.errors import fail
from nasutil.evaluator import Candidate, Evaluator, MeasureConfig
from nasutil.evaluator.reference import graph_replay_counters
from nasutil.zoo import build_zoo_model, split_model_spec

HERE = Path(__file__).resolve().parent
REFERENCE_MODELS = ("resnet18", "resnet50", "squeezenet1_1", "shufflenet_v2_x1_0", "regnet_x_400mf", "regnet_y_400mf",
                    "mobilenet_v3_small", "mobilenet_v3_large")


def reference_counters(spec: str) -> dict[str, float | None]:
    """GPM counters over 2 s of back-to-back replays of the model's CUDA graph (fp16, batch 256)."""
    net = build_zoo_model(*split_model_spec(spec), num_classes=1000)
    net = net.eval().to("cuda", torch.float16).to(memory_format=torch.channels_last)
    x = torch.randn(256, 3, 224, 224, device="cuda", dtype=torch.float16).contiguous(memory_format=torch.channels_last)
    counters = graph_replay_counters(net, x)
    del net
    torch.cuda.empty_cache()
    return counters


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "results" / "counters_b256.csv")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        fail("counters.py measures GPM counters: it needs a CUDA GPU")
    models = list(OmegaConf.load(HERE / "survey.yaml").models)
    config = MeasureConfig(device="cuda", dtype="fp16", batch_size=256, mode="cudagraph", num_classes=1000)
    rows = []
    with Evaluator(config, isolate=False) as evaluator:
        for spec in models:
            m = evaluator.measure(Candidate.model(spec))
            if not m.ok:
                fail(f"{spec}: {m.error}")
            row = {"space": m.space, "arch": m.arch, "latency_ms": m.latency_ms, "utilization": m.utilization,
                   "counter_window_ms": m.counter_window_ms, "counters_converged": m.counters_converged,
                   "counter_windows": m.timing.get("counter_windows"),
                   **{f"counter_{k}": v for k, v in m.counters.items()}}
            if m.arch in REFERENCE_MODELS:
                reference = reference_counters(spec)
                row.update({f"reference_{k}": reference[k] for k in ("sm_activity", "tensor_activity", "dram_bw_util")})
            rows.append(row)
            print(f"{spec}: SM activity {row['counter_sm_activity']:.1f}% over {row['counter_windows']} windows",
                  flush=True)
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with args.out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
