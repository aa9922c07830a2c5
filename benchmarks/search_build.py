"""How long building a search takes before its first trial, and its two slow parts alone.

    NASUTIL_DATA_DIR=DATA python benchmarks/search_build.py --repeats 5 --out benchmarks/results/cpu/search_build

Each repeat builds one fresh `nasutil-search trainer=torch` search (Fashion-MNIST, `anchors=4`, the default
predictor and policy, `evaluator=none`, a new SQLite study) with `nasutil.search.build_search`, as the command does
before its first trial, and closes it without running a trial: its `build_s` and the part of it that found the
anchors (`anchors_s`). As independent references in the same process, the two slow parts are then timed alone,
one after the other, by calling them directly: the trainer's dataset read, split and moved to its device
(`TorchTrainer._load` on a fresh trainer), and the anchors' short search on predictions
(`nasutil.search.anchors.fast_end`) with the same seed. One warm-up build comes first, unrecorded.

Writes NAME.json (`--name`, search_build by default): per repeat the build's seconds, its anchors' seconds, and
the two parts' seconds alone.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path


def overrides(folder: Path, seed: int) -> list[str]:
    return ["trainer=torch", "trainer.dataset=fashion_mnist", "anchors=4", "evaluator=none", "storage=url",
            f"storage.url=sqlite:///{folder / 'study.db'}", f"seed={seed}"]


def build_once(folder: Path, seed: int) -> dict[str, float]:
    from nasutil.search.build import build_search
    from nasutil.search.config import compose

    started = time.perf_counter()
    setup = build_search(compose(overrides(folder, seed)), folder)
    built = time.perf_counter() - started
    setup.search.close()
    return {"build_s": built, "anchors_s": setup.anchors_s}


def parts_alone(folder: Path, seed: int) -> dict[str, float]:
    """The dataset's load and the anchors' search, each timed alone, in this order."""
    from nasutil.registry import get_space
    from nasutil.search.anchors import fast_end
    from nasutil.search.build import predictor_for
    from nasutil.search.config import compose, instantiate_group, plain
    from nasutil.search.objectives import Objectives

    cfg = compose(overrides(folder, seed))
    trainer = instantiate_group(plain(cfg.trainer), "trainer", seed=seed)
    started = time.perf_counter()
    trainer._load()
    load_s = time.perf_counter() - started
    predictor, target = predictor_for(cfg)
    objectives = Objectives.from_config(plain(cfg.objectives))
    started = time.perf_counter()
    fast_end(get_space("nb201"), "nb201", predictor, target, objectives, 4, seed)
    return {"load_alone_s": load_s, "anchors_alone_s": time.perf_counter() - started}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--name", default="search_build", help="the result file's name, NAME.json")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if not (Path(os.environ.get("NASUTIL_DATA_DIR", "data")) / "FashionMNIST").exists():
        parser.error("Fashion-MNIST's IDX files are not under $NASUTIL_DATA_DIR/FashionMNIST (docs/search.md says "
                     "where to get them)")
    import torch

    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        warm = Path(scratch) / "warm-up"
        warm.mkdir()
        build_once(warm, 1000)  # imports, the predictor's profile, the first read of the files
        for repeat in range(args.repeats):
            folder = Path(scratch) / f"r{repeat}"
            folder.mkdir()
            row = {"seed": repeat, **build_once(folder, repeat), **parts_alone(folder, repeat)}
            rows.append(row)
            print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    medians = {key: statistics.median(r[key] for r in rows)
               for key in ("build_s", "anchors_s", "load_alone_s", "anchors_alone_s")}
    result = {"torch": torch.__version__, "cpus": os.cpu_count(), "device": "cuda" if torch.cuda.is_available() else "cpu",
              "repeats": rows, "median_s": medians}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: round(v, 3) for k, v in medians.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
