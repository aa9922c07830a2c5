"""Hold some measured architectures of one space out of a profile fit: two folders of measurement files.

    python benchmarks/holdout_split.py benchmarks/results/h200 --space nb101 --hold 40 --fit /tmp/fit --held /tmp/held
    nasutil profile fit /tmp/fit --base benchmarks/results/h200/h200_operators.json \
        --base benchmarks/results/h200/darts_nb101_operators.json --out /tmp/split.json
    python benchmarks/predictor_heldout.py /tmp/held --profile /tmp/split.json --out predictor_heldout_nb101_split.json

`--fit` gets every measurement file of the folder, the space's own without the held-out architectures;
`--held` gets the held-out architectures' rows. Architectures are held out by canonical hash (isomorphic
NAS-Bench-101 graphs go together), `--hold` of them drawn at random (`--seed`).
"""

from __future__ import annotations

import argparse
import csv
import random
import shutil
import sys
from pathlib import Path

from nasutil.registry import get_space


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--space", required=True)
    parser.add_argument("--hold", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fit", type=Path, required=True)
    parser.add_argument("--held", type=Path, required=True)
    args = parser.parse_args()
    own = args.folder / f"predictor_data_{args.space}.csv"
    rows = list(csv.DictReader(own.open()))
    space = get_space(args.space)
    by_hash: dict[str, set[str]] = {}
    for r in rows:
        if r["status"] == "ok":
            by_hash.setdefault(space.parse(r["arch"]).canonical_hash(), set()).add(r["arch"])
    hashes = sorted(by_hash)
    random.Random(args.seed).shuffle(hashes)
    held = set().union(*(by_hash[h] for h in hashes[:args.hold]))
    args.fit.mkdir(parents=True, exist_ok=True)
    args.held.mkdir(parents=True, exist_ok=True)
    for file in args.folder.glob("*.csv"):
        if file != own:
            shutil.copyfile(file, args.fit / file.name)
    for folder, keep in ((args.fit, [r for r in rows if r["arch"] not in held]),
                         (args.held, [r for r in rows if r["arch"] in held])):
        with (folder / own.name).open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(keep)
    print(f"{args.space}: {len(by_hash)} distinct architectures, {args.hold} held out ({len(held)} strings)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
