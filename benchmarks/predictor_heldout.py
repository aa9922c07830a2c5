"""A profile's predictions against measurements it was never fitted on (fresh seeds), per space and
configuration.

    python benchmarks/predictor_heldout.py benchmarks/results/h200/heldout --profile h200 \
        --fitted benchmarks/results/h200/predictor_data_*.csv --out benchmarks/results/h200/predictor_heldout.json

For every (space, batch, mode) in the measurement files: Kendall tau against the measured latency (and
FLOPs' tau), the share within +-10%, the median signed and the worst error, for the operator-level
predictor with the space's own overlap constants, with the constants shared by every space (what a
space without its own would get), the learned model and `auto`. Measurements below 95% of the highest
SM clock of their group are left out and repeats of an arch reduced to their median, as the fit does.
`--fitted` names the measurements the profile was fitted on: an arch among them is left out (a fresh
seed can draw an arch the fit saw), so every figure is on networks no fit saw.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau

from nasutil.errors import NasutilError
from nasutil.predictor import PredictTarget, load_profile
from nasutil.predictor.training_data import median_latencies, read_measurements
from nasutil.registry import get_space


def scores(predicted: list[float], measured: list[float]) -> dict:
    p, m = np.array(predicted), np.array(measured)
    error = p / m - 1
    return {"kendall_tau": float(kendalltau(p, m).statistic), "within_10pct": float(np.mean(np.abs(error) <= 0.10)),
            "median_signed_error": float(np.median(error)), "worst_error": float(error[np.argmax(np.abs(error))])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("measurements", nargs="+", type=Path)
    parser.add_argument("--profile", default="h200")
    parser.add_argument("--fitted", nargs="*", type=Path, default=[],
                        help="the measurements the profile was fitted on: their archs are left out")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    from nasutil.predictor.registry import make_predictor

    profile = load_profile(args.profile)
    groups = median_latencies(read_measurements(args.measurements), 0.95)
    fitted = {(space, arch) for (space, *_), latencies in
              (median_latencies(read_measurements(args.fitted), 0.0).items() if args.fitted else [])
              for arch in latencies}
    device = profile.device_name
    results = []
    for (space_name, dtype, batch, mode), latencies in sorted(groups.items()):
        space = get_space(space_name)
        archs = sorted(a for a in latencies if (space_name, a) not in fitted)
        left_out = len(latencies) - len(archs)
        measured = [float(latencies[a]) for a in archs]
        target = PredictTarget(device, dtype, batch, mode)
        ops = [space.operators(space.parse(a)) for a in archs]
        flops = [sum(o.flops for o in arch_ops) for arch_ops in ops]
        row = {"space": space_name, "dtype": dtype, "batch_size": batch, "mode": mode, "networks": len(archs),
               "left_out_as_fitted": left_out,
               "flops_kendall_tau": float(kendalltau(flops, measured).statistic)}
        model = profile.op_model
        if model is not None and target.key in model.tables:
            row["operators"] = scores([model.predict_latency_ms(o, target, space_name) for o in ops], measured)
            row["operators_shared_constants"] = scores([model.predict_latency_ms(o, target, "") for o in ops], measured)
            row["op_sum_over_measured"] = statistics.median(
                model.sum_us(o, target) / 1e3 / m for o, m in zip(ops, measured))
        for kind in ("learned", "auto"):
            try:
                predictor = make_predictor(kind, profile=profile)
                predictions = predictor.predict_many(space_name, archs, predictor.target(dtype, batch, mode))
                row[kind] = scores([p.latency_ms for p in predictions], measured)
                if kind == "auto":
                    row["auto_predictor"] = sorted({p.predictor for p in predictions})
                    row["auto_validated"] = all(p.validated for p in predictions)
            except NasutilError as exc:  # a kind the profile cannot serve here: say why
                row[kind] = {"error": str(exc).splitlines()[0]}
        results.append(row)
        print(json.dumps({k: v for k, v in row.items()}), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"profile": str(args.profile), "device": device,
                                    "measurements": [str(p) for p in args.measurements],
                                    "fitted": [str(p) for p in args.fitted], "results": results},
                                   indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
