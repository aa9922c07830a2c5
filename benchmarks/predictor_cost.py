"""Cost of a prediction with the shipped H200 profile on one CPU core, per space, configuration and predictor.

    taskset -c 0 python benchmarks/predictor_cost.py --out benchmarks/results/h200/predictor_cost.json

Each figure is the wall time of `ProfilePredictor.predict_many` over 1,000 sampled archs (listing their
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

from nasutil.devices import cpu_name
from nasutil.predictor.prediction import PredictTarget
from nasutil.predictor.fit import ProfilePredictor
from nasutil.predictor.profile import load_profile
from nasutil.registry import get_space


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    profile = load_profile("h200")
    predictor = ProfilePredictor(profile)
    rows = []
    for space_name in ("nb201", "mbconv"):
        space = get_space(space_name)
        archs = [a.to_string() for a in space.sample_many(args.count, seed=5)]
        for batch, mode in ((256, "cudagraph"), (256, "eager"), (1, "cudagraph"), (1, "eager")):
            target = PredictTarget(profile.device_name, "fp16", batch, mode)
            for which in ("operators", "learned", "analytical"):
                predictor.predict_many(space, space_name, archs[:5], target, which)  # fit on first use
                started = time.perf_counter()
                predictor.predict_many(space, space_name, archs, target, which)
                ms = (time.perf_counter() - started) * 1e3 / len(archs)
                rows.append({"space": space_name, "batch_size": batch, "mode": mode, "predictor": which,
                             "ms_per_candidate": round(ms, 3), "predictions_per_s": round(1e3 / ms, 1)})
                print(json.dumps(rows[-1]), flush=True)
    args.out.write_text(json.dumps({"cpu": cpu_name(), "python": platform.python_version(),
                                    "torch_threads": 1, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
