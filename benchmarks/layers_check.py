"""Per-layer breakdown of one model, with its total kernel time, as JSON (for BENCHMARKS.md).

    python benchmarks/layers_check.py torchvision:resnet50 --batch-size 128 --out FILE
"""

import argparse
import json
import sys

from nasutil.evaluator import Candidate, Evaluator, MeasureConfig


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    config = MeasureConfig(device="cuda", dtype="fp16", batch_size=args.batch_size, mode="eager", per_layer=True,
                           num_classes=1000)
    with Evaluator(config, isolate=True) as ev:
        m = ev.measure(Candidate.model(args.model))
    with open(args.out, "w") as fh:
        json.dump(m.to_dict(), fh, indent=1)
    layers = [l for l in m.layers or [] if l["time_ms"]]
    print(m.arch, "latency", m.latency_ms, "kernel total", m.timing.get("kernel_time_ms"),
          "leaf sum", sum(l["time_ms"] for l in layers), m.error or "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
