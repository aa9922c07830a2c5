"""`nasutil-search`: the front door of the search (a Hydra app; configs in `conf/`, installed as `nasutil_conf`).

    nasutil-search                                   # the built-in default (nb201, tabular, NSGA-II)
    nasutil-search sampler=tpe prune=utilization_quantile n_trials=200
    nasutil-search -m seed=0,1,2 prune=none,dominated_throughput

Every user error (unknown option, bad value, unreachable storage) ends with one line on stderr
and exit code 2; results already stored in the study are never touched by a failed start. The
search itself is built by `nasutil.search.build_search` and reported by `nasutil.search.report_search`.
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

from nasutil.cli import interrupts
from nasutil.errors import NasutilError
from nasutil.search.config import config_digest  # noqa: F401  (registers the study name's resolver)

PROG = "nasutil-search"
CONFIG_PATH = "pkg://nasutil_conf"
EXIT_USAGE = 2

#: old override prefixes -> new ones; the old names work, with a warning, until the next release
RENAMED = {"pruner": "early_stopping", "predictor.model": "predictor.kind"}


def run_search(cfg: DictConfig) -> dict[str, Any]:
    """The task of one Hydra job: build the search, run it to its budget with a progress bar, report."""
    from hydra.core.hydra_config import HydraConfig

    from nasutil.search.build import build_search
    from nasutil.search.report import report_search

    started = time.perf_counter()
    setup = build_search(cfg, Path(HydraConfig.get().runtime.output_dir))
    interrupted = False
    try:
        interrupts.stop_if_requested()
        counts = _run_with_progress(setup.search, setup.n_trials, setup.timeout_s, bool(cfg.get("progress", True)),
                                    setup.before.finished, setup.max_trainings)
    except KeyboardInterrupt:
        interrupted = True
        counts = setup.search.counts()
    finally:
        setup.search.close()
    summary = report_search(setup, counts, time.perf_counter() - started, interrupted=interrupted,
                            plots=bool(cfg.get("plots", True)))
    if interrupted:
        raise KeyboardInterrupt
    return summary


def renamed_overrides(args: list[str]) -> tuple[list[str], list[str]]:
    """Command-line overrides with renamed config keys brought up to date, and a warning for each old name."""
    out, notes = [], []
    for arg in args:
        prefix = arg[: len(arg) - len(arg.lstrip("+~"))]
        body = arg[len(prefix):]
        for old, new in RENAMED.items():
            if body.startswith((f"{old}=", f"{old}.")):
                body = new + body[len(old):]
                notes.append(f"'{old}' is now '{new}' (the old name works until the next release)")
                break
        out.append(prefix + body)
    return out, list(dict.fromkeys(notes))


def _run_with_progress(search, n_trials: int, timeout: float | None, progress: bool, done: int,
                       max_trainings: int | None = None):
    from optuna.trial import TrialState

    def note_failure(trial, console) -> None:
        if trial.state == TrialState.FAIL and not trial.user_attrs.get("surplus"):
            reason = trial.user_attrs.get("fail_reason") or trial.system_attrs.get("fail_reason", "")
            console.print(f"trial {trial.number} failed: {reason}", markup=False, highlight=False)

    if not progress:
        from rich.console import Console

        console = Console(file=sys.stderr)

        def noted(counts, trial) -> None:
            note_failure(trial, console)
            interrupts.stop_if_requested()

        return search.run(n_trials, timeout, on_trial=noted, max_trainings=max_trainings)
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
                interrupts.stop_if_requested()

        update(search.counts())
        return search.run(n_trials, timeout, on_trial=update, max_trainings=max_trainings)


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
    args, notes = renamed_overrides(list(sys.argv[1:] if argv is None else argv))
    for note in notes:
        print(f"{PROG}: warning: {note}", file=sys.stderr)
    if any(a.startswith("--experimental-rerun") for a in args):
        print(f"{PROG}: error: --experimental-rerun loads a pickle and is not supported", file=sys.stderr)
        return EXIT_USAGE
    saved_argv, saved_env = sys.argv, os.environ.get("HYDRA_FULL_ERROR")
    sys.argv = [PROG, *args]
    os.environ["HYDRA_FULL_ERROR"] = "1"  # let errors reach us, to be reported in one line
    try:
        with warnings.catch_warnings(), interrupts.handled():
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
