"""A sweep's jobs side by side. After `nasutil-search -m ...` ends, its jobs are compared in one table
(`sweep_summary.csv` in the sweep folder, and printed): the settings that tell each job apart, what its
study holds, and its front, with the hypervolume of two-objective fronts on one scale for the sweep.

A Hydra callback (`hydra.callbacks.sweep_summary` in the search's config), so it runs with every
launcher; it reads what the jobs left in their folders (summary.json, pareto.csv, Hydra's overrides),
and the jobs of this sweep are those whose summary was written after it began (a sweep re-run to
resume its studies rewrites them all).
"""

from __future__ import annotations

import csv
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

from nasutil.pareto import hypervolume_2d

FILE = "sweep_summary.csv"
#: the environment variable naming the file every job of a run appends its user error to (one JSON line:
#: `job`, its settings, and `error`), written by the command line's Hydra app
ERRORS_FILE = "NASUTIL_JOB_ERRORS"


class SweepSummary(Callback):
    def __init__(self) -> None:
        self.began = time.time()

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        self.began = time.time() - 1.0  # file times may be coarser than the clock

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        folder = Path(str(config.hydra.sweep.dir))
        try:
            rows = sweep_rows(folder, since=self.began, failed=failed_jobs())
            if rows:
                write_summary(rows, folder / FILE)
                kept = folder / f"{Path(FILE).stem}_{time.strftime('%Y%m%d-%H%M%S', time.gmtime(self.began))}.csv"
                write_summary(rows, kept)  # a later sweep into the same folder replaces FILE, not this
                print(render(rows, folder / FILE))
        except Exception as exc:  # the jobs' own results are already written: never fail the sweep here
            print(f"nasutil-search: sweep summary skipped: {type(exc).__name__}: {exc}", file=sys.stderr)


def failed_jobs(path: str | os.PathLike | None = None) -> list[dict[str, str]]:
    """The jobs of this run that ended in a user error, in order: `job` (its settings), `folder` (its output
    folder, where known) and `error`."""
    path = path or os.environ.get(ERRORS_FILE)
    if not path or not Path(path).is_file():
        return []
    jobs = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            try:
                jobs.append(json.loads(line))
            except ValueError:
                jobs.append({"job": "", "error": line.strip()})
    return jobs


def sweep_rows(folder: Path, since: float = 0.0, failed: list[dict[str, str]] | None = None) -> list[dict[str, Any]]:
    """One row per study of the sweep (its workers share it: the newest summary speaks for them), then one
    per job that failed before it had a study (`failed`, from `failed_jobs`), with its error. A job whose
    error came after it wrote its summary (its study storage stopped working mid-run) has its error in its
    study's row."""
    newest: dict[str, tuple[float, Path]] = {}
    for path in folder.glob("*/w*/summary.json"):
        written = path.stat().st_mtime
        if written < since:
            continue
        study = path.parent.parent.name
        if study not in newest or written > newest[study][0]:
            newest[study] = (written, path.parent)
    rows = [_row(job) for _, job in sorted(newest.values(), key=lambda item: str(item[1]))]
    _add_hypervolume(rows)
    rows += [{"study": "", "settings": job.get("job", ""), "error": job.get("error", ""), "_front": [],
              "_metrics": []} for job in _errors_of_rows(rows, failed or [])]
    if len(rows) > 1:  # what tells the jobs apart: the settings they do not all share
        shared = set.intersection(*(set(r["settings"].split()) for r in rows))
        for r in rows:
            r["settings"] = " ".join(t for t in r["settings"].split() if t not in shared)
    return rows


def _errors_of_rows(rows: list[dict[str, Any]], failed: list[dict[str, str]]) -> list[dict[str, str]]:
    """The failed jobs that have no row of their own: the error of a job that has one (by its folder) goes
    into it."""
    by_folder = {Path(r["folder"]).resolve(): r for r in rows}
    alone = []
    for job in failed:
        row = by_folder.get(Path(job["folder"]).resolve()) if job.get("folder") else None
        if row is None:
            alone.append(job)
        else:
            row["error"] = job.get("error", "")
    return alone


def _row(job: Path) -> dict[str, Any]:
    summary = json.loads((job / "summary.json").read_text())
    counts = summary.get("counts", {})
    front = _front(job / "pareto.csv", summary.get("metrics", []))
    row: dict[str, Any] = {"study": summary.get("study_name", job.parent.name), "settings": _overrides(job),
                           "finished": counts.get("finished"), "trained": counts.get("trained"),
                           "pruned_before_training": counts.get("pruned_before"),
                           "stopped_early": counts.get("stopped_early"), "failed": counts.get("failed"),
                           "unvalidated_predictions": counts.get("unvalidated_predictions"),
                           "wall_s": summary.get("wall_s"), "front": len(front), "folder": str(job)}
    for name in summary.get("metrics", []):
        values = [p[name] for p in front if name in p]
        row[f"best_{name}"] = (max(values) if _maximised(name) else min(values)) if values else None
    row["_front"], row["_metrics"] = front, summary.get("metrics", [])
    return row


def _overrides(job: Path) -> str:
    """The job's own settings, as Hydra recorded them (a plain list of strings, read as YAML)."""
    path = job / ".hydra" / "overrides.yaml"
    if not path.is_file():
        return ""
    from omegaconf import OmegaConf

    items = OmegaConf.to_container(OmegaConf.load(path))
    hidden = ("hydra.", "study_name=")
    return " ".join(str(i) for i in items or [] if not str(i).startswith(hidden))


def _front(path: Path, metrics: list[str]) -> list[dict[str, float]]:
    if not path.is_file():
        return []
    with path.open(newline="") as f:
        out = []
        for record in csv.DictReader(f):
            point = {}
            for name in metrics:
                try:
                    point[name] = float(record.get(f"objective_{name}", ""))
                except ValueError:
                    continue
            out.append(point)
        return out


def _maximised(metric: str) -> bool:
    from nasutil.search.objectives import METRICS

    known = METRICS.get(metric)
    return known.direction == "maximize" if known is not None else True


def _add_hypervolume(rows: list[dict[str, Any]]) -> None:
    """Hypervolume of each two-objective front, every objective scaled by the sweep's largest magnitude and
    turned into one to maximise (a minimised one as 1 - value/largest), reference (0, 0)."""
    metrics = {tuple(r["_metrics"]) for r in rows}
    if len(metrics) != 1 or len(next(iter(metrics))) != 2:
        for r in rows:
            r["hypervolume"] = None
        return
    names = next(iter(metrics))
    largest = {n: max((abs(p[n]) for r in rows for p in r["_front"] if n in p), default=0.0) or 1.0 for n in names}

    def gain(name: str, value: float) -> float:
        scaled = value / largest[name]
        return scaled if _maximised(name) else 1.0 - scaled

    for r in rows:
        points = [tuple(gain(n, p[n]) for n in names) for p in r["_front"] if all(n in p for n in names)]
        r["hypervolume"] = hypervolume_2d(points, (0.0, 0.0)) if points else None


COLUMNS = ("study", "settings", "finished", "trained", "pruned_before_training", "stopped_early", "failed",
           "unvalidated_predictions", "wall_s", "front", "hypervolume")


def _columns(rows: list[dict[str, Any]]) -> list[str]:
    best = sorted({k for r in rows for k in r if k.startswith("best_")})
    return [*COLUMNS, *best, "folder", *(["error"] if any(r.get("error") for r in rows) else [])]


def write_summary(rows: list[dict[str, Any]], path: Path) -> None:
    columns = _columns(rows)
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        for r in rows:
            writer.writerow([_cell(r.get(c)) for c in columns])


def render(rows: list[dict[str, Any]], path: Path) -> str:
    """The table as text: the jobs, best hypervolume first where there is one."""
    columns = [c for c in _columns(rows) if c not in ("study", "folder")]
    order = sorted(rows, key=lambda r: -(r.get("hypervolume") or -math.inf))
    table = [columns] + [[_cell(r.get(c)) for c in columns] for r in order]
    widths = [max(len(str(line[i])) for line in table) for i in range(len(columns))]
    broken = sum(1 for r in rows if r.get("error"))
    ended = f", {broken} failed" if broken else ""
    lines = [f"sweep summary: {len(rows)} job{'s' if len(rows) != 1 else ''}{ended} ({path})"]
    lines += ["  " + "  ".join(str(v).ljust(w) for v, w in zip(line, widths)) for line in table]
    return "\n".join(lines)


def _cell(value: Any) -> Any:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else value
