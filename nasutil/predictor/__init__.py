"""Predict latency, throughput and utilization of a candidate without running it on the target GPU."""

from nasutil.predictor.base import Prediction, PredictTarget, Predictor

__all__ = ["Prediction", "PredictTarget", "Predictor"]
