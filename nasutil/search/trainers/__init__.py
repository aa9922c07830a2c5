"""Trainers: how a surviving candidate gets its accuracy (a table lookup or real training).

A config names the trainer class by `_target_` (`conf/trainer/*.yaml`); your own is any `Trainer`
subclass, named the same way.
"""

from nasutil.search.trainers.base import Reporter, Trainer, TrainResult

__all__ = ["Reporter", "Trainer", "TrainResult"]
