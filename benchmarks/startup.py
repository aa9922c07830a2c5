"""Start-up time of whole processes, as a user meets it: `nasutil spaces`, a single prediction, and
`import torch` beside them for reference. Median, min and max of --runs cold starts each.

    python benchmarks/startup.py --out benchmarks/results/cpu/startup.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = {
    "nasutil spaces": [sys.executable, "-m", "nasutil", "spaces"],
    "nasutil predict nb201 --sample 1": [sys.executable, "-m", "nasutil", "predict", "nb201", "--sample", "1"],
    "python -c 'import torch'": [sys.executable, "-c", "import torch"],
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    results = {}
    for name, command in COMMANDS.items():
        seconds = []
        for _ in range(args.runs):
            started = time.perf_counter()
            subprocess.run(command, capture_output=True, check=True)
            seconds.append(time.perf_counter() - started)
        results[name] = {"median_s": round(statistics.median(seconds), 2), "min_s": round(min(seconds), 2),
                         "max_s": round(max(seconds), 2)}
        print(name, results[name], flush=True)
    machine = {"cpus": os.cpu_count(), "python": platform.python_version(), "machine": platform.machine()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"machine": machine, "runs": args.runs, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
