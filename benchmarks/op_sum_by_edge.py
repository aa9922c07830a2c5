"""How far a profile's plain op sum is from measured DARTS latencies, and which edge ops carry the gap.

    python benchmarks/op_sum_by_edge.py benchmarks/results/h200/predictor_data_darts.csv --profile h200

For each measured network (at a steady clock, the median of repeats): the sum of its ops' table times
(no overlap constants) over the measured latency, and a least-squares fit of the gap (measured minus
op sum, ms) on the number of edges of each op in the genotype plus a constant. An edge op whose ops
the table times as something cheaper than what the network runs shows a large positive coefficient.
Prints one JSON object per (batch, mode).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from nasutil.predictor import PredictTarget, load_profile
from nasutil.predictor.training_data import median_latencies, read_measurements
from nasutil.registry import get_space
from nasutil_search_spaces.darts import OPS


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("measurements", type=Path)
    parser.add_argument("--profile", default="h200")
    args = parser.parse_args()
    profile = load_profile(args.profile)
    space = get_space("darts")
    for (name, dtype, batch, mode), latencies in sorted(median_latencies(read_measurements([args.measurements])).items()):
        if name != "darts":
            continue
        target = PredictTarget(profile.device_name, dtype, batch, mode)
        ratios, rows, gaps = [], [], []
        for arch, measured in latencies.items():
            op_sum = profile.op_model.sum_us(space.operators(space.parse(arch)), target) / 1e3
            ratios.append(op_sum / measured)
            rows.append([arch.count(f"'{op}'") for op in OPS] + [1])
            gaps.append(measured - op_sum)
        x, y = np.array(rows, dtype=float), np.array(gaps)
        coef, *_ = np.linalg.lstsq(x, y, rcond=None)
        r2 = 1 - ((x @ coef - y) ** 2).sum() / ((y - y.mean()) ** 2).sum()
        print(json.dumps({"batch_size": batch, "mode": mode, "networks": len(ratios),
                          "op_sum_over_measured": {"median": float(np.median(ratios)), "min": float(min(ratios)),
                                                   "max": float(max(ratios))},
                          "gap_ms_per_edge": {op: round(float(c), 4) for op, c in zip([*OPS, "constant"], coef)},
                          "r2": float(r2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
