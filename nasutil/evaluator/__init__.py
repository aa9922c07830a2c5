"""Measure how well a network uses the device it runs on.

`measure_model` times one module in-process; `Evaluator` measures architectures
of any space (or torchvision/timm models) in an isolated worker with a time
limit and a results cache.
"""

from nasutil.evaluator.config import MeasureConfig
from nasutil.evaluator.measurement import Measurement

__all__ = ["MeasureConfig", "Measurement"]
