"""A third-party search space, installed through the entry-point group like any plugin.

A plain CNN whose only decision is its width; the widths `hang` and `crash` stand in
for candidates that hang or kill the process, to exercise the evaluator's isolation.
"""

import os
import time
from dataclasses import dataclass

import numpy as np
import torch.nn as nn

from nasutil import Arch, InvalidArchError, SearchSpace
from nasutil.colocate.strategies import Prepared, Strategy

WIDTHS = (8, 16, 32)
SPECIAL = ("hang", "crash", "raise")


@dataclass(frozen=True)
class TinyArch(Arch):
    width: int | str
    space = "tiny"

    def to_string(self):
        return f"w{self.width}" if isinstance(self.width, int) else self.width

    def encode(self):
        return np.array([self.width / 32 if isinstance(self.width, int) else 0.0], dtype=np.float32)


class TinySpace(SearchSpace):
    name = "tiny"
    description = "a third-party test space"

    def sample(self, rng):
        return TinyArch(int(rng.choice(WIDTHS)))

    def suggest(self, trial):
        return TinyArch(trial.suggest_categorical("width", WIDTHS))

    def parse(self, text):
        if text in SPECIAL:
            return TinyArch(text)
        if not text.startswith("w") or not text[1:].isdigit() or int(text[1:]) not in WIDTHS:
            raise InvalidArchError(f"bad tiny arch {text!r}")
        return TinyArch(int(text[1:]))

    def build(self, arch, num_classes=10, input_size=None):
        if arch.width == "hang":
            time.sleep(3600)
        if arch.width == "crash":
            os._exit(3)
        if arch.width == "raise":
            raise RuntimeError("this candidate cannot be built")
        return nn.Sequential(nn.Conv2d(3, arch.width, 3, padding=1), nn.ReLU(),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(arch.width, num_classes))

    @property
    def encoding_size(self):
        return 1

    def size(self):
        return len(WIDTHS)

    def enumerate(self):
        return iter(TinyArch(w) for w in WIDTHS)


class ReversedOrder(Strategy):
    """A third-party co-location strategy: the networks one after another, last first (eagerly)."""

    name = "reversed"

    def prepare(self, models, inputs):
        def run():
            outputs = [model(x) for model, x in reversed(list(zip(models, inputs)))]
            return outputs[::-1]

        return Prepared(run)
