"""Many codes runs side by side: a table, and the two plots people compare codes by.

After a sweep (`nasutil-codes -m k=2,4 encoder=mlp,sum ...`) each run folder holds its settings and
test scores; `collect` reads every one under the given folders and adds what the code costs (FLOPs per
protected query over the base's, counted on the CPU from the settings alone), `plot` draws
reconstruction accuracy per k (one bar per design) and degraded-mode accuracy against that overhead
(replication at 1).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nasutil.errors import NasutilError

if TYPE_CHECKING:
    from nasutil.codes.settings import RunSettings


def run_folders(paths: Iterable[Path]) -> list[Path]:
    """The codes run folders (with settings and test scores) that are, or are under, `paths`."""
    found: list[Path] = []
    for path in paths:
        if not path.exists():
            raise NasutilError(f"{str(path)!r} does not exist")
        candidates = [path] if (path / "run.json").is_file() else sorted(p.parent for p in path.rglob("run.json"))
        found += [p for p in candidates if (p / "scores.json").is_file()]
    if not found:
        raise NasutilError("no finished codes run (a folder with run.json and scores.json) under "
                           + ", ".join(repr(str(p)) for p in paths))
    return list(dict.fromkeys(found))


#: the settings a design's name says (`design`): a legend need not repeat them
DESIGN_SETTINGS = ("encoder", "decoder", "parity")


def design(code: dict[str, Any]) -> str:
    """A code's design as people name it: a learned code, or a parity model behind fixed parts."""
    if code["parity"] == "base":
        return f"learned code ({code['encoder']} encoder, {code['decoder']} decoder)"
    parity = "base's architecture" if code["parity"] == "copy" else code["parity"]
    return f"parity model ({code['encoder']} encoder, {code['decoder']} decoder, {parity})"


def overhead(settings) -> dict[str, float]:
    """The code's extra FLOPs per protected query against the base's (replication is 1)."""
    import torch

    from nasutil.codes.bases import build_base
    from nasutil.codes.code import Code
    from nasutil.codes.cost import code_cost
    from nasutil.datasets import SHAPES

    shape, classes = SHAPES[settings.dataset]
    with torch.no_grad():
        base = build_base(settings.base, shape[0], shape[1], classes).eval()
        code = Code(settings.code, settings.base, shape, classes)
        return code_cost(code, base, shape, classes).to_dict()


def collect(paths: Sequence[Path]) -> list[dict[str, Any]]:
    """One row per finished run under `paths`: settings, test scores and cost."""
    from nasutil.codes.run import RunSettings, read_record, read_settings

    rows = []
    for folder in run_folders(paths):
        path = folder / "scores.json"
        scores = read_record(path)
        figures = {}
        for key, high in (("reconstruction_accuracy", 1.0), ("degraded_accuracy", 1.0), ("normal_accuracy", 1.0),
                          ("rebuilt", float(2**53))):
            value = scores.get(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= high:
                raise NasutilError(f"{str(path)!r} is damaged ({key} must be a number from 0 to {high:g}, got "
                                   f"{str(value)[:40]!r})")
            figures[key] = value
        try:  # the settings the scores were taken with (run.json moves on when a run is continued)
            settings = RunSettings.from_dict(scores["settings"]) if "settings" in scores else read_settings(folder)
        except (KeyError, TypeError) as exc:
            raise NasutilError(f"{str(path)!r} is damaged ({type(exc).__name__}: {exc})") from None
        code = settings.code.to_dict()
        epochs = scores.get("epochs", settings.epochs)
        if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
            raise NasutilError(f"{str(path)!r} is damaged (epochs must be a whole number >= 1, got "
                               f"{str(epochs)[:40]!r})")
        row = {"run": str(folder), "dataset": settings.dataset, "base": settings.base, "k": code["k"],
               "r": code["r"], "design": design(code), "epochs": epochs,
               **figures, "overhead": overhead(settings)["overhead"]}
        rows.append({**row, **{k: v for k, v in flat_settings(settings).items() if k not in row}})
    return rows


def flat_settings(settings: RunSettings) -> dict[str, Any]:
    """Every setting of a run as its record holds it, its code's among the others (one level)."""
    record = settings.to_dict()
    return {**{k: v for k, v in record.items() if k != "code"}, **record["code"]}


def setting_names() -> list[str]:
    """The names of every setting a run record holds, read from its schema: a setting added to runs later
    tells their bars apart too, with no list here to go stale."""
    from dataclasses import fields

    from nasutil.codes.settings import CodeSpec, RunSettings

    return [f.name for f in fields(RunSettings) if f.name != "code"] + [f.name for f in fields(CodeSpec)]


#: settings that do not make another kind of run: runs of one bar differ by seed alone, and k is the x axis
NOT_OF_THE_KIND = ("seed", "k")


def kind(row: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """What runs averaged into one bar share: the design and every setting but the seed (and k, a bar's
    place), as (name, value) pairs; a setting a row does not record (an experiment's) reads as None."""
    names = [n for n in setting_names() if n not in NOT_OF_THE_KIND]
    return (("design", row["design"]), *((n, _plain(row.get(n))) for n in names))


def _plain(value: Any) -> Any:
    """A recorded number as one value whichever way it was written (20 and 20.0 are one kind of run)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _order(key: tuple[tuple[str, Any], ...]) -> list[tuple[int, Any]]:
    """A sort key for kinds of runs whose settings mix numbers, text and None (all training images)."""
    return [(0, v) if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, str(v)) for _, v in key]


def labels(keys: Iterable[tuple[tuple[str, Any], ...]]) -> dict[tuple, str]:
    """Each kind of run's legend: its design, then every setting that differs among the kinds, save those
    the design names (`...; loss=kl, train_images=300`), so that no two bars share a label."""
    keys = list(keys)
    names = [name for name, _ in keys[0][1:]] if keys else []
    shown = [i for i, name in enumerate(names, start=1)
             if name not in DESIGN_SETTINGS and len({key[i][1] for key in keys}) > 1]
    return {key: key[0][1] + ("; " + ", ".join(f"{names[i - 1]}={_text(key[i][1])}" for i in shown) if shown else "")
            for key in keys}


def _text(value: Any) -> str:
    """A setting's value in a legend: None is every image (train_images, test_images not limited)."""
    return "all" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def plot(rows: Sequence[dict[str, Any]], out: Path) -> list[Path]:
    """reconstruction_by_k.png (a bar per design and k; the mean where several runs share both) and
    accuracy_vs_overhead.png (a point per run) in `out`. Runs that differ in any setting but the seed (the
    data, the base, r, the epochs, the training images, the loss) are told apart in the legend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    groups = sorted({(r["dataset"], r["base"]) for r in rows})
    series = {kind(r) for r in rows}
    label = labels(series)
    ordered = sorted(series, key=_order)
    ks = sorted({int(r["k"]) for r in rows})
    title = ", ".join(f"{d}, base {b}" for d, b in groups)
    fig, ax = plt.subplots(figsize=(7, 3.8))
    width = 0.8 / max(1, len(ordered))
    heights = bars(rows)
    for i, key in enumerate(ordered):
        xs = [j + i * width for j, k in enumerate(ks) if k in heights[key]]
        ax.bar(xs, [heights[key][k] for k in ks if k in heights[key]], width, label=label[key])
    ax.set_xticks([j + width * (len(ordered) - 1) / 2 for j in range(len(ks))], [f"k = {k}" for k in ks])
    ax.set_ylabel("reconstruction accuracy (%)")
    ax.set_ylim(0, 100)
    by_k = _save(fig, ax, title, out / "reconstruction_by_k.png")

    fig, ax = plt.subplots(figsize=(7, 3.8))
    for key in ordered:
        mine = [r for r in rows if kind(r) == key]
        ax.scatter([float(r["overhead"]) for r in mine], [100 * float(r["degraded_accuracy"]) for r in mine],
                   label=label[key])
        for r in mine:
            ax.annotate(f"k={r['k']}", (float(r["overhead"]), 100 * float(r["degraded_accuracy"])), fontsize=7)
    ax.axvline(1.0, color="grey", linestyle=":", label="replication (overhead 1)")
    ax.set_xscale("log")
    ax.set_xlabel("extra FLOPs per protected query / base FLOPs")
    ax.set_ylabel("degraded-mode accuracy (%)")
    versus = _save(fig, ax, title, out / "accuracy_vs_overhead.png")
    return [by_k, versus]


def bars(rows: Sequence[dict[str, Any]]) -> dict[tuple, dict[int, float]]:
    """Reconstruction accuracy (%) per kind of run (`kind`: every setting but the seed) and k: the mean of the
    runs that differ by seed alone, never of runs trained on other data, for other epochs, on fewer images
    or with another loss."""
    sums: dict[tuple, dict[int, list[float]]] = {}
    for r in rows:
        sums.setdefault(kind(r), {}).setdefault(int(r["k"]), []).append(100 * float(r["reconstruction_accuracy"]))
    return {key: {k: sum(v) / len(v) for k, v in by_k.items()} for key, by_k in sums.items()}


def _save(fig, ax, title: str, path: Path) -> Path:
    import matplotlib.pyplot as plt

    ax.legend(fontsize=7)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path
