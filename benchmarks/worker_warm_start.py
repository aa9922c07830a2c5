"""What a measuring worker's start costs, and what its first reading is, cold and warmed.

    python benchmarks/worker_warm_start.py cost --out OUT        # warm_check.json
    python benchmarks/worker_warm_start.py reference --out OUT   # warm_ref.json

An evaluator's worker loads its CUDA libraries as it starts (`Evaluator(warm=True)`, the default:
`nasutil.evaluator.worker.warm_device`, the CUDA context, cuDNN, cuBLAS, one tiny graph capture); a search
starts its measuring worker on a thread of its own when the search begins. Both parts use fresh evaluators
(one worker process each), fp16, CUDA graph, no counters, the order alternated (the committed results were
taken when warming was `Evaluator.start(warm=True)`, the same work at the same moment: after the worker's
start, before its first measurement):

- `cost`: batch 256; the seconds `start` takes, cold (`warm=False`) or warmed, and the seconds of the first
  and second measurements after it (two cells), with their latencies;
- `reference`: at batches 64 and 256, the first reading of one cell by a cold worker, by a warmed worker,
  and by a plain loop in this process (the cell built, cast and captured here, its graph replayed 20 times
  a window for 7 windows, the median: `nasutil.evaluator.reference.graph_replay_ms`), an independent clock.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from nasutil import get_space
from nasutil.evaluator import Candidate, Evaluator, MeasureConfig
from nasutil.evaluator.reference import graph_replay_ms

CELL = "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|"
OTHER = "|nor_conv_1x1~0|+|skip_connect~0|avg_pool_3x3~1|+|none~0|nor_conv_3x3~1|nor_conv_1x1~2|"


def config(batch: int) -> MeasureConfig:
    return MeasureConfig(device="cuda", dtype="fp16", batch_size=batch, mode="cudagraph", counters=False)


def cost() -> dict:
    rows = []
    for way in ("cold", "warm", "cold", "warm"):
        with Evaluator(config(256), warm=(way == "warm")) as ev:
            started = time.perf_counter()
            ev.start()
            start_s = time.perf_counter() - started
            started = time.perf_counter()
            first = ev.measure(Candidate("nb201", CELL))
            first_s = time.perf_counter() - started
            started = time.perf_counter()
            second = ev.measure(Candidate("nb201", OTHER))
            second_s = time.perf_counter() - started
        rows.append({"way": way, "start_s": round(start_s, 3), "first_measure_s": round(first_s, 3),
                     "second_measure_s": round(second_s, 3), "first_latency_ms": first.latency_ms,
                     "second_latency_ms": second.latency_ms})
        print(json.dumps(rows[-1]), flush=True)
    return {"rows": rows}


def plain_loop_ms(batch: int) -> float:
    space = get_space("nb201")
    with torch.inference_mode():
        model = space.build(space.parse(CELL), num_classes=10).eval()
        model = model.to("cuda", torch.float16, memory_format=torch.channels_last)
        x = torch.randn(batch, 3, 32, 32, device="cuda", dtype=torch.float16).contiguous(
            memory_format=torch.channels_last)
        return graph_replay_ms(model, x, replays=20, windows=7)


def reference() -> list[dict]:
    rows = []
    for batch in (64, 256):
        for way in ("cold", "warm", "plain", "warm", "cold", "plain"):
            if way == "plain":
                ms = plain_loop_ms(batch)
            else:
                with Evaluator(config(batch), warm=(way == "warm")) as ev:
                    ev.start()
                    ms = ev.measure(Candidate("nb201", CELL)).latency_ms
            rows.append({"batch": batch, "way": way, "ms": round(ms, 4)})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("part", choices=("cost", "reference"))
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        parser.exit(2, "worker_warm_start.py: error: needs a CUDA device\n")
    args.out.mkdir(parents=True, exist_ok=True)
    if args.part == "cost":
        (args.out / "warm_check.json").write_text(json.dumps(cost(), indent=1))
    else:
        (args.out / "warm_ref.json").write_text(json.dumps(reference(), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
