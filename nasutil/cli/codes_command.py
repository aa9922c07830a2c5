"""`nasutil codes train`, `eval` and `report`: learned coded computation for a deployed classifier."""

from __future__ import annotations

import argparse
from pathlib import Path

from nasutil.cli.args import non_negative_int, positive_int
from nasutil.cli.output import console, print_json
from nasutil.codes.settings import data_folder, from_values, settings


def register(sub: argparse._SubParsersAction) -> None:
    codes = sub.add_parser("codes", help="train and score codes that rebuild a classifier's unavailable outputs")
    csub = codes.add_subparsers(dest="codes_command", metavar="ACTION", parser_class=type(codes))
    csub.required = True
    t = csub.add_parser("train", help="train a base classifier and a code for it in RUN_DIR (resumable)",
                        description="Train the base (if RUN_DIR has none) and then the code, scoring it on the "
                                    "validation split after every epoch and on the test split at the end. "
                                    "Re-run the same command to continue an interrupted run.")
    t.add_argument("--out", type=Path, required=True, metavar="RUN_DIR")
    add_setting_flags(t)
    t.add_argument("--json", action="store_true", help="print the final scores as one JSON object")
    t.set_defaults(handler=cmd_train)

    e = csub.add_parser("eval", help="score the code of RUN_DIR on its dataset's test split")
    e.add_argument("run", type=Path, metavar="RUN_DIR")
    e.add_argument("--code", type=Path, default=None, metavar="FILE",
                   help="score this code checkpoint (it must belong to RUN_DIR's base) instead of RUN_DIR's")
    e.add_argument("--data-dir", default=None, help="as for train (default $NASUTIL_DATA_DIR, else data)")
    e.add_argument("--device", default="auto")
    e.add_argument("--json", action="store_true")
    e.set_defaults(handler=cmd_eval)
    rep = csub.add_parser("report", help="compare finished runs: a table, and plots of accuracy per k and against cost",
                          description="Read every finished run folder in or under the paths given (a sweep's "
                                      "`outputs/codes`, say), add each code's extra FLOPs per protected query "
                                      "against the base's, print the table and write runs.csv, "
                                      "reconstruction_by_k.png and accuracy_vs_overhead.png to --out.")
    rep.add_argument("paths", type=Path, nargs="+", metavar="PATH")
    rep.add_argument("--out", type=Path, default=Path("codes-report"), help="folder for the CSV and plots "
                                                                          "(default codes-report)")
    rep.add_argument("--json", action="store_true", help="print the rows as JSON")
    rep.set_defaults(handler=cmd_report)


#: the argument type of a whole-number setting's flag, by the least value it takes
WHOLE_NUMBER = {0: non_negative_int, 1: positive_int}


def add_setting_flags(parser: argparse.ArgumentParser) -> None:
    """A flag for each setting of the schema (`nasutil.codes.settings`) that `nasutil codes train` takes:
    `--NAME` (`_` as `-`), its default, its type and its help, with the default named where the help does
    not already say it."""
    for s in settings():
        if not s.flag:
            continue
        text = s.help
        if text and s.default is not None and "(default" not in text:
            text = f"{text} (default {s.default})"
        typed = {} if s.least is None else {"type": WHOLE_NUMBER[s.least]}
        parser.add_argument(f"--{s.name.replace('_', '-')}", default=s.default, help=text, **typed)


def cmd_train(args: argparse.Namespace) -> int:
    run, job = from_values({s.name: getattr(args, s.name) for s in settings() if s.flag})
    scores = train_with_progress(run, args.out, data_folder(job.data_dir), job.device, show=True,
                                 transient=args.json)
    print_scores(scores, args.json, args.out)
    return 0


def train_with_progress(run, folder: Path, data_dir: str, device: str, show: bool = True,
                        transient: bool = False):
    """`nasutil.codes.train_run` with a progress bar on stderr per stage (base, code), shown from the
    first epoch on: `train_run` checks every setting before that, so a bad one fails in one line."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from nasutil.codes import train_run
    from nasutil.codes.lock import training_lock

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[note]}"),
               TimeElapsedColumn())
    bar: Progress | None = None
    tasks: dict[str, int] = {}

    def progress(stage: str, done: int, total: int, figures: dict[str, float]) -> None:
        nonlocal bar
        if not show:
            return
        if bar is None:
            bar = Progress(*columns, console=Console(stderr=True), transient=transient)
            bar.start()
        if stage not in tasks:
            tasks[stage] = bar.add_task(f"training the {stage}", total=total, note="")
        note = f"loss {figures['loss']:.4g}"
        if "valid_reconstruction_accuracy" in figures:
            note += f", validation reconstruction {100 * figures['valid_reconstruction_accuracy']:.1f}%"
        bar.update(tasks[stage], completed=done, note=note)

    try:
        with training_lock(folder):  # the lock `nasutil-codes` takes too: never two jobs on one folder
            return train_run(run, folder, data_dir, device, progress)
    finally:
        if bar is not None:
            bar.stop()


def cmd_eval(args: argparse.Namespace) -> int:
    from nasutil.codes import evaluate_run

    print_scores(evaluate_run(args.run, data_folder(args.data_dir), args.device, args.code), args.json, args.run)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    import csv

    from rich.table import Table

    from nasutil.codes.report import collect, plot

    from nasutil.errors import NasutilError

    rows = sorted(collect(args.paths), key=lambda r: (r["dataset"], r["base"], r["k"], r["design"], r["run"]))
    if args.out.exists() and not args.out.is_dir():
        raise NasutilError(f"--out {str(args.out)!r} is a file, not a folder")
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "runs.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    plots = plot(rows, args.out)
    if args.json:
        print_json({"runs": rows, "files": [str(args.out / "runs.csv"), *map(str, plots)]})
        return 0
    table = Table("dataset", "base", "k", "design", "epochs", "reconstruction", "degraded-mode", "normal-mode",
                  "extra FLOPs / base")
    for r in rows:
        table.add_row(r["dataset"], r["base"], str(r["k"]), r["design"], str(r["epochs"]),
                      f"{100 * r['reconstruction_accuracy']:.2f}%", f"{100 * r['degraded_accuracy']:.2f}%",
                      f"{100 * r['normal_accuracy']:.2f}%", f"{r['overhead']:.2f}")
    console().print(table)
    console().print(f"wrote {args.out / 'runs.csv'}, {plots[0]}, {plots[1]}", highlight=False)
    return 0


def print_scores(scores, as_json: bool, folder: Path) -> None:
    if as_json:
        print_json({**scores.to_dict(), "run": str(folder)})
        return
    console().print(f"{folder}: reconstruction accuracy {100 * scores.reconstruction_accuracy:.2f}%, "
                    f"degraded-mode accuracy {100 * scores.degraded_accuracy:.2f}% "
                    f"(chance {100 * scores.chance:.0f}%), normal-mode accuracy {100 * scores.normal_accuracy:.2f}% "
                    f"({scores.rebuilt:,} outputs rebuilt)", highlight=False)
