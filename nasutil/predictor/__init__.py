"""Predict latency, throughput and utilization of a candidate without running it on the target GPU.

    from nasutil.predictor import predict_many
    for p in predict_many("nb201", archs):            # shipped H200 profile, fp16, batch 256, CUDA graph
        print(p.arch, p.latency_ms, p.utilization, p.params)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nasutil.lazy_imports import lazy_attributes

if TYPE_CHECKING:
    from nasutil.predictor.prediction import Prediction, PredictTarget
    from nasutil.predictor.profile import DeviceProfile, load_profile
    from nasutil.predictor.registry import (Candidates, Predictor, ProfileKind, make_predictor, open_profile,
                                            predict_many, predictor_class, predictor_names, register_predictor)

__all__ = ["Candidates", "DeviceProfile", "Prediction", "PredictTarget", "Predictor", "ProfileKind", "load_profile",
           "make_predictor", "open_profile", "predict_many", "predictor_class", "predictor_names",
           "register_predictor"]

# Each name is imported on first use, so that reading a setting does not import torch.
__getattr__, __dir__ = lazy_attributes(__name__, {
    'Prediction': 'nasutil.predictor.prediction',
    'PredictTarget': 'nasutil.predictor.prediction',
    'DeviceProfile': 'nasutil.predictor.profile',
    'load_profile': 'nasutil.predictor.profile',
    'Candidates': 'nasutil.predictor.registry',
    'Predictor': 'nasutil.predictor.registry',
    'ProfileKind': 'nasutil.predictor.registry',
    'make_predictor': 'nasutil.predictor.registry',
    'open_profile': 'nasutil.predictor.registry',
    'predict_many': 'nasutil.predictor.registry',
    'predictor_class': 'nasutil.predictor.registry',
    'predictor_names': 'nasutil.predictor.registry',
    'register_predictor': 'nasutil.predictor.registry',
})
