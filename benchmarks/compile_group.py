"""How long a group of NAS-Bench-201 networks takes to compile for co-located inference, one network after
another in this process against child processes filling Inductor's cache side by side first.

    python benchmarks/compile_group.py --out benchmarks/results/h200/colocate
    python benchmarks/compile_group.py --ways 16:8 16:8:plain-weights --out benchmarks/results/h200/colocate

`nasutil.colocate.compiled.compile_for_inference` compiles each network (fp16, channels_last, frozen
weights) for its own input; with `workers` >= 2 it first hands copies of the networks to that many child
processes (`nasutil.colocate.compile_cache`), and each compilation in the measuring process then finds
its code in the cache. A way is NETWORKS:WORKERS, and `:plain-weights` compiles without freezing the
weights (BatchNorm is then not folded into the convolutions, and AOTAutograd's cache can serve the
measuring process too). Each way runs in a fresh process of its own with an empty cache folder, so that
no way finds another's code: its wall time from the first network to the last, each network's seconds
in the measuring process (waiting for its child included), the cache hits, the compiled outputs against
the plain networks (largest logit), and on a GPU what the compiling bought: the networks' CUDA graphs
replayed one after another, plain and compiled, timed by CUDA events and alternated (plain, compiled,
plain). Writes compile_group.json, and compile_group.jsonl row by row.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def child(networks: int, workers: int, batch: int, seed: int, freezing: bool) -> dict:
    import torch
    from torch._dynamo.utils import counters

    from nasutil import get_space
    from nasutil.colocate.compiled import compile_for_inference

    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.half if device == "cuda" else torch.float
    space = get_space("nb201")
    torch.manual_seed(seed)
    models = [space.build(a, num_classes=10, input_size=32).eval().to(device, dtype).to(memory_format=torch.channels_last)
              for a in space.sample_many(networks, seed=seed)]
    inputs = [torch.randn(batch, 3, 32, 32, device=device, dtype=dtype).contiguous(memory_format=torch.channels_last)
              for _ in models]
    seconds: list[float] = []

    def progress(done: int, total: int, s: float) -> None:
        seconds.append(s)
        print(f"  workers {workers}: {done}/{total} {s:.1f} s", flush=True)

    with torch.inference_mode():
        start = time.perf_counter()
        compiled = compile_for_inference(models, inputs, progress, workers=workers, freezing=freezing)
        total = time.perf_counter() - start
        error = max(float((c(x).float() - m(x).float()).abs().max() / m(x).float().abs().max()) for c, m, x
                    in zip(compiled, models, inputs))
        row = {"networks": networks, "workers": workers, "freezing": freezing, "batch": batch, "device": device,
               "total_s": total, "per_network_s": seconds, "cache_hits": counters["inductor"]["fxgraph_cache_hit"],
               "cache_misses": counters["inductor"]["fxgraph_cache_miss"],
               "aot_cache_hits": counters["aot_autograd"]["autograd_cache_hit"], "max_rel_error": error,
               "cpus": os.cpu_count()}
        if device == "cuda":
            row.update(replayed(models, compiled, inputs))
    return row


def replayed(models, compiled, inputs) -> dict:
    """The plain and the compiled networks, each captured in its own CUDA graph by `sequential` and replayed
    one after another, timed by CUDA events: plain, compiled, plain again."""
    from colocate_bench import events_ms

    from nasutil.colocate.strategies import Sequential

    plain, fast = Sequential().prepare(models, inputs), Sequential().prepare(compiled, inputs)
    for _ in range(3):
        plain.run(), fast.run()
    first, compiled_ms, again = events_ms(plain.run, 20), events_ms(fast.run, 20), events_ms(plain.run, 20)
    return {"plain_sequential_ms": (first + again) / 2, "plain_sequential_ms_drift": abs(first - again) / first,
            "compiled_sequential_ms": compiled_ms, "compiled_speedup": (first + again) / 2 / compiled_ms}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ways", nargs="+", default=["8:0", "16:8"],
                        help="NETWORKS:WORKERS[:plain-weights], each in a fresh process")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", nargs=3, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--name", default="compile_group", help="the result files' name")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.child:
        networks, workers, freezing = args.child
        print("ROW " + json.dumps(child(networks, workers, args.batch_size, args.seed, bool(freezing))), flush=True)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for way in args.ways:
        networks, workers, *how = way.split(":")
        if how not in ([], ["plain-weights"]):
            parser.error(f"unknown way {way!r}: NETWORKS:WORKERS[:plain-weights]")
        freezing = not how
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache, TRITON_CACHE_DIR=os.path.join(cache, "triton"))
            done = subprocess.run([sys.executable, __file__, "--child", networks, workers, str(int(freezing)),
                                   "--batch-size", str(args.batch_size), "--seed", str(args.seed)],
                                  env=env, stdout=subprocess.PIPE, text=True)
        found = [line[4:] for line in done.stdout.splitlines() if line.startswith("ROW ")]
        print("\n".join(line for line in done.stdout.splitlines() if not line.startswith("ROW ")), flush=True)
        if done.returncode or not found:
            print(f"{way}: the child failed ({done.returncode})", flush=True)
            continue
        row = json.loads(found[0])
        row["per_network_mean_s"] = row["total_s"] / row["networks"]
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "per_network_s"}), flush=True)
        with (args.out / f"{args.name}.jsonl").open("a") as fh:
            fh.write(json.dumps(row) + "\n")
    (args.out / f"{args.name}.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
