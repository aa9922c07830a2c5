"""Pair the fast-end guard's pruned searches on the tuning seeds with the unpruned searches of the same seeds.

Consolidates a sweep's run folders (RUNS/<sampler>-<setting>/s<seed>/trials.csv, tune_measured_v4.sh) with the
unpruned searches (`<sampler>-none`) and the defaults' pruned searches (`<sampler>-dominated_throughput_v3`) of
results/measured_v2/tuning/trials.csv.gz into OUT/trials.csv.gz, then writes, for each setting and for the
defaults, OUT/<setting>.csv and OUT/<setting>_summary.json as analyze_measured.py does.

    python experiments/nb201_pruning/tuning/v4_tuning_pairs.py RUNS OUT
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))
import analyze_measured  # noqa: E402

COLUMNS = ("arm", "seed", "number", "outcome", "arch", "prune_reason")
BASE = HERE / "results" / "measured_v2" / "tuning" / "trials.csv.gz"


def main(argv: list[str]) -> int:
    runs, out = Path(argv[0]), Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    fresh = out / "trials.csv.gz"
    analyze_measured.consolidate(runs, fresh, COLUMNS)
    with gzip.open(BASE, "rt", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["arm"].endswith(("-none", "-dominated_throughput_v3"))]
    with gzip.open(fresh, "rt", newline="") as f:
        rows += list(csv.DictReader(f))
    rows.sort(key=lambda r: (r["arm"], int(r["seed"]), int(r["number"])))
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    fresh.write_bytes(gzip.compress(text.getvalue().encode(), 9, mtime=0))
    searches = analyze_measured.read_trials(fresh)
    settings = sorted({arm.partition("-")[2] for arm, _ in searches} - {"none"})
    for setting in settings:
        pairs, summary = analyze_measured.analyze(searches, [150, 300], setting)
        with (out / f"{setting}.csv").open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(pairs[0]), lineterminator="\n")
            writer.writeheader()
            writer.writerows(pairs)
        (out / f"{setting}_summary.json").write_text(json.dumps(summary, indent=1) + "\n")
        for key, e in summary["by_sampler"].items():
            print(f"{setting:>28} {key:>10}: {e['seeds']} seeds, saved {e['trainings_saved_mean']:.1%} (min "
                  f"{e['trainings_saved_min']:.1%}); HV measured {e['hv_ratio_measured_mean']:.3f} (min "
                  f"{e['hv_ratio_measured_min']:.3f}), below 0.95/0.90: {e['seeds_below_0.95_measured']}/"
                  f"{e['seeds_below_0.90_measured']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
