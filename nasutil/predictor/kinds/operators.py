"""`operators`: measured op latencies from the profile's table for the configuration, summed with the
table's overlap constants (see `nasutil.predictor.op_tables`)."""

from __future__ import annotations

from nasutil.errors import NasutilError
from nasutil.predictor.prediction import PredictTarget
from nasutil.predictor.registry import Candidates, ProfileKind, register_predictor


@register_predictor
class OperatorsPredictor(ProfileKind):
    name = "operators"

    def check(self, space_spec: str, target: PredictTarget) -> None:
        model = self.profile.op_model
        if model is None or target.key not in model.tables:
            known = ", ".join(sorted(model.tables)) if model else "none"
            raise NasutilError(f"profile has no operator table for {target.key} (has: {known}; "
                               f"try --predictor analytical)")

    def latencies_ms(self, candidates: Candidates, target: PredictTarget) -> list[float]:
        model = self.profile.op_model
        return [model.predict_latency_ms(ops, target, candidates.space_spec) for ops in candidates.ops]
