"""The front's fast end, found on predictions before anything trains.

A search of accuracy against a hardware figure looks for a front whose one end is the fastest (or
smallest, or best-utilizing) candidate that still learns. That end is known without training, from the
predictor alone, yet a sampler finds it only by luck: of NAS-Bench-201's 15,625 cells, 50 lie within
10% of the highest predicted H200 throughput, so a 64-trial search, sampled at random, holds one about
one time in five, and the front it reports, and its hypervolume, change from seed to seed with that luck.

`fast_end` runs a short throwaway search on predictions alone (Optuna's TPE on the space's own
`suggest`, the first hardware objective as its one objective; `PREDICTIONS_PER_ANCHOR` predictions for
each candidate wanted, at least 256: with the H200 profile on nb201, 0.45 s for 256 on a 2-core CPU,
`benchmarks/anchor_ranking.py`) and returns the trial parameters of the best `count` distinct candidates it saw; the
search enqueues them as its first trials (`anchors` in the config), so that they train first, in a population as one
at a time. Their parameters are the space's own, so the study's sampler learns from them as from any
trial.

The short search ranks on the profile's operator sum where the profile has a table at the target, not on
the learned model that a search otherwise predicts with: boosted trees cannot predict beyond the latencies
they were fitted on, and the fast end lies at that edge. Of the 15,625 cells measured on the H200
(`nb201_h200`), the learned model's 16 predicted fastest sit at measured ranks 0-36 in no order (it predicts
the fastest cell 25% slow, within 2% of 23 other cells' predictions); the operator sum's are measured ranks
0-15 in order (`fast_end_ranker`, `benchmarks/anchor_ranking.py`).
"""

from __future__ import annotations

from typing import Any

import optuna

from nasutil.devices import same_device
from nasutil.errors import NasutilError
from nasutil.predictor import Predictor, PredictTarget
from nasutil.predictor.profile import DeviceProfile, builtin_profiles
from nasutil.predictor.registry import ProfileKind, open_profile, predictor_class
from nasutil.search.objectives import Objectives
from nasutil.search.record import hardware_figures, predicted_figures
from nasutil.space import SearchSpace


#: predictions the short search makes for each candidate wanted (at least MIN_PREDICTIONS): the more
#: candidates wanted, the further down the ranking their tail lies, and a fixed 128 left the best 16 of
#: a search far from the predictor's own top 16 (experiments/nb201_pruning/README.md, "Sixteen anchors on fresh
#: seeds"); with 128, four anchors ranked on the operator sum held the H200's measured fastest cell on 13 of 20 seeds
#: (130-149), with 256 on all 20
MIN_PREDICTIONS, PREDICTIONS_PER_ANCHOR = 256, 32


def fast_end(space: SearchSpace, space_spec: str, predictor: Predictor, target: PredictTarget,
             objectives: Objectives, count: int, seed: int, predictions: int | None = None,
             ranker: Predictor | None = None) -> list[dict[str, Any]]:
    """Trial parameters of the `count` candidates ranked best on the first hardware objective among
    `predictions` (by default `PREDICTIONS_PER_ANCHOR` a candidate, at least `MIN_PREDICTIONS`) proposed
    by a TPE search on `ranker`'s predictions (by default `fast_end_ranker`; none if no objective is a
    hardware one)."""
    if count <= 0 or not objectives.hardware:
        return []
    if predictions is None:
        predictions = max(MIN_PREDICTIONS, PREDICTIONS_PER_ANCHOR * count)
    metric = objectives.hardware[0]
    predictor = ranker or fast_end_ranker(predictor, space_spec, target)
    sampler = optuna.samplers.TPESampler(multivariate=True, n_startup_trials=min(16, predictions), seed=seed)
    study = optuna.create_study(direction=metric.direction, sampler=sampler)
    seen: dict[str, tuple[float, dict[str, Any]]] = {}
    for _ in range(max(predictions, count)):
        trial = study.ask()
        arch = space.suggest(trial)
        text = arch.to_string()
        if text not in seen:
            scored = predictor.predict_many(space_spec, [arch], target)[0]
            record = predicted_figures(scored)
            value = objectives.values({**record, **hardware_figures(record)}, missing_as_worst=True)[
                objectives.metrics.index(metric)]
            seen[text] = (value, dict(trial.params))
        study.tell(trial, seen[text][0])
    ranked = sorted(seen.values(), key=lambda vp: vp[0], reverse=metric.direction == "maximize")
    return [params for _, params in ranked[:count]]


def fast_end_ranker(predictor: Predictor, space_spec: str, target: PredictTarget) -> Predictor:
    """The model that ranks the fast end: the operator sum of `predictor`'s profile (for a predictor without
    one, a prediction table say, the shipped profile of its device) where that profile has a table at `target`
    (sums of timed ops order the fastest cells as measured, where trees flatten), else `predictor` itself."""
    if predictor.name == "operators":
        return predictor
    profile = predictor.profile if isinstance(predictor, ProfileKind) else shipped_profile_of(predictor.device_name)
    if profile is None:
        return predictor
    ranker = predictor_class("operators")(profile)
    try:
        ranker.check(space_spec, target)
    except NasutilError:
        return predictor
    return ranker


def shipped_profile_of(device_name: str) -> DeviceProfile | None:
    """The profile nasutil ships for this device, if any."""
    if not device_name:
        return None
    profiles = (open_profile(name) for name in builtin_profiles())
    return next((profile for profile in profiles if same_device(profile.device_name, device_name)), None)
