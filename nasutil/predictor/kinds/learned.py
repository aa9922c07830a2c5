"""`learned`: the profile's gradient-boosted model for the space and configuration, on the arch encoding
and operator features (see `nasutil.predictor.features`)."""

from __future__ import annotations

import numpy as np

from nasutil.errors import NasutilError
from nasutil.predictor.analytical import RooflineModel
from nasutil.predictor.features import feature_vector
from nasutil.predictor.prediction import PredictTarget
from nasutil.predictor.registry import Candidates, ProfileKind, register_predictor


@register_predictor
class LearnedPredictor(ProfileKind):
    name = "learned"

    def check(self, space_spec: str, target: PredictTarget) -> None:
        if self.profile.learned_for(space_spec, target.dtype, target.batch_size, target.mode) is None:
            raise NasutilError(f"profile has no learned model for {space_spec} at {target.dtype}, batch "
                               f"{target.batch_size}, {target.mode} (try --predictor operators or analytical)")

    def latencies_ms(self, candidates: Candidates, target: PredictTarget) -> list[float]:
        entry = self.profile.learned_for(candidates.space_spec, target.dtype, target.batch_size, target.mode)
        analytical = RooflineModel(self.profile.kernel_model(target.dtype, target.mode))
        vectors = np.array([feature_vector(arch.encode(), ops, target, entry.features, analytical,
                                           self.profile.op_model, candidates.space_spec)
                            for arch, ops in zip(candidates.archs, candidates.ops)])
        return [float(v) for v in entry.model.predict_ms(vectors)] if len(vectors) else []
