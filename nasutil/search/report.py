"""What a finished (or interrupted) search leaves behind: tables, plots, summary.json and the closing report."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from optuna.exceptions import StorageInternalError

from nasutil.errors import NasutilError
from nasutil.files import write_text_atomically
from nasutil.search.build import SearchSetup
from nasutil.search.console_report import print_summary
from nasutil.search.plots import write_plots
from nasutil.search.record import Counts
from nasutil.search.storage import StorageStopped
from nasutil.search.tables import write_tables


def report_search(setup: SearchSetup, counts: Counts, wall_s: float, *, interrupted: bool = False,
                  plots: bool = True, resume: str | None = None, storage_error: str | None = None,
                  phases: dict[str, float] | None = None) -> dict[str, Any]:
    """Write the run folder's files and print the closing report (`resume`: how to resume the study, where
    the caller knows better than "re-run the same command"; `storage_error`: why the storage stopped the run,
    for summary.json; `phases`: seconds of the run's parts, summary.json's `phases_s` with the report's own
    added); returns what summary.json holds."""
    report_started = time.perf_counter()
    s, folder = setup.search, setup.folder
    try:
        folder.mkdir(parents=True, exist_ok=True)  # a folder given to build_search need not exist yet
    except OSError as exc:
        raise NasutilError(f"cannot make the run folder {str(folder)!r}: {exc.strerror or exc}") from None
    lines: list[str] = []
    if setup.resumed:
        b = setup.before
        lines.append(f"resumed study {setup.study_name!r}: it held {b.finished} finished trials "
                     f"({b.failed} failed, {b.running} left running)")
    lines[:0] = setup.describe()
    files: dict[str, Path] = write_tables(s.study, folder)
    activity = s.trainer.activity()
    if plots:
        try:
            made = write_plots(s.study, folder, activity=activity)
        except Exception as exc:  # a plot must never cost the tables and the summary
            lines.append(f"plots skipped: {exc}" if isinstance(exc, NasutilError) else
                         f"plots skipped: {type(exc).__name__}: {exc}")
            made = {}
        files.update({("pareto_png" if k == "pareto" else k): v for k, v in made.items()})
    summary = {"study_name": setup.study_name, "folder": str(folder), "n_trials": setup.n_trials, "seed": setup.seed,
               "wall_s": round(wall_s, 2), "resumed": setup.resumed, "interrupted": interrupted,
               "metrics": s.objectives.names, "sampler": setup.sampler_name, "prune": s.policy.describe(),
               "pruned_as": s.pruned_as, "pruner": s.early.name, "predictor": setup.predictor_description(),
               "trainer": s.trainer.describe(), "trainer_activity": activity,
               "hardware": s.measuring.description if s.measuring else "predicted (no measurement)",
               "measuring_activity": measuring_activity(s.measuring),
               "counts": {**vars(counts), "trainings": counts.trainings},
               "storage_error": storage_error,
               "phases_s": {**(phases or {}), "report_s": round(time.perf_counter() - report_started, 3)}}
    write_summary(folder / "summary.json", summary)
    print_summary(s.study, counts, folder, setup.storage, wall_s, lines, files, resume=resume, activity=activity)
    return summary


def measuring_activity(measuring: Any) -> dict[str, Any] | None:
    """Where measuring the trained candidates spent its time, where the measurer keeps an account of it."""
    account = getattr(measuring, "activity", None)
    return account() if callable(account) else None


def write_summary(path: Path, summary: dict[str, Any]) -> None:
    """summary.json, whole or not at all: a write the disk refuses keeps the one there was, and names the file."""
    try:
        write_text_atomically(path, json.dumps(summary, indent=2) + "\n")
    except OSError as exc:
        raise NasutilError(f"cannot write {str(path)!r}: {exc.strerror or type(exc).__name__}") from None


def report_stopped_search(setup: SearchSetup, stopped: StorageStopped, wall_s: float, *, plots: bool = True,
                          resume: str | None = None, phases: dict[str, float] | None = None) -> StorageStopped:
    """After the study storage stopped working mid-run: the run folder's tables, plots, summary and closing
    report of what the study still holds, as at a normal end. Returns the error to end with, which says whether
    they were written: the storage's error stays first, and a study that cannot be read back leaves the
    tables of an earlier run as they were (the re-run that resumes it writes them)."""
    again = "re-run to resume once it works, which writes them"
    try:
        counts = setup.search.counts()
    except (StorageInternalError, OSError):
        return stopped.with_tables(f"; the study cannot be read back to write the run folder's tables: {again}")
    try:
        report_search(setup, counts, wall_s, plots=plots, resume=resume, storage_error=stopped.reason, phases=phases)
    except NasutilError as exc:
        return stopped.with_tables(f"; the run folder's tables were not written ({exc}): {again}")
    except (StorageInternalError, OSError):
        return stopped.with_tables(f"; the study could not be read back for all of the run folder's tables: {again}")
    return stopped.with_tables(", and the run folder's tables list them; re-run to resume once it works")
