"""The bundled NAS-Bench-201 accuracy table: every cell's accuracy at 12 and 200 epochs (see README.md here).

Two fidelities: the 12-epoch schedule's validation accuracy (cheap) and the 200-epoch schedule's
test accuracy (full training). The 12-epoch figure comes from NAS-Bench-201's separate 12-epoch
runs and stands in for the accuracy a full run has after its first 12 epochs.
"""

from __future__ import annotations

import csv
import gzip
import importlib.resources
import io
from functools import lru_cache

DATASETS = ("cifar10", "cifar100", "imagenet16_120")
FIDELITIES = (12, 200)


@lru_cache(maxsize=1)
def accuracy_table() -> dict[str, dict[str, float]]:
    """Arch string -> column -> accuracy (%), from `nasutil/data/nasbench201_accuracy.csv.gz`."""
    resource = importlib.resources.files("nasutil.data").joinpath("nasbench201_accuracy.csv.gz")
    with resource.open("rb") as raw, gzip.open(raw, "rt", newline="") as text:
        reader = csv.DictReader(io.StringIO(text.read()))
        return {row["arch"]: {k: float(v) for k, v in row.items() if k not in ("arch", "index") and v != ""}
                for row in reader}


def accuracy_column(dataset: str, epochs: int) -> str:
    """The table's column for a dataset at a fidelity: `cifar10_valid_12ep`, `cifar100_test_200ep`, ..."""
    return f"{dataset}_valid_12ep" if epochs == 12 else f"{dataset}_test_200ep"
