"""What a finished (or interrupted) search leaves behind: tables, plots, summary.json and the closing report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nasutil.errors import NasutilError
from nasutil.search.build import SearchSetup
from nasutil.search.console_report import print_summary
from nasutil.search.plots import write_plots
from nasutil.search.record import Counts
from nasutil.search.tables import write_tables


def report_search(setup: SearchSetup, counts: Counts, wall_s: float, *, interrupted: bool = False,
                  plots: bool = True, resume: str | None = None) -> dict[str, Any]:
    """Write the run folder's files and print the closing report (`resume`: how to resume the study, where
    the caller knows better than "re-run the same command"); returns what summary.json holds."""
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
    if plots:
        try:
            made = write_plots(s.study, folder)
        except Exception as exc:  # a plot must never cost the tables and the summary
            lines.append(f"plots skipped: {type(exc).__name__}: {exc}")
            made = {}
        files.update({("pareto_png" if k == "pareto" else k): v for k, v in made.items()})
    summary = {"study_name": setup.study_name, "folder": str(folder), "n_trials": setup.n_trials, "seed": setup.seed,
               "wall_s": round(wall_s, 2), "resumed": setup.resumed, "interrupted": interrupted,
               "metrics": s.objectives.names, "sampler": setup.sampler_name, "prune": s.policy.describe(),
               "pruned_as": s.pruned_as, "pruner": s.early.name, "predictor": setup.predictor_description(),
               "trainer": s.trainer.describe(), "trainer_activity": s.trainer.activity(), "counts": {**vars(counts), "trainings": counts.trainings}}
    (folder / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print_summary(s.study, counts, folder, setup.storage, wall_s, lines, files, resume=resume)
    return summary
