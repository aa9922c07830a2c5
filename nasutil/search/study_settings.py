"""The settings that decide what a study's figures mean, stored on the study when it is made.

A study resumed under its `study_name` with another target batch size, predictor, dataset or way of scoring
would add trials whose figures mean something else to the trials and the front it holds. These settings
are kept as a study user attribute by the process that makes the study and compared by every later one
that opens it. Settings that change only how the search runs or which candidates it tries (`n_trials`,
`timeout_s`, `seed`, the sampler, the prune policy, halving, a population's size, `devices`) are free to
change on resume. The evaluator is not among them: every measured figure records where it came from
(`measured_device`, `measured_source`), a table's configuration and device are checked against the target
and the predictor, and `objectives.scored_on` (stored) says whether a trial may be scored on a prediction.
What the predictor reads from a file (a profile, a table) is stored as a digest of its content too, and
compared in place of its name or path: a profile refitted in place is another predictor, and a shipped
profile named by its name or by its file's path is the same one.
"""

from __future__ import annotations

import json
from typing import Any

from omegaconf import DictConfig

from nasutil.errors import NasutilError
from nasutil.predictor import Predictor, PredictTarget
from nasutil.search.config import plain
from nasutil.search.objectives import Objectives

#: the study user attribute that holds them: setting -> value, as `defining_settings` gives them
SETTINGS_ATTR = "defining_settings"

#: trainer settings that decide what its accuracy means, where the trainer has them: its data and its recipe
TRAINER_DEFINING = ("dataset", "fidelities", "epochs", "batch_size", "lr", "momentum", "weight_decay",
                    "valid_fraction", "max_batches_per_epoch", "base", "k", "encoder", "decoder", "loss",
                    "base_epochs", "train_images")
#: trainer settings that say only how, where or how fast it trains, or name it: free to change on resume
TRAINER_RUNNING = ("name", "data_dir", "device", "amp", "channels_last", "threads", "seed", "population", "ahead",
                   "host_turns", "round_size", "lead_rounds", "warm_up_steps", "eval_batch", "capture",
                   "memory_budget_gb", "graphs", "compile", "base_dir", "finish_together", "rung_valid_images")
#: predictor settings that choose what predicts (read from the config node, where the predictor has them)
PREDICTOR_DEFINING = ("profile", "path")
#: the digest of the content of what the predictor reads (`Predictor.content_digest`), where it reads a file: where
#: a study stored it, it is compared in place of the file's name or path, which is only shown
CONTENT = "predictor.content"
#: the settings that spell what the predictor reads
SPELLED = tuple(f"predictor.{key}" for key in PREDICTOR_DEFINING)
#: the settings that name what made a group's figures: where one changed, the group's others go unlisted
IDENTITY = ("predictor.kind", "trainer._target_")
#: shown for a setting that is not set
UNSET = "unset"


def defining_settings(cfg: DictConfig, objectives: Objectives, predictor: Predictor,
                      target: PredictTarget) -> dict[str, Any]:
    """Setting -> value, for every setting of `cfg` that decides what a trial's stored figures mean: how
    trained trials are scored and their constraints, the hardware target the figures refer to (the
    predictor's, which the evaluator must share), what predicts them, and what the accuracy is of."""
    target_node = plain(cfg.get("target")) if cfg.get("target") is not None else {}
    predictor_node = plain(cfg.predictor)
    trainer_node = plain(cfg.trainer)
    settings: dict[str, Any] = {
        "objectives.scored_on": objectives.scored_on,
        "objectives.latency_slo_ms": objectives.latency_slo_ms,
        "objectives.min_accuracy": objectives.min_accuracy,
        "target.device": str(target_node.get("device", "")).split(":", 1)[0] or None,  # cuda:1 is still cuda
        "target.dtype": target.dtype,
        "target.batch_size": target.batch_size,
        "target.mode": target.mode,
        "predictor.kind": predictor.name,
        "predictor.device": predictor.device_name or None,
    }
    settings.update({f"predictor.{key}": predictor_node[key] for key in PREDICTOR_DEFINING if key in predictor_node})
    if predictor.content_digest is not None:
        settings[CONTENT] = predictor.content_digest
    settings["trainer._target_"] = trainer_node.get("_target_")
    for key in TRAINER_DEFINING:
        if key == "fidelities" and isinstance(trainer_node.get(key), list) and trainer_node[key]:
            settings["trainer.fidelities[-1]"] = trainer_node[key][-1]  # the objective; earlier ones feed pruners
        elif key in trainer_node:
            settings[f"trainer.{key}"] = trainer_node[key]
    return json.loads(json.dumps(settings, default=str))  # as the storage gives them back (tuples as lists)


def refuse_other_settings(name: str, stored: Any, now: dict[str, Any]) -> None:
    """Refuse, in one line naming each setting then and now, to open study `name` under settings that
    differ from those it was made with (`stored`). A study made before they were stored holds none, and a
    setting not among those stored was not recorded then: neither is judged."""
    if not isinstance(stored, dict):
        return
    changed: dict[str, str] = {}
    for key, then in stored.items():
        value = now.get(key, UNSET)
        if value == then or (key in SPELLED and CONTENT in stored):  # a file is judged by its content
            continue
        if key == CONTENT:
            changed.update([_content_change(stored, now)])
        else:
            changed[key] = f"{_shown(then)} then, {_shown(value)} now"
    for key in IDENTITY:
        if key in changed:
            group = key.split(".", 1)[0] + "."
            changed = {k: v for k, v in changed.items() if k == key or not k.startswith(group)}
    if changed:
        listed = "; ".join(f"{key} {change}" for key, change in changed.items())
        raise NasutilError(f"study {name!r} was made with other settings that decide what its figures mean "
                           f"({listed}): choose another study_name, or restore the "
                           f"setting{'s' if len(changed) > 1 else ''}")


def _content_change(stored: dict[str, Any], now: dict[str, Any]) -> tuple[str, str]:
    """The setting that names what the predictor reads, and how that differs: under the same name its content
    changed since the study was made (a profile refitted in place), or another name reads other content."""
    key = next((k for k in SPELLED if k in stored or k in now), CONTENT)
    digests = f"digest {_shown(stored[CONTENT])} then, {_shown(now.get(CONTENT, UNSET))} now"
    if key == CONTENT:
        return key, digests
    then, value = stored.get(key, UNSET), now.get(key, UNSET)
    if then == value:
        return key, f"{_shown(value)}: its content changed since the study was made, {digests}"
    return key, f"{_shown(then)} then, {_shown(value)} now, with other content, {digests}"


def _shown(value: Any) -> str:
    return "null" if value is None else value if isinstance(value, str) else json.dumps(value)
