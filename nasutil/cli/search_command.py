"""`nasutil-search`: the front door of the search (a Hydra app; configs in `conf/`, installed as `nasutil_conf`).

    nasutil-search                                   # the built-in default (nb201, tabular, NSGA-II)
    nasutil-search sampler=tpe prune=utilization_quantile n_trials=200
    nasutil-search -m seed=0,1,2 prune=none,dominated_throughput

Every user error (unknown option, bad value, unreachable storage) ends with one line on stderr
and exit code 2; results already stored in the study are never touched by a failed start. The
search itself is built by `nasutil.search.build_search` and reported by `nasutil.search.report_search`.
"""

from __future__ import annotations

import contextlib
import shlex
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

from nasutil.cli import interrupts
from nasutil.cli.hydra_app import keep_user_error, run_hydra_app
from nasutil.search.config import config_digest  # noqa: F401  (registers the study name's resolver)
from nasutil.errors import warnings_for_users
from nasutil.search.config import refuse_added_keys, store_registered_spaces

PROG = "nasutil-search"
CONFIG_PATH = "pkg://nasutil_conf"

#: the progress bar reads the study's counts (every trial) at most this often, where trials end many a second
BAR_COUNTS_EVERY_S = 0.5
#: old override prefixes -> new ones; the old names work, with a warning, until the next release
RENAMED = {"pruner": "early_stopping", "predictor.model": "predictor.kind"}


def run_search(cfg: DictConfig) -> dict[str, Any]:
    """The task of one Hydra job: build the search, run it to its budget with a progress bar, report."""
    from hydra.core.hydra_config import HydraConfig

    from nasutil.search.build import build_search
    from nasutil.search.report import report_search, report_stopped_search
    from nasutil.search.storage import StorageStopped

    started = time.perf_counter()
    refuse_added_keys(list(HydraConfig.get().overrides.task))
    setup = build_search(cfg, Path(HydraConfig.get().runtime.output_dir))
    built = time.perf_counter()
    interrupted, stopped = False, None
    try:
        interrupts.stop_if_requested()
        with heartbeat_failures_told_once():
            counts = _run_with_progress(setup.search, setup.n_trials, setup.timeout_s, bool(cfg.get("progress", True)),
                                        setup.before.finished, setup.max_trainings)
    except KeyboardInterrupt:
        interrupted = True
        counts = setup.search.counts()
    except StorageStopped as exc:  # the tables of what the study holds are still written, then the error
        stopped = exc
    finally:
        closing = time.perf_counter()
        setup.search.close()
        closed = time.perf_counter()
    # where a short search's wall time goes besides its trials: building it (predictor, trainer, anchors), closing
    # what it held (the measuring worker, within the run) and the report
    phases = {"build_s": round(built - started, 3), "anchors_s": setup.anchors_s,
              "run_s": round(time.perf_counter() - built, 3), "close_s": round(closed - closing, 3)}
    plots, resume = bool(cfg.get("plots", True)), _resume_hint(setup.study_name)
    if stopped is not None:
        raise report_stopped_search(setup, stopped, time.perf_counter() - started, plots=plots,
                                    resume=resume, phases=phases) from stopped.__cause__
    summary = report_search(setup, counts, time.perf_counter() - started, interrupted=interrupted,
                            plots=plots, resume=resume, phases=phases)
    if interrupted:
        raise KeyboardInterrupt
    return summary


@contextlib.contextmanager
def heartbeat_failures_told_once() -> Iterator[None]:
    """Optuna's heartbeat threads print a traceback when the storage cannot be written (a full disk); the
    trial's own write fails the same way and ends the command in one line, so theirs are not shown."""
    from optuna.exceptions import StorageInternalError

    before = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
        if isinstance(args.exc_value, StorageInternalError) and "_record_heartbeat" in getattr(args.thread, "name", ""):
            return
        before(args)

    threading.excepthook = hook
    try:
        yield
    finally:
        threading.excepthook = before


def _resume_hint(study_name: str) -> str:
    """How to resume this job's study. A job of a `-m` sweep lies in the sweep's folder: the same sweep
    resumes it, while its settings run alone (without `-m`) would start anew in `outputs/` unless given
    the job's folder."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    hydra = HydraConfig.get()
    if hydra.mode == RunMode.MULTIRUN:
        return (f"re-run the same sweep to resume every job; this one alone: its settings without -m, with "
                f"hydra.run.dir={hydra.runtime.output_dir}")
    return f"re-run the same command, or with {shlex.quote('study_name=' + study_name)}, to resume"


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
        if trial.state == TrialState.FAIL and not trial.user_attrs.get("surplus") and not interrupts.requested():
            reason = trial.user_attrs.get("fail_reason") or trial.system_attrs.get("fail_reason", "")
            console.print(f"trial {trial.number} failed: {reason}", markup=False, highlight=False)
        diverged = (trial.user_attrs.get("accuracy_detail") or {}).get("diverged_in_epoch")
        if trial.state == TrialState.COMPLETE and diverged is not None:
            console.print(f"trial {trial.number}: training diverged (loss not finite) in epoch {int(diverged)}; "
                          f"recorded with the accuracy it had then, {trial.user_attrs.get('accuracy', 0.0):.2f}%",
                          markup=False, highlight=False, soft_wrap=True)

    if not progress:
        from rich.console import Console

        console = Console(file=sys.stderr)

        def noted(counts, trial) -> None:
            note_failure(trial, console)
            interrupts.stop_if_requested()

        return search.run(n_trials, timeout, on_trial=noted, max_trainings=max_trainings, counts_for_on_trial=False)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
        TimeRemainingColumn

    columns = (TextColumn("searching"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[trained]} trained, {task.fields[stopped]} stopped early, "
                          "{task.fields[pruned]} pruned, {task.fields[failed]} failed"),
               TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(file=sys.stderr)) as bar:
        task = bar.add_task("search", total=n_trials, completed=done, trained=0, stopped=0, pruned=0, failed=0)

        shown = [0.0]  # when the bar's counts were last read

        def update(c=None, trial=None) -> None:  # the words of the summary: trained to the end, stopped early
            if c is None and time.monotonic() - shown[0] >= BAR_COUNTS_EVERY_S:
                c = search.counts()  # every trial read: at most a few times a second, not once a trial
            if c is not None:
                shown[0] = time.monotonic()
                bar.update(task, completed=min(c.finished, n_trials), trained=c.trained, stopped=c.stopped_early,
                           pruned=c.pruned_before, failed=c.failed)
            if trial is not None:
                note_failure(trial, bar.console)
                interrupts.stop_if_requested()

        update(search.counts())
        counts = search.run(n_trials, timeout, on_trial=update, max_trainings=max_trainings, counts_for_on_trial=False)
        update(counts)
        return counts


@hydra.main(version_base="1.3", config_path=CONFIG_PATH, config_name="config")
def _hydra_main(cfg: DictConfig) -> dict[str, Any] | None:
    return keep_user_error(run_search, cfg)


def main(argv: Sequence[str] | None = None) -> int:
    args, notes = renamed_overrides(list(sys.argv[1:] if argv is None else argv))
    for note in notes:
        print(f"{PROG}: warning: {note}", file=sys.stderr)
    with warnings_for_users(PROG):  # a plugin skipped for another's name is told as the search would tell it
        store_registered_spaces()
    return run_hydra_app(PROG, _hydra_main, args,
                         "interrupted (finished trials are kept in the study; re-run to resume)")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
