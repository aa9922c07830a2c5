"""Measure how well a network uses the device it runs on.

`Evaluator` measures architectures of any space (or torchvision/timm models) in an isolated worker
with a time limit and a results cache; `measure_model` times one module in this process.

    from nasutil.evaluator import Candidate, Evaluator, MeasureConfig
    with Evaluator(MeasureConfig(device="cuda", dtype="fp16", batch_size=256, mode="cudagraph")) as ev:
        for m in ev.measure_many([Candidate("nb201", a) for a in archs], progress=True):
            print(m.arch, m.latency_ms, m.utilization)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nasutil.lazy_imports import lazy_attributes

if TYPE_CHECKING:
    from nasutil.evaluator.candidate import Candidate
    from nasutil.evaluator.config import MeasureConfig
    from nasutil.evaluator.evaluator import Evaluator
    from nasutil.evaluator.measurement import Measurement

__all__ = ["Candidate", "Evaluator", "MeasureConfig", "Measurement"]

# Each name is imported on first use, so that reading a setting does not import torch.
__getattr__, __dir__ = lazy_attributes(__name__, {
    'Candidate': 'nasutil.evaluator.candidate',
    'MeasureConfig': 'nasutil.evaluator.config',
    'Evaluator': 'nasutil.evaluator.evaluator',
    'Measurement': 'nasutil.evaluator.measurement',
})
