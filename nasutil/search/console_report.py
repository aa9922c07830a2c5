"""The closing report on the console: a rich table of the Pareto front and what the search spent and saved."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import optuna
from rich.console import Console
from rich.table import Table

from nasutil.search.record import Counts, has_accuracy
from nasutil.search.storage import StudyStorage
from nasutil.search.tables import metric_names, pareto_trials


def _fmt(name: str, value) -> str:
    if value is None or value == "":
        return "-"
    if name == "accuracy":
        return f"{float(value):.2f}"
    if name in ("throughput", "params", "flops"):
        return f"{float(value):,.0f}"
    if name == "latency":
        return f"{float(value):.3f}"
    if name == "utilization":
        return f"{float(value):.2%}"
    return f"{value}"


def unvalidated_note(trials: list) -> str | None:
    """A warning line where candidates were predicted by a model never validated for them: the pruning
    and every predicted figure rest on those predictions (`nasutil predict` says so per candidate)."""
    unvalidated = [t for t in trials if t.user_attrs.get("prediction_validated") is False]
    if not unvalidated:
        return None
    scored = sum(1 for t in trials if "prediction_validated" in t.user_attrs)
    reason = str(unvalidated[0].user_attrs.get("unvalidated_reason") or "no validation on record")
    return (f"warning: {len(unvalidated)} of {scored} candidates were predicted by a model never validated for "
            f"them ({reason}): pruning before training and the predicted figures rest on those predictions")


def unmeasured_note(trials: list) -> str | None:
    """A line where trained trials had no measurement to be scored on (a measured table without their cell)
    and were scored on their prediction, so that a front of measured and predicted figures says so."""
    unmeasured = [t for t in trials if t.user_attrs.get("unmeasured_reason") and has_accuracy(t)]
    if not unmeasured:
        return None
    return (f"note: {len(unmeasured)} trained trials had no measurement and were scored on their prediction "
            f"({unmeasured[0].user_attrs['unmeasured_reason']}); trials.csv names them (hardware_source=predicted, "
            f"unmeasured_reason)")


def population_note(activity: dict[str, Any] | None) -> str | None:
    """One line on how a population used its device, where candidates trained together: how many trained at once
    (weighted by time, and at most), the share of the driver's time spent waiting for the device (near 100%: the
    device set the pace; low: the host's work around the candidates did), and how long it was held quiet for
    measurements. summary.json's `trainer_activity` has the rest."""
    if not activity or not activity.get("rounds"):
        return None
    at_once = activity.get("members_time_mean", activity.get("mean_together", 0.0))
    text = f"population: {at_once:.1f} candidates trained at once on average (at most {activity['most_together']})"
    if activity.get("membership_span_s"):
        text += f" over {activity['membership_span_s']:.1f} s"
    text += (f"; its driver waited for the device {activity.get('device_bound', 0.0):.0%} of its time (near 100%: "
             f"the device set the pace, not the host)")
    if activity.get("quiets"):
        batches = activity["quiets"]
        text += (f"; held quiet {activity['quiet_s']:.1f} s to measure {batches} batch{'es' if batches != 1 else ''} "
                 f"of survivors")
    return text


def print_summary(study: optuna.Study, counts: Counts, folder: Path, storage: StudyStorage, wall_s: float,
                  lines: list[str], files: dict[str, Path], console: Console | None = None, top: int = 15,
                  resume: str | None = None, activity: dict[str, Any] | None = None) -> None:
    console = console or Console(file=sys.stdout, soft_wrap=False, highlight=False,
                                 width=None if sys.stdout.isatty() else 160)
    names = metric_names(study)
    front = pareto_trials(study)
    table = Table(title=f"Pareto front of {study.study_name} ({len(front)} trials"
                        f"{', first ' + str(top) if len(front) > top else ''})", title_justify="left")
    table.add_column("trial", justify="right")
    for n in names:
        table.add_column(n, justify="right")
    table.add_column("pred. util.", justify="right")
    table.add_column("source")
    table.add_column("arch", overflow="fold")
    for t in front[:top]:
        a = t.user_attrs
        table.add_row(str(t.number), *(_fmt(n, v) for n, v in zip(names, t.values)),
                      _fmt("utilization", a.get("predicted_utilization")), str(a.get("hardware_source", "")),
                      str(a.get("arch", "")))
    console.print(table)
    for line in lines:
        console.print(line, markup=False)
    saved = counts.pruned_before
    seen = counts.finished
    console.print(f"trials: {seen} finished: {counts.trained} trained, {saved} pruned before training"
                  f"{' (' + ', '.join(f'{k}: {v}' for k, v in counts.reasons.items()) + ')' if counts.reasons else ''}"
                  f", {counts.stopped_early} stopped early, {counts.duplicates} repeats of a trained arch"
                  f"; {counts.failed} failed, {counts.running} left running"
                  f"{f', {counts.surplus} not run (the budget was taken by other workers)' if counts.surplus else ''}")
    if seen:
        console.print(f"trainings: {counts.trainings} of {seen} candidates ({saved / seen:.0%} skipped before "
                      f"training); {counts.epochs:,.0f} epochs spent; wall time {wall_s:.1f} s")
    together = population_note(activity)
    if together:
        console.print(together, markup=False)
    trials = study.get_trials(deepcopy=False)
    for note in (unvalidated_note(trials), unmeasured_note(trials)):
        if note:
            console.print(note, markup=False)
    console.print(f"results: {folder}")
    for name in ("trials", "pareto", "pareto_png", "predicted_vs_measured", "utilization_hist", "population", "html"):
        if name in files:
            console.print(f"  {files[name].name}")
    if (folder / "summary.json").is_file():
        console.print("  summary.json")
    resume = resume or f"re-run the same command, or with {shlex.quote('study_name=' + study.study_name)}, to resume"
    console.print(f"storage: {storage.label} (study {study.study_name!r}; {resume})")
    if storage.browse:
        console.print(f"browse: optuna-dashboard {shlex.quote(storage.browse)}")
