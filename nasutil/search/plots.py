"""Plots a search leaves in its run folder: PNGs (matplotlib) and Optuna's interactive HTML (plotly)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from nasutil.errors import NasutilError
from nasutil.files import write_atomically
from nasutil.search.objectives import METRICS
from nasutil.search.record import hardware_figures, outcome
from nasutil.search.tables import axis_label, metric_names, pareto_trials

PREDICTED_KEY = {"throughput": "predicted_throughput_per_s", "latency": "predicted_latency_ms",
                 "utilization": "predicted_utilization", "params": "params", "flops": "flops_per_image"}


def _figure(width: float = 7.0, height: float = 4.5):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=120, layout="constrained")


def _save(path: Path, write: Callable[[Path], Any]) -> None:
    """A plot written whole or not at all (a full disk keeps the one there was), the file named where it fails."""
    try:
        write_atomically(path, write)
    except OSError as exc:
        raise NasutilError(f"cannot write {str(path)!r}: {exc.strerror or type(exc).__name__}") from None


def _num(value) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _axes_metrics(study: optuna.Study) -> tuple[str, str]:
    """(x, y): the first non-accuracy objective against accuracy where both exist."""
    names = metric_names(study)
    if "accuracy" in names and len(names) > 1:
        return next(n for n in names if n != "accuracy"), "accuracy"
    return (names[0], names[1]) if len(names) > 1 else (names[0], names[0])


def pareto_png(study: optuna.Study, path: Path) -> Path | None:
    x_name, y_name = _axes_metrics(study)
    if x_name not in METRICS or y_name not in METRICS:
        return None
    x_key, y_key = METRICS[x_name].key, METRICS[y_name].key
    trials = study.get_trials(deepcopy=False)
    trained = [t for t in trials if outcome(t) == "trained"]
    early = [t for t in trials if outcome(t) == "stopped_early"]
    before = [t for t in trials if outcome(t) == "pruned_before_training"]
    front = pareto_trials(study)

    fig = _figure(7.5, 5.2)
    grid = fig.add_gridspec(2, 1, height_ratios=(6, 1))
    ax = fig.add_subplot(grid[0])
    rug = fig.add_subplot(grid[1], sharex=ax)

    def xy(ts: list[FrozenTrial], ykey: str) -> tuple[list[float], list[float]]:
        pts = [(_num({**t.user_attrs, **hardware_figures(t.user_attrs)}.get(x_key)), _num(t.user_attrs.get(ykey)))
               for t in ts]
        pts = [(a, b) for a, b in pts if a is not None and b is not None]
        return [a for a, _ in pts], [b for _, b in pts]

    ax.scatter(*xy(trained, y_key), s=18, color="tab:blue", alpha=0.55, label=f"trained ({len(trained)})")
    if early:
        ax.scatter(*xy(early, "accuracy_partial"), s=22, facecolors="none", edgecolors="tab:orange",
                   label=f"stopped early, partial accuracy ({len(early)})")
    fx, fy = xy(front, y_key)
    if fx:
        order = sorted(range(len(fx)), key=lambda i: fx[i])
        ax.step([fx[i] for i in order], [fy[i] for i in order], where="post" if METRICS[x_name].direction ==
                "minimize" else "pre", color="tab:red", lw=1.2)
        ax.scatter(fx, fy, s=40, color="tab:red", zorder=3, label=f"Pareto front ({len(fx)})")
    ax.set_ylabel(axis_label(y_name))
    ax.legend(loc="best", fontsize=8)
    ax.grid(alpha=0.3)
    ax.tick_params(labelbottom=False)
    ax.set_title(f"{study.study_name}: {y_name} vs {x_name}", fontsize=10)

    pred_key = PREDICTED_KEY.get(x_name)
    px = [v for v in (_num(t.user_attrs.get(pred_key)) for t in before) if v is not None] if pred_key else []
    rug.scatter(px, [0.0] * len(px), marker="|", s=200, color="tab:gray", alpha=0.7)
    tx = [v for v in (_num(t.user_attrs.get(pred_key)) for t in trained) if v is not None] if pred_key else []
    rug.scatter(tx, [1.0] * len(tx), marker="|", s=200, color="tab:blue", alpha=0.7)
    rug.set_yticks([0, 1], [f"pruned before\ntraining ({len(px)})", f"trained ({len(tx)})"], fontsize=7)
    rug.set_ylim(-0.8, 1.8)
    rug.set_xlabel(axis_label(x_name) + " (rug: predicted)")
    rug.grid(alpha=0.3, axis="x")
    _save(path, lambda tmp: fig.savefig(tmp, format="png"))
    return path


def predicted_vs_measured_png(study: optuna.Study, path: Path) -> Path | None:
    """Only where some trial was measured; else there is nothing to compare."""
    pairs = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        p, m = _num(t.user_attrs.get("predicted_utilization")), _num(t.user_attrs.get("measured_utilization"))
        if p is not None and m is not None:
            pairs.append((p, m))
    if not pairs:
        return None
    from scipy.stats import kendalltau

    pred, meas = [p for p, _ in pairs], [m for _, m in pairs]
    fig = _figure(5.5, 5.0)
    ax = fig.add_subplot()
    ax.scatter(pred, meas, s=18, alpha=0.7)
    lo, hi = min(pred + meas), max(pred + meas)
    ax.plot([lo, hi], [lo, hi], color="gray", lw=1, ls="--", label="predicted = measured")
    tau = kendalltau(pred, meas).statistic if len(pairs) > 2 else float("nan")
    ax.set_xlabel("predicted utilization")
    ax.set_ylabel("measured utilization")
    ax.set_title(f"{len(pairs)} trained candidates, Kendall tau {tau:.2f}", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    _save(path, lambda tmp: fig.savefig(tmp, format="png"))
    return path


def utilization_hist_png(study: optuna.Study, path: Path) -> Path | None:
    groups: dict[str, list[float]] = {"trained": [], "pruned before training": [], "stopped early": []}
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)):
        u = _num(t.user_attrs.get("predicted_utilization"))
        key = {"trained": "trained", "pruned_before_training": "pruned before training",
               "stopped_early": "stopped early"}.get(outcome(t))
        if u is None or key is None:
            continue
        groups[key].append(u * 100)
    groups = {k: v for k, v in groups.items() if v}
    if not groups:
        return None
    fig = _figure(6.5, 4.2)
    ax = fig.add_subplot()
    colors = {"trained": "tab:blue", "pruned before training": "tab:gray", "stopped early": "tab:orange"}
    ax.hist(list(groups.values()), bins=30, stacked=True, color=[colors[k] for k in groups],
            label=[f"{k} ({len(v)})" for k, v in groups.items()])
    ax.set_xlabel("predicted utilization (% of datasheet peak)")
    ax.set_ylabel("candidates")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    _save(path, lambda tmp: fig.savefig(tmp, format="png"))
    return path


def population_png(activity: dict[str, Any] | None, path: Path) -> Path | None:
    """Candidates training at once over the search, where a population trained them (the trainer's activity,
    `membership_timeline`): the gaps under its places are where the device waited for the search around it
    (candidates being prepared, validated, measured, or too few left at the end)."""
    timeline = (activity or {}).get("membership_timeline") or []
    if len(timeline) < 2:
        return None
    times, members = [float(t) for t, _ in timeline], [int(n) for _, n in timeline]
    fig = _figure(7.0, 3.6)
    ax = fig.add_subplot()
    ax.step(times, members, where="post", color="tab:blue", lw=1.2, label="training at once")
    ax.fill_between(times, members, step="post", color="tab:blue", alpha=0.2)
    places = activity.get("places")
    if places:
        ax.axhline(places, color="gray", ls="--", lw=1, label=f"places ({places})")
    mean = activity.get("members_time_mean")
    title = f"{mean:.1f} candidates trained at once on average" if mean is not None else "candidates trained at once"
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("seconds since the first candidate took a place")
    ax.set_ylabel("candidates")
    ax.set_ylim(bottom=0)
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=8, loc="upper right")
    ax.grid(alpha=0.3)
    _save(path, lambda tmp: fig.savefig(tmp, format="png"))
    return path


def study_html(study: optuna.Study, path: Path) -> Path | None:
    """Optuna's own interactive figures (Pareto front, timeline) in one self-contained page."""
    try:
        import plotly  # noqa: F401
    except ImportError:
        return None
    from optuna.visualization import plot_pareto_front, plot_timeline

    names = metric_names(study)
    parts = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trained = _trained_only(study)
        if len(names) in (2, 3) and trained.trials:
            parts.append(plot_pareto_front(trained, target_names=names))
        parts.append(plot_timeline(study))
    html = [f"<h2 style='font-family:sans-serif'>{study.study_name}</h2>"]
    for i, fig in enumerate(parts):
        html.append(fig.to_html(full_html=False, include_plotlyjs=(i == 0)))
    page = ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>nasutil-search</title></head><body>"
            + "\n".join(html) + "</body></html>")
    _save(path, lambda tmp: tmp.write_text(page))
    return path


def _trained_only(study: optuna.Study) -> optuna.Study:
    """An in-memory copy holding the trained trials only: pruned trials recorded as infeasible COMPLETE
    ones carry placeholder objective values (accuracy 0) that must not stretch the front's axes."""
    copy = optuna.create_study(directions=study.directions)
    copy.add_trials([t for t in study.get_trials(deepcopy=False) if outcome(t) == "trained"])
    return copy


def write_plots(study: optuna.Study, folder: Path, html: bool = True,
                activity: dict[str, Any] | None = None) -> dict[str, Path]:
    """The run folder's plots; `activity` (the trainer's) adds `population.png` where a population trained."""
    made = {"pareto": pareto_png(study, folder / "pareto.png"),
            "predicted_vs_measured": predicted_vs_measured_png(study, folder / "predicted_vs_measured.png"),
            "utilization_hist": utilization_hist_png(study, folder / "utilization_hist.png"),
            "population": population_png(activity, folder / "population.png")}
    if html:
        made["html"] = study_html(study, folder / "study.html")
    return {k: v for k, v in made.items() if v is not None}
