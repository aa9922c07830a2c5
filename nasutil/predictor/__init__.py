"""Predict latency, throughput and utilization of a candidate without running it on the target GPU.

    from nasutil.predictor import predict_many
    for p in predict_many("nb201", archs):            # shipped H200 profile, fp16, batch 256, CUDA graph
        print(p.arch, p.latency_ms, p.utilization, p.params)
"""

from nasutil.predictor.prediction import Prediction, PredictTarget
from nasutil.predictor.profile import DeviceProfile, load_profile
from nasutil.predictor.registry import (Candidates, Predictor, ProfileKind, make_predictor, open_profile,
                                        predict_many, predictor_class, predictor_names, register_predictor)

__all__ = ["Candidates", "DeviceProfile", "Prediction", "PredictTarget", "Predictor", "ProfileKind", "load_profile",
           "make_predictor", "open_profile", "predict_many", "predictor_class", "predictor_names",
           "register_predictor"]
