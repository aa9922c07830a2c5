"""Cost of a prediction with the shipped H200 profile on one CPU core, per space, configuration and predictor.

    taskset -c 0 python benchmarks/predictor_cost.py --out benchmarks/results/h200/predictor_cost.json

Each figure is the wall time of a predictor kind's `predict_many` over 1,000 sampled archs (listing their
ops, computing features, predicting; the learned model scores them in one batch), divided by 1,000.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import torch

from nasutil import get_space
from nasutil.devices import cpu_name
from nasutil.predictor import make_predictor

KINDS = ("operators", "learned", "analytical")
CONFIGS = ((256, "cudagraph"), (256, "eager"), (1, "cudagraph"), (1, "eager"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--profile", default="h200")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    predictors = {kind: make_predictor(kind, profile=args.profile) for kind in KINDS}  # one loaded profile for all
    rows = []
    for space_name in ("nb201", "mbconv"):
        space = get_space(space_name)
        archs = [a.to_string() for a in space.sample_many(args.count, seed=5)]
        for batch, mode in CONFIGS:
            for kind, predictor in predictors.items():
                target = predictor.target("fp16", batch, mode)
                predictor.predict_many(space, archs[:5], target)  # fit on first use
                started = time.perf_counter()
                predictor.predict_many(space, archs, target)
                ms = (time.perf_counter() - started) * 1e3 / len(archs)
                rows.append({"space": space_name, "batch_size": batch, "mode": mode, "predictor": kind,
                             "ms_per_candidate": round(ms, 3), "predictions_per_s": round(1e3 / ms, 1)})
                print(json.dumps(rows[-1]), flush=True)
    args.out.write_text(json.dumps({"cpu": cpu_name(), "python": platform.python_version(),
                                    "torch_threads": 1, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
