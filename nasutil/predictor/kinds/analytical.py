"""`analytical`: the per-kernel roofline with the profile's constants; serves any space and configuration."""

from __future__ import annotations

from nasutil.predictor.analytical import RooflineModel
from nasutil.predictor.prediction import PredictTarget
from nasutil.predictor.registry import Candidates, ProfileKind, register_predictor


@register_predictor
class AnalyticalPredictor(ProfileKind):
    name = "analytical"

    def latencies_ms(self, candidates: Candidates, target: PredictTarget) -> list[float]:
        model = RooflineModel(self.profile.kernel_model(target.dtype, target.mode))
        return [model.predict_latency_ms(ops, target) for ops in candidates.ops]
