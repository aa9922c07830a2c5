"""Evaluator fidelity on a GPU: eager batch-1 timing across processes, and NNI's NAS-Bench-201 network.

    python benchmarks/evaluator_fidelity.py eager nni --out benchmarks/results/h200

- `eager`: four torchvision CNNs at fp16, batch 1, eager, channels_last, over several rounds; in each
  round, alternating, a plain timing loop in this process, `Evaluator(isolate=False)` and the default
  isolated `Evaluator`, with the host's cost of enqueueing one tiny kernel before and after
  (eager_isolation.csv). Tells a cost of the worker process from the host CPU's own pace.
- `nni`: the same NAS-Bench-201 cells built by `nb201` and by NNI's hub NasBench201 (`nni`), fp16,
  batch 256, CUDA graph, through the evaluator and, as the reference, each network's CUDA graph
  replayed in a plain loop (nb201_vs_nni.csv).
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
from pathlib import Path

import torch

from nasutil.errors import fail
from nasutil.evaluator import Candidate, Evaluator, MeasureConfig
from nasutil.evaluator.reference import graph_replay_ms

EAGER_MODELS = ("resnet18", "resnet50", "vgg16_bn", "mobilenet_v2")


def launch_us(n: int = 3000) -> float:
    """Host pace: microseconds to enqueue one tiny kernel (no synchronisation inside)."""
    t = torch.zeros(16, device="cuda")
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        t.add_(1)
    elapsed = (time.perf_counter() - start) / n * 1e6
    torch.cuda.synchronize()
    return elapsed


def plain_eager_ms(net: torch.nn.Module, x: torch.Tensor, iters: int = 50, windows: int = 7) -> float:
    out = []
    for _ in range(windows):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            net(x)
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) / iters)
    return statistics.median(out)


def eager(rounds: int) -> list[dict]:
    import torchvision

    config = MeasureConfig(device="cuda", dtype="fp16", batch_size=1, mode="eager", counters=False, num_classes=1000)
    nets = {n: getattr(torchvision.models, n)().eval().to("cuda", torch.float16).to(memory_format=torch.channels_last)
            for n in EAGER_MODELS}
    x = torch.randn(1, 3, 224, 224, device="cuda", dtype=torch.float16).contiguous(memory_format=torch.channels_last)
    rows = []
    with Evaluator(config, isolate=False) as inproc, Evaluator(config) as isolated, torch.inference_mode():
        for net in nets.values():
            for _ in range(10):
                net(x)
        for r in range(rounds):
            for name, net in nets.items():
                row = {"round": r, "model": name, "launch_us_before": launch_us(), "plain_ms": plain_eager_ms(net, x)}
                row["inprocess_ms"] = inproc.measure(Candidate.model(f"torchvision:{name}")).latency_ms
                row["isolated_ms"] = isolated.measure(Candidate.model(f"torchvision:{name}")).latency_ms
                row["plain_after_ms"] = plain_eager_ms(net, x)
                row["launch_us_after"] = launch_us()
                rows.append(row)
                print(row, flush=True)
    return rows


def nni(cells: int) -> list[dict]:
    from nasutil import get_space

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from test_nb201_flops import nb201_sample_for_nni

    nb201, nni_space = get_space("nb201"), get_space("nni")
    config = MeasureConfig(device="cuda", dtype="fp16", batch_size=256, mode="cudagraph", counters=False)
    x = torch.randn(256, 3, 32, 32, device="cuda", dtype=torch.float16).contiguous(memory_format=torch.channels_last)

    def plain_ms(space, arch) -> float:
        """The reference: the network's CUDA graph replayed in a plain loop timed with CUDA events."""
        net = space.build(arch).eval().to("cuda", torch.float16).to(memory_format=torch.channels_last)
        return graph_replay_ms(net, x)

    rows = []
    with Evaluator(config, isolate=False) as evaluator:
        for arch in nb201.sample_many(cells, seed=12):
            theirs_arch = nni_space.arch_from_sample(nb201_sample_for_nni(arch))
            ours = evaluator.measure(Candidate("nb201", arch.to_string()))
            theirs = evaluator.measure(Candidate("nni", theirs_arch.to_string()))
            rows.append({"arch": arch.to_string(), "nb201_ms": ours.latency_ms, "nni_ms": theirs.latency_ms,
                         "nb201_plain_ms": plain_ms(nb201, arch), "nni_plain_ms": plain_ms(nni_space, theirs_arch),
                         "flops_equal": ours.flops_per_image == theirs.flops_per_image,
                         "nni_over_nb201": theirs.latency_ms / ours.latency_ms})
            rows[-1]["plain_nni_over_nb201"] = rows[-1]["nni_plain_ms"] / rows[-1]["nb201_plain_ms"]
            print(rows[-1], flush=True)
    return rows


def write(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("parts", nargs="+", choices=("eager", "nni"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cells", type=int, default=8)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/h200"))
    args = parser.parse_args()
    if not torch.cuda.is_available():
        fail("evaluator_fidelity.py needs a CUDA GPU")
    args.out.mkdir(parents=True, exist_ok=True)
    if "eager" in args.parts:
        write(args.out / "eager_isolation.csv", eager(args.rounds))
    if "nni" in args.parts:
        write(args.out / "nb201_vs_nni.csv", nni(args.cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
