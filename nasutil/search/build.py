"""Build a search from its config: every part instantiated, checked and joined to its study, nothing run."""

from __future__ import annotations

import copy
import math
import os
import shlex
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from omegaconf import DictConfig, OmegaConf, open_dict

from nasutil.devices import lookup
from nasutil.evaluator.config import MAX_BATCH_SIZE, available_device
from nasutil.errors import NasutilError, NasutilNotice
from nasutil.predictor import Predictor, PredictTarget
from nasutil.search.config import (TARGET_KEYS, check_numbers, check_one_target, file_space, instantiate_group,
                                   plain, positive_int, refuse_unknown_keys, split_target, switched_off)
from nasutil.search.anchors import PREDICTIONS_PER_ANCHOR, fast_end
from nasutil.search.controller import Search, resolve_pruned_as
from nasutil.search.halving import Halving
from nasutil.search.measurer import HardwareMeasurer, Measurer
from nasutil.search.objectives import Objectives
from nasutil.search.record import Counts
from nasutil.search.rung_informed import RungInformedSampler, informable
from nasutil.search.storage import StudyStorage
from nasutil.search.study_settings import SETTINGS_ATTR, defining_settings, refuse_other_settings
from nasutil.search.trainers import Trainer


@dataclass
class SearchSetup:
    """A search ready to run, and what its report needs to say about how it was made."""

    search: Search
    study_name: str
    folder: Path
    storage: StudyStorage
    n_trials: int
    seed: int
    timeout_s: float | None
    max_trainings: int | None
    sampler_name: str
    resumed: bool
    before: Counts
    anchors_left_out: int = 0  # the `anchors` setting where the study held trials: anchors go first or not at all
    anchors_s: float = 0.0  # seconds spent finding the anchors on predictions

    def describe(self) -> list[str]:
        """The lines that say what searched: space, objectives, sampler, policy, predictor, trainer, hardware."""
        s = self.search
        slo = f" (latency SLO {s.objectives.latency_slo_ms} ms)" if s.objectives.latency_slo_ms else ""
        return [f"search space {s.space_spec}; objectives {', '.join(s.objectives.names)}{slo}; sampler "
                f"{self.sampler_name}{self._all_startup()}; prune {s.policy.describe()} (pruned trials recorded as "
                f"{s.pruned_as}); "
                f"early_stopping {s.early.name}" + (f"; halving {s.halving.describe()}" if s.halving.rungs else "")
                + (f"; {len(s.anchors)} predicted-fastest candidates first (anchors)" if s.anchors else "")
                + (f"; anchors={self.anchors_left_out} not trained: anchors go first in a new study only, and this "
                   f"one holds trials" if self.anchors_left_out and s.worker == 0 else ""),
                f"predictor: {self.predictor_description()}; trainer: {s.trainer.describe()}; "
                f"hardware figures: {s.measuring.description if s.measuring else 'predicted (no measurement)'}"
                + (f"; worker {s.worker}" + (f" on {s.device}" if s.device else "") if s.worker or s.device else "")]

    def _all_startup(self) -> str:
        """Where every trial of the budget is one of the sampler's random start-up trials, say so: a sweep of
        `sampler=tpe,random` at 10 trials gave two identical jobs per seed, and nothing said why."""
        startup = getattr(self.search.study.sampler, "_n_startup_trials", None)
        if not isinstance(startup, int) or self.n_trials > startup:
            return ""
        return (f" (all {self.n_trials} trials are its random start-up trials, sampler.n_startup_trials={startup}: "
                f"a random search)")

    def predictor_description(self) -> str:
        s, t = self.search, self.search.target
        return (f"{s.predictor.describe()}, {t.dtype}, batch {t.batch_size}, {t.mode} -> "
                f"{s.predictor.answering(s.space_spec, t)}")


def space_spec_of(node: DictConfig) -> str:
    """`name`, or for a space configured inline (`search_space=cell search_space.settings.nodes=4`)
    `name:{settings as JSON}`, which the space's `from_option` reads."""
    import json

    refuse_unknown_keys(node, "search_space", ("name", "settings"))
    settings = node.get("settings")
    if settings is None:
        return str(node.name)
    if ":" in str(node.name):
        raise NasutilError(f"search_space.name={node.name} carries its own settings, and search_space=cell adds "
                           f"inline ones (search_space.settings): choose the file without search_space=cell")
    return f"{node.name}:{json.dumps(plain(settings), sort_keys=True)}"


def build_search(cfg: DictConfig, folder: str | os.PathLike[str]) -> SearchSetup:
    """The search the config describes, with its study opened (created, or resumed where it exists);
    `folder` is where `report_search` writes the run's tables and plots (made where missing)."""
    from nasutil.registry import get_space

    if not isinstance(folder, (str, os.PathLike)):
        raise NasutilError(f"build_search's folder is a path, got {type(folder).__name__}")
    folder = Path(folder)
    _check_resolves(cfg)
    n_trials = positive_int(cfg, "n_trials")
    if anchor_count(cfg) > n_trials:  # each anchor is a trial: more than the budget only makes a long short search
        raise NasutilError(f"anchors={anchor_count(cfg)} is more than the search's n_trials={n_trials}: anchors are "
                           f"trained as its first trials (use at most n_trials)")
    seed = cfg.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise NasutilError(f"seed must be an integer, got {seed!r}")
    timeout = cfg.get("timeout_s")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not math.isfinite(timeout) or timeout <= 0):
        raise NasutilError(f"timeout_s must be positive or null, got {timeout!r}")
    max_trainings = cfg.get("max_trainings")
    if max_trainings is not None and (isinstance(max_trainings, bool) or not isinstance(max_trainings, int)
                                      or max_trainings < 1):
        raise NasutilError(f"max_trainings must be a whole number >= 1 or null, got {max_trainings!r}")
    study_name = str(cfg.get("study_name") or "").strip()
    if not study_name:
        raise NasutilError("study_name must not be empty")
    for switch in ("progress", "plots", "verbose"):
        if not isinstance(cfg.get(switch, False), bool):
            raise NasutilError(f"{switch} must be true or false, got {cfg.get(switch)!r}")
    pruned_as_choice = str(cfg.get("pruned_as", "auto"))
    # Failed trials are reported in one line each; Optuna's own warning carries a traceback.
    optuna.logging.set_verbosity(optuna.logging.INFO if cfg.get("verbose") else optuna.logging.ERROR)

    worker = cfg.get("worker", 0)
    if isinstance(worker, bool) or not isinstance(worker, int) or worker < 0:
        raise NasutilError(f"worker must be a whole number >= 0, got {worker!r}")
    device = worker_device(cfg.get("devices"), worker)
    check_target(plain(cfg.get("target")) if cfg.get("target") is not None else {})

    space_spec = space_spec_of(cfg.search_space)
    size = get_space(space_spec).size()
    if size is not None and anchor_count(cfg) > size:
        raise NasutilError(f"anchors={anchor_count(cfg)} is more than the {size:,} architectures of {space_spec}")
    objectives = Objectives.from_config(plain(cfg.objectives))
    policy = instantiate_group(plain(cfg.prune), "prune")
    trainer_node = plain(cfg.trainer)
    if device is not None and "device" in trainer_node:
        trainer_node["device"] = device
    trainer = instantiate_group(trainer_node, "trainer", seed=seed)
    if not isinstance(trainer, Trainer):
        raise NasutilError(f"trainer._target_ made a {type(trainer).__name__}, not a nasutil.search.trainers.Trainer "
                           "(subclass it: it declares what the search reads, such as concurrent_trials)")
    trainer.start_loading()  # checked below, once the anchors' short search has run beside it
    early = plain(cfg.early_stopping)
    pruner = None if switched_off(early, "early_stopping") else instantiate_group(early, "early_stopping")
    if pruner is not None:
        check_pruner(pruner, trainer.max_step, {k: v for k, v in early.items() if k not in ("name", "_target_")})
    halving = halving_for(plain(cfg.get("halving")) if cfg.get("halving") is not None else {}, trainer)
    if getattr(policy, "fidelity", None) == "rung" and not halving.rungs:
        raise NasutilError("prune.fidelity=rung judges candidates at halving's first rung, and with no halving there is "
                           "none: nothing would ever be pruned (use prune.fidelity=auto or final, or halving=pareto)")
    evaluator_node = plain(cfg.evaluator)
    check_one_target(split_target(plain(cfg.predictor))[0], evaluator_node)
    if device is not None and "device" in evaluator_node:
        evaluator_node["device"] = device
    measurer = instantiate_group(evaluator_node, "evaluator")
    if measurer is not None and not isinstance(measurer, HardwareMeasurer):
        raise NasutilError(f"evaluator._target_ made a {type(measurer).__name__}, not a "
                           f"nasutil.search.measurer.HardwareMeasurer")
    storage = instantiate_group(plain(cfg.storage), "storage")
    if not isinstance(storage, StudyStorage):
        raise NasutilError(f"storage._target_ made a {type(storage).__name__}, not a nasutil StudyStorage")
    predictor, target = predictor_for(cfg)
    predictor.check(space_spec, target)
    if measurer is not None:
        measurer.check(space_spec, predictor.device_name)
    elif objectives.scored_on == "measured":
        raise NasutilError("objectives.scored_on=measured needs an evaluator that measures: evaluator=auto on a "
                           "machine with CUDA, or evaluator=table for measurements taken earlier (nb201 on an H200 "
                           "ships with nasutil)")
    if isinstance(measurer, Measurer) and measurer.config.device == "cpu" and lookup(predictor.device_name) is not None:
        raise NasutilError(f"the evaluator measures on this machine's CPU but the predictor predicts for "
                           f"{predictor.device_name}: pruned and trained trials would carry figures of two devices. "
                           f"nasutil ships no predictor for a CPU (profile build times ops on CUDA): use "
                           f"evaluator=none to search on the predicted figures, or a predictor of your own for "
                           f"this CPU (predictor._target_=..., docs/search.md)")
    constrained = bool(objectives.latency_slo_ms or objectives.min_accuracy) or pruned_as_choice != "pruned"
    anchors_wanted = anchor_count(cfg)
    stored = trials_stored(storage.storage, study_name)
    # worker 0 of a study without trials enqueues them (another worker may have made the study a moment before)
    anchors_started = time.perf_counter()
    anchors = (fast_end(get_space(space_spec), space_spec, predictor, target, objectives, anchors_wanted, seed)
               if anchors_wanted and not stored and worker == 0 else [])
    anchors_s = time.perf_counter() - anchors_started
    trainer.check(space_spec)  # before the study is made: a trainer that cannot serve the space touches no storage
    if not stored:
        tell_of_study_by_path(cfg, storage.storage, study_name, folder)
    sampler = _sampler(plain(cfg.sampler), sampler_seed(seed, worker, stored), constrained)
    pruned_as = resolve_pruned_as(pruned_as_choice, sampler)  # before the study: a bad value touches no storage
    if halving.rungs and halving.inform_sampler and informable(sampler):
        sampler = RungInformedSampler(sampler)
    study, resumed = open_study(storage.storage, study_name, objectives.directions, objectives.names, sampler,
                                get_space(space_spec).fingerprint or space_spec,
                                defining_settings(cfg, objectives, predictor, target))
    search = Search(study, space_spec, predictor, target, policy, trainer, objectives, measurer, pruner, pruned_as,
                    worker=worker, device=device, halving=halving, anchors=anchors)
    return SearchSetup(search, study_name, folder, storage, n_trials, seed, timeout, max_trainings,
                       str(cfg.sampler.get("name")), resumed, search.counts(), anchors_wanted if stored else 0,
                       round(anchors_s, 3))


def sampler_seed(seed: int, worker: int, stored: int) -> int:
    """The sampler's seed: `seed` itself for worker 0 of a new study (a search is reproducible from `seed`),
    varied by the worker and by the trials the study already holds, so that neither another worker nor a
    resumed search draws the same sequence again (a random start-up would repeat the first run's trials)."""
    return seed + 7919 * worker + 104729 * stored


#: how the default study name reads the search space (conf/config.yaml); before it did, it read the group as spelled
SPACE_KEY = "${nasutil.space_key:${search_space}}"


def study_name_by_path(cfg: DictConfig) -> str | None:
    """The default study name as it was while it read a space's file by its path as given, not its content;
    None where `study_name` is the user's own, or the two names are one."""
    if not OmegaConf.is_interpolation(cfg, "study_name") or file_space(cfg.search_space) is None:
        return None
    spelled = OmegaConf.to_container(cfg, resolve=False).get("study_name")
    if not isinstance(spelled, str) or SPACE_KEY not in spelled:
        return None
    probe = copy.deepcopy(cfg)
    with open_dict(probe):
        probe.study_name = spelled.replace(SPACE_KEY, "${search_space}")
    name = str(probe.study_name)
    return None if name == str(cfg.study_name) else name


def tell_of_study_by_path(cfg: DictConfig, storage: optuna.storages.BaseStorage, name: str, folder: Path) -> None:
    """A default study over a space's file once took its name from the file's path: where a study of that
    name is found (in this storage, or as the run folder beside this one), say how to resume it, since
    this run starts another."""
    old = study_name_by_path(cfg)
    if old is None:
        return
    beside = Path(*(old if part == name else part for part in folder.parts)) if name in folder.parts else None
    if trials_stored(storage, old) or (beside is not None and beside.is_dir()):
        warnings.warn(f"a study of this search made before a space's file named its study by its content, not "
                      f"its path, is {old!r}: this run starts a new one, {name!r}; to resume that one, re-run with "
                      f"{shlex.quote('study_name=' + old)}", NasutilNotice, stacklevel=2)


def trials_stored(storage: optuna.storages.BaseStorage, name: str) -> int:
    """How many trials the study `name` holds in `storage` (0 where there is no such study yet)."""
    try:
        study_id = storage.get_study_id_from_name(name)
    except KeyError:
        return 0
    return storage.get_n_trials(study_id)


def _check_resolves(cfg: DictConfig) -> None:
    """Every setting resolves: outside a Hydra run (a config from `compose`), one that reads the run's folder,
    such as the default storage's, cannot; say which to set instead of Hydra's own error."""
    from omegaconf.errors import InterpolationResolutionError

    try:
        OmegaConf.to_container(cfg, resolve=True)
    except InterpolationResolutionError as exc:
        if "HydraConfig was not set" not in str(exc):
            raise
        raise NasutilError(f"{getattr(exc, 'full_key', '') or 'a setting'} reads the run folder, which only a "
                           f"nasutil-search run has: from Python give the study a storage of its own "
                           f"(storage=url storage.url=sqlite:///study.db, or storage=journal storage.path=...)"
                           ) from None


MAX_TARGET_BATCH = MAX_BATCH_SIZE  # the largest batch a measurement or a prediction takes


def check_target(node: dict[str, Any]) -> None:
    """The hardware target, before the predictor and the evaluator each read it (a batch size of 2.5 would be
    cut to 2 by one of them, and reported under the other's name)."""
    refuse_unknown_keys(node, "target", ("device", *TARGET_KEYS))
    check_numbers(node, "target")
    size = node.get("batch_size")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_TARGET_BATCH):
        raise NasutilError(f"target.batch_size must be a whole number from 1 to {MAX_TARGET_BATCH}, got {size!r}")


#: the most anchors a search takes: their short search of 4,096 predictions takes minutes on a CPU
MAX_ANCHORS = 128


def anchor_count(cfg: DictConfig) -> int:
    """The `anchors` setting: how many predicted fast-end candidates a fresh study trains first."""
    count = cfg.get("anchors", 0)
    if count is None:
        return 0
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise NasutilError(f"anchors must be a whole number >= 0 (0: none), got {count!r}")
    if count > MAX_ANCHORS:  # 20,000 ran a short search of 640,000 predictions, for hours, before any trial
        raise NasutilError(f"anchors={count} is more than {MAX_ANCHORS}: each anchor costs the short search "
                           f"{PREDICTIONS_PER_ANCHOR} predictions, whose time grows with the square of their number")
    return count


def halving_for(node: dict[str, Any], trainer: Trainer) -> Halving:
    """The `halving` group's policy; one with rungs needs a trainer that validates part of the way."""
    if switched_off(node, "halving"):
        return Halving()
    halving = instantiate_group(node, "halving")
    if not isinstance(halving, Halving):
        raise NasutilError(f"halving._target_ made a {type(halving).__name__}, not a nasutil.search.halving.Halving")
    if halving.rungs and not trainer.reports_rungs:
        what = (f"halving={node.get('name')}" if node.get("name", "none") != "none"
                else f"halving._target_={node.get('_target_')}")  # a class of the user's own under halving=none
        raise NasutilError(f"{what} cuts candidates part of the way through their training, and "
                           f"trainer {trainer.name!r} reports only finished ones (use trainer=torch, or halving=none)")
    return halving


def check_pruner(pruner: optuna.pruners.BasePruner, max_step: int, settings: dict[str, Any] | None = None) -> None:
    """Run a copy of the pruner on a throwaway study, two trials reporting every step: settings it cannot
    work with (Hyperband with reduction_factor=0, say) fail here in one line, not in every trial; the line
    names the settings, since the pruner's own error rarely does ("division by zero")."""
    import copy

    trial_pruner = copy.deepcopy(pruner)  # a pruner may keep state from the first study it sees
    study = optuna.create_study(direction="maximize", pruner=trial_pruner,
                                sampler=optuna.samplers.RandomSampler(seed=0))
    try:
        for value in (50.0, 40.0):
            trial = study.ask()
            for step in range(1, max(1, max_step) + 1):
                trial.report(value, step)
                if trial.should_prune():
                    break
            study.tell(trial, value)
    except Exception as exc:
        given = ", ".join(f"early_stopping.{k}={v}" for k, v in (settings or {}).items()) or "these settings"
        raise NasutilError(f"early_stopping: {type(pruner).__name__} cannot run with {given} "
                           f"({type(exc).__name__}: {exc})") from None


def worker_device(devices: Any, worker: int) -> str | None:
    """The device of worker `worker` from the `devices` list (null: none chosen); one that is not on this
    machine is a one-line error before anything runs."""
    if devices is None:
        return None
    if isinstance(devices, str):
        devices = [d for d in devices.split(",") if d.strip()]
    devices = [str(d).strip() for d in devices]
    if not devices:
        raise NasutilError("devices must name at least one device, e.g. devices=[cuda:0,cuda:1], or be null")
    return available_device(devices[worker % len(devices)], "devices")


def predictor_for(cfg: DictConfig) -> tuple[Predictor, PredictTarget]:
    """The config's predictor and the target (dtype, batch size, mode on its device) it predicts for."""
    target_node, predictor_node = split_target(plain(cfg.predictor))
    predictor = instantiate_group(predictor_node, "predictor")
    if not isinstance(predictor, Predictor):
        raise NasutilError(f"predictor._target_ made a {type(predictor).__name__}, not a nasutil Predictor")
    return predictor, predictor.target(**target_node)


def _sampler(node: dict[str, Any], seed: int, constraints_needed: bool) -> optuna.samplers.BaseSampler:
    extra: dict[str, Any] = {"seed": seed}
    if constraints_needed and not hasattr(optuna.Trial, "set_constraint"):
        extra["constraints_func"] = lambda t: list((t.user_attrs.get("constraints") or {"none": 0.0}).values())
    return instantiate_group(node, "sampler", **extra)


#: how long a worker that finds a study without trials or stored settings waits for its maker to store them
#: (workers started together: the maker stores them right after making it; a study made before settings were
#: stored, and never run, costs this wait once)
MAKER_WAIT_S = 5.0


def open_study(storage: optuna.storages.BaseStorage, name: str, directions: list[str], metrics: list[str],
               sampler: optuna.samplers.BaseSampler, space_fingerprint: str | None = None,
               settings: dict[str, Any] | None = None) -> tuple[optuna.Study, bool]:
    """The study `name` (created if new), refusing one that optimises other objectives, that was made
    over another space or another version of it (a cell config edited since), or under other settings
    that decide what its figures mean (`settings`: `study_settings.defining_settings`); True if it existed.
    `space_fingerprint` is a space's digest of its settings, or its name where it has none (a built-in
    space: nb201 and a cell space once shared a study and one front). Of workers that open a new study
    at once, the one that makes it stores what it was made with, and the others compare theirs with that."""
    existed = _study_id(storage, name) is not None
    made = _make_study(storage, name, directions)  # tried where it exists too: an unwritable storage fails here
    if made is not None:
        storage.set_study_user_attr(made, "metrics", metrics)
        if space_fingerprint is not None:
            storage.set_study_user_attr(made, "space_fingerprint", space_fingerprint)
        if settings is not None:  # stored last: a worker that joins meanwhile waits for it
            storage.set_study_user_attr(made, SETTINGS_ATTR, settings)
    else:
        _refuse_another_study(storage, name, directions, metrics, space_fingerprint, settings)
    study = optuna.load_study(study_name=name, storage=storage, sampler=sampler)
    if study.metric_names is None:
        with warnings.catch_warnings():  # "experimental" notices, also in launcher processes
            warnings.simplefilter("ignore")
            study.set_metric_names(metrics)  # optuna-dashboard then shows "accuracy", not "Objective 0"
    return study, existed


def _study_id(storage: optuna.storages.BaseStorage, name: str) -> int | None:
    try:
        return storage.get_study_id_from_name(name)
    except KeyError:
        return None


def _make_study(storage: optuna.storages.BaseStorage, name: str, directions: list[str]) -> int | None:
    """The new study's id, or None where another worker made it first."""
    try:
        return storage.create_new_study([optuna.study.StudyDirection[d.upper()] for d in directions], name)
    except optuna.exceptions.DuplicatedStudyError:
        return None


def _refuse_another_study(storage: optuna.storages.BaseStorage, name: str, directions: list[str],
                          metrics: list[str], space_fingerprint: str | None,
                          settings: dict[str, Any] | None) -> None:
    """Refuse to join the existing study `name` where it was made for other objectives, another space or
    other settings. One without trials may have been made a moment ago by another worker that has not
    stored its settings yet: wait for them."""
    study_id = storage.get_study_id_from_name(name)
    attrs = storage.get_study_user_attrs(study_id)
    deadline = time.monotonic() + MAKER_WAIT_S
    while (settings is not None and SETTINGS_ATTR not in attrs and storage.get_n_trials(study_id) == 0
           and time.monotonic() < deadline):
        time.sleep(0.05)
        attrs = storage.get_study_user_attrs(study_id)
    existing = [d.name.lower() for d in storage.get_study_directions(study_id)]
    stored = attrs.get("metrics")
    if existing != directions or (stored is not None and list(stored) != metrics):
        raise NasutilError(f"study {name!r} in this storage optimises {stored or existing}, not {metrics} "
                           "(choose another study_name or the same objectives)")
    made_over = attrs.get("space_fingerprint")
    if made_over is not None and made_over != space_fingerprint:
        raise NasutilError(f"study {name!r} was made over another search space, or another version of it (its "
                           f"settings or file changed since: {made_over} then, {space_fingerprint} now); choose "
                           f"another study_name, or restore the space")
    if settings is not None:
        refuse_other_settings(name, attrs.get(SETTINGS_ATTR), settings)
