"""`nasutil-search`: the Hydra app. Configs live in `conf/` (installed as `nasutil_conf`).

    nasutil-search                                   # the built-in default (nb201, tabular, NSGA-II)
    nasutil-search sampler=tpe prune=utilization_quantile n_trials=200
    nasutil-search -m seed=0,1,2 prune=none,dominated_throughput

Every user error (unknown option, bad value, unreachable storage) ends with one line on stderr
and exit code 2; results already stored in the study are never touched by a failed start.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from nasutil.errors import NasutilError

PROG = "nasutil-search"
CONFIG_PATH = "pkg://nasutil_conf"
EXIT_USAGE = 2
log = logging.getLogger(__name__)


def config_digest(*nodes: Any) -> str:
    """Eight hex digits that change with any setting of the given config nodes: the default study name
    carries it, so re-running the same search resumes it and changing how it searches starts anew."""
    import hashlib

    plain = [OmegaConf.to_container(n, resolve=True) if OmegaConf.is_config(n) else n for n in nodes]
    return hashlib.sha256(json.dumps(plain, sort_keys=True, default=str).encode()).hexdigest()[:8]


# `${nasutil.digest:...}` in conf/config.yaml's default study_name.
OmegaConf.register_new_resolver("nasutil.digest", config_digest, replace=True)


def _positive_int(cfg: DictConfig, key: str) -> int:
    value = cfg.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise NasutilError(f"{key} must be a positive integer, got {value!r}")
    return value


def _plain(node: Any) -> dict[str, Any]:
    return OmegaConf.to_container(node, resolve=True) if node is not None else {}  # type: ignore[return-value]


def _instantiate(node: dict[str, Any], what: str, **extra: Any) -> Any:
    from hydra.utils import instantiate

    params = {k: v for k, v in node.items() if k != "name"}
    if "_target_" not in params:
        raise NasutilError(f"{what} config needs a _target_ (an Optuna class path)")
    try:
        return instantiate(params, **extra)
    except Exception as exc:
        cause = exc.__cause__ or exc
        raise NasutilError(f"cannot create {what} {node.get('name', params['_target_'])!r}: "
                           f"{str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__}") from None


def _sampler(cfg: dict[str, Any], seed: int, constraints_needed: bool):
    import inspect

    import optuna

    extra: dict[str, Any] = {}
    target = cfg.get("_target_", "")
    cls = getattr(optuna.samplers, target.rsplit(".", 1)[-1], None) if target.startswith("optuna.samplers.") else None
    accepted = inspect.signature(cls.__init__).parameters if cls is not None else {}
    if "seed" in accepted or cls is None:
        extra["seed"] = seed
    if constraints_needed and not hasattr(optuna.Trial, "set_constraint") and "constraints_func" in accepted:
        extra["constraints_func"] = lambda t: list((t.user_attrs.get("constraints") or {"none": 0.0}).values())
    return _instantiate(cfg, "sampler", **extra)


def _study(storage, name: str, directions: list[str], metrics: list[str], sampler, create: bool = True):
    import optuna

    try:
        study_id = storage.get_study_id_from_name(name)
    except KeyError:
        study_id = None
    if study_id is not None:
        existing = [d.name.lower() for d in storage.get_study_directions(study_id)]
        stored = storage.get_study_user_attrs(study_id).get("metrics")
        if existing != directions or (stored is not None and list(stored) != metrics):
            raise NasutilError(f"study {name!r} in this storage optimises {stored or existing}, not {metrics} "
                               "(choose another study_name or the same objectives)")
    study = optuna.create_study(storage=storage, sampler=sampler, study_name=name, directions=directions,
                                load_if_exists=True)
    if study_id is None:
        study.set_user_attr("metrics", metrics)
    return study, study_id is not None


def run_search(cfg: DictConfig) -> dict[str, Any]:
    """The task: build the parts from the config, run the study to its budget, write and print results."""
    import optuna
    from hydra.core.hydra_config import HydraConfig

    from nasutil.registry import get_space
    from nasutil.search.controller import PRUNED_AS, Search, resolve_pruned_as
    from nasutil.search.measure import make_measurer
    from nasutil.search.objectives import Objectives
    from nasutil.search.outputs import write_tables
    from nasutil.search.plots import write_plots
    from nasutil.search.predictors import make_predictor
    from nasutil.search.prune import make_policy
    from nasutil.search.storage import open_storage
    from nasutil.search.summary import print_summary
    from nasutil.search.trainers import make_trainer

    started = time.perf_counter()
    n_trials = _positive_int(cfg, "n_trials")
    seed = cfg.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise NasutilError(f"seed must be an integer, got {seed!r}")
    timeout = cfg.get("timeout_s")
    if timeout is not None and (not isinstance(timeout, (int, float)) or timeout <= 0):
        raise NasutilError(f"timeout_s must be positive or null, got {timeout!r}")
    study_name = str(cfg.get("study_name") or "").strip()
    if not study_name:
        raise NasutilError("study_name must not be empty")
    folder = Path(HydraConfig.get().runtime.output_dir)
    # Failed trials are reported in one line each below; Optuna's own warning carries a traceback.
    optuna.logging.set_verbosity(optuna.logging.INFO if cfg.get("verbose") else optuna.logging.ERROR)

    space_spec = str(cfg.search_space.name)
    space = get_space(space_spec)
    objectives = Objectives.from_config(_plain(cfg.objectives))
    policy = make_policy(_plain(cfg.prune))
    trainer = make_trainer(_plain(cfg.trainer), seed=seed)
    trainer.check(space_spec)
    pruner_cfg = _plain(cfg.pruner)
    pruner = None if pruner_cfg.get("name", "none") == "none" else _instantiate(pruner_cfg, "pruner")
    measurer = make_measurer(_plain(cfg.evaluator))
    storage_cfg = _plain(cfg.storage)
    url = str(storage_cfg.get("url"))
    storage = open_storage(url, storage_cfg.get("heartbeat_interval"), storage_cfg.get("grace_period"),
                           storage_cfg.get("max_retry"))
    predictor = make_predictor(_plain(cfg.predictor), space, space_spec)
    pruned_as_choice = str(cfg.get("pruned_as", "auto"))
    if pruned_as_choice not in PRUNED_AS:
        raise NasutilError(f"pruned_as must be one of {', '.join(PRUNED_AS)}, got {pruned_as_choice!r}")
    constrained = bool(objectives.latency_slo_ms or objectives.min_accuracy) or pruned_as_choice != "pruned"
    sampler = _sampler(_plain(cfg.sampler), seed, constrained)
    pruned_as = resolve_pruned_as(pruned_as_choice, sampler)
    study, resumed = _study(storage, study_name, objectives.directions, objectives.names, sampler)

    search = Search(study, space_spec, predictor, policy, trainer, objectives, measurer, pruner, pruned_as)
    before = search.counts()
    lines: list[str] = []
    if resumed:
        lines.append(f"resumed study {study_name!r}: it held {before.finished} finished trials "
                     f"({before.failed} failed, {before.running} left running)")
    interrupted = False
    try:
        counts = _run_with_progress(search, n_trials, timeout, bool(cfg.get("progress", True)), before.finished)
    except KeyboardInterrupt:
        interrupted = True
        counts = search.counts()
    finally:
        search.close()
    lines[:0] = [f"search space {space_spec}; objectives {', '.join(objectives.names)}"
             + (f" (latency SLO {objectives.latency_slo_ms} ms)" if objectives.latency_slo_ms else "")
             + f"; sampler {cfg.sampler.get('name')}; prune {policy.describe()} (pruned trials recorded as "
               f"{pruned_as}); pruner {search.early.name}",
             f"predictor: {predictor.description}; trainer: {trainer.describe()}; "
             f"hardware figures: {measurer.description if measurer else 'predicted (no measurement)'}"]
    files = write_tables(study, folder)
    if cfg.get("plots", True):
        try:
            made = write_plots(study, folder)
        except Exception as exc:  # a plot must never cost the tables and the summary
            lines.append(f"plots skipped: {type(exc).__name__}: {exc}")
            made = {}
        files.update({("pareto_png" if k == "pareto" else k): v for k, v in made.items()})
    wall = time.perf_counter() - started
    summary = {"study_name": study_name, "folder": str(folder), "n_trials": n_trials, "seed": seed,
               "wall_s": round(wall, 2), "resumed": resumed, "interrupted": interrupted,
               "metrics": objectives.names, "sampler": cfg.sampler.get("name"), "prune": policy.describe(),
               "pruned_as": pruned_as,
               "pruner": search.early.name, "predictor": predictor.description, "trainer": trainer.describe(),
               "counts": {**{k: v for k, v in vars(counts).items()}, "trainings": counts.trainings}}
    (folder / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print_summary(study, counts, folder, url, wall, lines, files)
    if interrupted:
        raise KeyboardInterrupt
    return summary


def _run_with_progress(search, n_trials: int, timeout: float | None, progress: bool, done: int):
    from optuna.trial import TrialState

    def note_failure(trial, console) -> None:
        if trial.state == TrialState.FAIL:
            reason = trial.user_attrs.get("fail_reason") or trial.system_attrs.get("fail_reason", "")
            console.print(f"trial {trial.number} failed: {reason}", markup=False, highlight=False)

    if not progress:
        from rich.console import Console

        console = Console(file=sys.stderr)
        return search.run(n_trials, timeout, on_trial=lambda c, t: note_failure(t, console))
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
        TimeRemainingColumn

    columns = (TextColumn("searching"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[trained]} trained, {task.fields[pruned]} pruned, {task.fields[failed]} failed"),
               TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(file=sys.stderr)) as bar:
        task = bar.add_task("search", total=n_trials, completed=done, trained=0, pruned=0, failed=0)

        def update(c, trial=None) -> None:
            bar.update(task, completed=min(c.finished, n_trials), trained=c.trainings, pruned=c.pruned_before,
                       failed=c.failed)
            if trial is not None:
                note_failure(trial, bar.console)

        update(search.counts())
        return search.run(n_trials, timeout, on_trial=update)


_job_errors: list[str] = []


@hydra.main(version_base="1.3", config_path=CONFIG_PATH, config_name="config")
def _hydra_main(cfg: DictConfig) -> dict[str, Any] | None:
    # A user error is kept here and reported by `main` in one line; raised, Hydra would print its own
    # "Error executing job" line first (and, in a sweep, skip the jobs after it).
    try:
        return run_search(cfg)
    except Exception as exc:
        message = _user_error(exc)
        if message is None:
            raise
        _job_errors.append(message)
        return None


def _one_line(exc: BaseException) -> str:
    """A Hydra/OmegaConf message on one line: 'Could not find 'sampler/foo' (available: nsga2, random)'."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    if not lines:
        return type(exc).__name__
    head, rest = lines[0], lines[1:]
    if rest and rest[0].startswith("Available options"):
        return f"{head} ({rest[0].rstrip(':').lower()}: {', '.join(rest[1:])})"
    return " ".join(lines)


def _user_error(exc: BaseException) -> str | None:
    """The one-line message for an error the user can fix, or None for a bug."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    seen: set[int] = set()
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(current)
        current = current.__cause__ or current.__context__
    for e in chain:
        if isinstance(e, NasutilError):
            return str(e)
    for e in chain:
        if isinstance(e, (OmegaConfBaseException, HydraException)) and "Error executing job" not in str(e):
            return _one_line(e)
    # Hydra reports some malformed configs (a bad defaults list, say) as plain ValueErrors of its own.
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if isinstance(exc, (ValueError, TypeError)) and tb is not None and \
            any(f"{os.sep}{pkg}{os.sep}" in tb.tb_frame.f_code.co_filename for pkg in ("hydra", "omegaconf")):
        return f"bad config: {_one_line(exc)}"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if any(a.startswith("--experimental-rerun") for a in args):
        print(f"{PROG}: error: --experimental-rerun loads a pickle and is not supported", file=sys.stderr)
        return EXIT_USAGE
    saved_argv, saved_env = sys.argv, os.environ.get("HYDRA_FULL_ERROR")
    sys.argv = [PROG, *args]
    os.environ["HYDRA_FULL_ERROR"] = "1"  # let errors reach us, to be reported in one line
    try:
        with warnings.catch_warnings():
            if not os.environ.get("NASUTIL_WARNINGS"):
                warnings.simplefilter("ignore")
            _job_errors.clear()
            _hydra_main()
        if _job_errors:
            more = f" (and {len(_job_errors) - 1} more failed jobs)" if len(_job_errors) > 1 else ""
            print(f"{PROG}: error: {_job_errors[0]}{more}", file=sys.stderr)
            return EXIT_USAGE
        return 0
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted (finished trials are kept in the study; re-run to resume)", file=sys.stderr)
        return 130
    except Exception as exc:
        message = _user_error(exc)
        if message is None:
            raise
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        sys.argv = saved_argv
        if saved_env is None:
            os.environ.pop("HYDRA_FULL_ERROR", None)
        else:
            os.environ["HYDRA_FULL_ERROR"] = saved_env


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
