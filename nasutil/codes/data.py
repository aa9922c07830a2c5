"""The images a code is trained and scored on: a dataset split into train, validation and test.

Pixels are scaled to [0, 1] and not standardised, as the learned-codes paper feeds (Fashion-)MNIST:
a sum or tiling of images then stays an image of the same range. The validation split (the last
`valid` training images of a fixed shuffle) picks nothing here but is reported, so a run can be
judged without touching the test set.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from nasutil import datasets


@dataclass
class CodeData:
    name: str
    train: tuple[torch.Tensor, torch.Tensor]
    valid: tuple[torch.Tensor, torch.Tensor]
    test: tuple[torch.Tensor, torch.Tensor]
    num_classes: int

    @property
    def shape(self) -> tuple[int, int, int]:
        return tuple(int(d) for d in self.train[0].shape[1:])  # type: ignore[return-value]

    def limited(self, train: int | None, test: int | None) -> CodeData:
        """The first `train` training and `test` test images (for quick runs and tests)."""
        cut = (lambda split, n: split if n is None else (split[0][:n], split[1][:n]))
        return CodeData(self.name, cut(self.train, train), self.valid, cut(self.test, test), self.num_classes)


def load_code_data(name: str, data_dir: str | Path = "data", valid: float = 1 / 12) -> CodeData:
    """`valid` of the training images held out (5,000 of Fashion-MNIST's 60,000 by default)."""
    data = datasets.load(name, Path(data_dir).expanduser())
    scale = 255.0 if data.train_x.dtype == torch.uint8 else 1.0
    x, test_x = data.train_x.float() / scale, data.test_x.float() / scale
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    n_valid = max(1, int(round(valid * len(x))))
    keep, held = order[:-n_valid], order[-n_valid:]
    return CodeData(name, (x[keep], data.train_y[keep]), (x[held], data.train_y[held]), (test_x, data.test_y),
                    data.num_classes)
