"""`nasutil predict` and `nasutil profile`: predict without the target GPU; make device profiles."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from nasutil.cli.args import (add_arch_choice, chosen_archs, non_negative_int, positive_int, refuse_overwriting,
                              sample_count)
from nasutil.cli.output import console, human_count, print_json
from nasutil.devices import DTYPES
from nasutil.errors import NasutilError
from nasutil.evaluator.config import MODES

PROFILE_KINDS = ("auto", "learned", "operators", "analytical")  # the kinds that predict from a profile
ROUGH = 0.10  # a held-out error above this gets a note with the predictions


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("predict", help="predict latency, throughput and utilization from a device profile")
    p.add_argument("space")
    add_arch_choice(p)
    p.add_argument("--profile", default="h200", help="shipped profile name or a profile .json (default h200)")
    p.add_argument("--batch-size", type=positive_int, default=256)
    p.add_argument("--dtype", choices=DTYPES, default="fp16")
    p.add_argument("--mode", choices=MODES, default="cudagraph")
    p.add_argument("--input-size", type=positive_int, default=None, help="default: the space's own")
    p.add_argument("--predictor", choices=PROFILE_KINDS, default="auto",
                   help="auto: of the profile's learned model and operator table for this space and "
                        "configuration, the one with the lower held-out error; else analytical")
    p.add_argument("--json", action="store_true")
    p.add_argument("--table", type=Path, metavar="FILE",
                   help="also write the predictions to FILE as a CSV table (what predictor=table reads)")
    p.set_defaults(handler=cmd_predict)

    prof = sub.add_parser("profile", help="build, fit or show device profiles")
    psub = prof.add_subparsers(dest="profile_command", metavar="ACTION", parser_class=type(prof))
    psub.required = True
    f = psub.add_parser("fit", help="fit a profile from evaluator results (JSON lines or CSV)")
    f.add_argument("measurements", nargs="+", type=Path, help="files or folders of evaluator results")
    f.add_argument("--out", type=Path, required=True)
    f.add_argument("--features", choices=("encoding", "encoding+operators"), default="encoding+operators")
    f.add_argument("--min-rows", type=positive_int, default=50)
    f.add_argument("--base", action="append", default=None, metavar="PROFILE",
                   help="start from this profile's operator tables (their overlap constants are refitted); "
                        "repeatable: the tables of every profile given are pooled")
    f.set_defaults(handler=cmd_profile_fit)
    b = psub.add_parser("build", help="measure operators and a few networks on this machine's GPU; write a profile")
    b.add_argument("--device", default="cuda")
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--spaces", default="nb201,mbconv", help="comma-separated spaces (default nb201,mbconv)")
    b.add_argument("--op-networks", type=positive_int, default=300,
                   help="networks sampled per space whose distinct ops are measured (default 300)")
    b.add_argument("--max-ops", type=positive_int, default=2000,
                   help="distinct ops timed per configuration (default 2000); where the sampled networks hold "
                        "more, each kind of op keeps an equal share, so rare kinds are all timed")
    b.add_argument("--networks", type=non_negative_int, default=6,
                   help="networks measured per space and configuration to fit the overlap constants (default 6; "
                        "`profile fit --base` refits them on more)")
    b.add_argument("--batch-size", type=positive_int, action="append", help="repeatable (default 256 and 1)")
    b.add_argument("--mode", choices=MODES, action="append", help="repeatable (default cudagraph and eager)")
    b.add_argument("--dtype", choices=DTYPES, default="fp16")
    b.add_argument("--workers", type=positive_int, default=None,
                   help="worker processes for the network measurements (default: half the CPU cores, at most 8)")
    b.add_argument("--seed", type=non_negative_int, default=0)
    b.set_defaults(handler=cmd_profile_build)
    n = psub.add_parser("next", help="which archs to measure next: where learned predictors disagree most",
                        description="Print COUNT arch strings (one per line, for `nasutil measure --archs`) from a "
                                    "sampled pool, chosen where an ensemble fitted on the measurements so far "
                                    "disagrees most. Measure them, add the results, repeat.")
    n.add_argument("space")
    n.add_argument("measurements", nargs="+", type=Path, help="files or folders of evaluator results")
    n.add_argument("--count", type=positive_int, default=50)
    n.add_argument("--pool", type=sample_count, default=5000, help="candidates sampled to choose from")
    n.add_argument("--profile", default="h200", help="profile whose operator tables feed the features")
    n.add_argument("--batch-size", type=positive_int, default=256)
    n.add_argument("--dtype", choices=DTYPES, default="fp16")
    n.add_argument("--mode", choices=MODES, default="cudagraph")
    n.add_argument("--seed", type=non_negative_int, default=0)
    n.set_defaults(handler=cmd_profile_next)
    s = psub.add_parser("show", help="what a profile holds")
    s.add_argument("profile", nargs="?", default="h200")
    s.set_defaults(handler=cmd_profile_show)


def cmd_predict(args: argparse.Namespace) -> int:
    from nasutil.predictor import make_predictor
    from nasutil.predictor.kinds.table import write_table
    from nasutil.registry import get_space

    space = get_space(args.space)
    predictor = make_predictor(args.predictor, profile=args.profile)
    target = predictor.target(args.dtype, args.batch_size, args.mode)
    archs = chosen_archs(args, space)
    predictor.check(args.space, target)  # a missing model or table fails before any output
    if args.table:
        refuse_overwriting(args.table, [p for p in (args.archs, args.profile) if p], "--table")
    table = _open_for_writing(args.table) if args.table else None
    rows = []
    try:
        for start in range(0, len(archs), 1024):  # batches: learned models score a batch at once
            batch = predictor.predict_many(args.space, archs[start:start + 1024], target, args.input_size)
            if table is not None:
                write_table(table, batch, header=start == 0)
            if args.json:
                for p in batch:
                    print_json(p.to_dict())
            else:
                rows += batch
    finally:
        if table is not None:
            table.close()
    if not args.json:
        title = (f"predicted for {escape(predictor.device_name)}, {args.dtype}, batch {args.batch_size}, "
                 f"{args.mode}")
        out = Table("arch", "predictor", "latency ms", "images/s", "utilization", "params", "validated",
                    title=title)
        for p in rows:
            label = p.arch if len(p.arch) < 60 else p.arch[:57] + "..."
            util = "-" if p.utilization is None else f"{100 * p.utilization:.2f}%"
            out.add_row(escape(label), p.predictor, f"{p.latency_ms:.3f}", human_count(p.throughput_per_s), util,
                        "-" if p.params is None else human_count(p.params), "yes" if p.validated else "no")
        console().print(out)
        unvalidated = [p for p in rows if not p.validated]
        if unvalidated:
            print(f"nasutil: note: {len(unvalidated)} of {len(rows)} predictions are unvalidated: "
                  f"{unvalidated[0].unvalidated_reason}; calibrate with `nasutil profile next` and "
                  f"`nasutil profile fit` on a few measured networks of this space", file=sys.stderr)
    error = predictor.expected_error(args.space, target)
    if error is not None and error > ROUGH:
        print(f"nasutil: note: this profile's held-out latency error for {args.space} at {args.dtype}, batch "
              f"{args.batch_size}, {args.mode} is {error:.0%} ({predictor.answering(args.space, target)}): "
              f"treat these predictions as rough", file=sys.stderr)
    return 0


def _open_for_writing(path: Path):
    try:
        return path.open("w", newline="")
    except OSError as exc:
        raise NasutilError(f"cannot write {str(path)!r}: {exc}") from None


def _usable_measurements(paths, skipped: dict[str, int]) -> list[dict]:
    """The measurement rows a profile can learn from, the rows left out counted in `skipped` by reason (the
    caller says so once its fit, which leaves out rows of its own, is done: `_say_skipped`). None at all is
    an error, in one line that says why the rows there were left out."""
    from nasutil.predictor.training_data import fittable, read_measurements, skipped_note

    rows = fittable(read_measurements(paths, skipped), skipped)
    note = skipped_note(skipped)
    if not rows:
        raise NasutilError("no successful measurements found in the given files"
                           + (f" ({note.replace('skipped', 'left out', 1)})" if note else ""))
    return rows


def _say_skipped(skipped: dict[str, int]) -> None:
    """One line on stderr counting the measurement rows left out, and why (none where none were)."""
    from nasutil.predictor.training_data import skipped_note

    note = skipped_note(skipped)
    if note:
        print(f"nasutil: warning: {note}", file=sys.stderr)


def cmd_profile_fit(args: argparse.Namespace) -> int:
    from nasutil.predictor import load_profile
    from nasutil.predictor.fit import fit_profile

    refuse_overwriting(args.out, args.measurements, "--out")
    skipped: dict[str, int] = {}
    rows = _usable_measurements(args.measurements, skipped)
    from nasutil.predictor.profile import merge_operator_tables

    base = merge_operator_tables([load_profile(p) for p in args.base]) if args.base else None
    source = "fitted from " + ", ".join(str(p) for p in args.measurements)
    if base is not None:
        source = f"{base.source}; {source}" if base.source else source
    try:
        profile = fit_profile(rows, features=args.features, min_rows=args.min_rows, source=source, base=base,
                              skipped=skipped)
    finally:
        _say_skipped(skipped)
    dropped = _dropped_models(base, profile)
    if dropped:
        why = ("they were fitted on the operator tables' old overlap constants, which this fit refits"
               if base.operators else "a fit keeps only the models its measurements fit")
        print(f"nasutil: warning: the base's learned models for {dropped} are not in {args.out}: {why} (fit them "
              "again with their measurements among these, or keep the base's file)", file=sys.stderr)
    _save(profile, args.out)
    return 0


def _dropped_models(base, profile) -> str:
    """The base's learned models (space dtype bBATCH mode) the fitted profile lacks, as text; '' where none."""
    if base is None:
        return ""
    kept = {(e.space, e.dtype, e.batch_size, e.mode) for e in profile.learned}
    return ", ".join(f"{e.space} {e.dtype} b{e.batch_size} {e.mode}" for e in base.learned
                     if (e.space, e.dtype, e.batch_size, e.mode) not in kept)


def cmd_profile_build(args: argparse.Namespace) -> int:
    from nasutil.predictor.profile_build import build_profile

    spaces = [s.strip() for s in args.spaces.split(",") if s.strip()]
    if not spaces:
        raise NasutilError("--spaces names no space")
    configs = [(b, m) for b in (args.batch_size or [256, 1]) for m in (args.mode or ["cudagraph", "eager"])]
    profile = build_profile(args.device, spaces, dtype=args.dtype, configs=configs, op_networks=args.op_networks,
                            max_ops=args.max_ops, networks=args.networks, workers=args.workers, seed=args.seed,
                            on_tables=lambda tables_only: _save(tables_only, args.out),
                            log=lambda line: console().print(line))
    _save(profile, args.out)
    return 0


def _save(profile, path: Path) -> None:
    try:
        profile.save(path)
    except OSError as exc:
        raise NasutilError(f"cannot write {str(path)!r}: {exc}") from None
    tables = ", ".join(f"{t.key} ({len(t.times_us)} ops)" for t in profile.operators) or "none"
    entries = ", ".join(f"{e.space} {e.dtype} b{e.batch_size} {e.mode} ({e.rows} archs)" for e in profile.learned)
    console().print(f"wrote {path}: {escape(profile.device_name)}; operator tables: {escape(tables)}; "
                    f"learned models: {escape(entries or 'none')}")


def cmd_profile_next(args: argparse.Namespace) -> int:
    from nasutil.predictor import PredictTarget, load_profile
    from nasutil.predictor.active import measured_latencies, next_to_measure, unmeasured_pool
    from nasutil.registry import get_space

    get_space(args.space)  # an unknown space fails before anything is read
    profile = load_profile(args.profile)
    skipped: dict[str, int] = {}
    rows = _usable_measurements(args.measurements, skipped)
    try:
        device, latencies = measured_latencies(rows, args.space, args.dtype, args.batch_size, args.mode, skipped)
    finally:
        _say_skipped(skipped)
    target = PredictTarget(device, args.dtype, args.batch_size, args.mode)
    pool = unmeasured_pool(args.space, latencies, args.pool, args.seed)
    if not pool:
        raise NasutilError("every sampled candidate is measured already (raise --pool or change --seed)")
    picks = next_to_measure(args.space, latencies, pool, target, profile, args.count, seed=args.seed)
    for arch in picks:
        print(arch)
    if len(picks) < args.count:
        print(f"nasutil: note: {len(picks)} of the {args.count} asked for: the pool of {args.pool} sampled holds only "
              f"{len(pool)} unmeasured candidates (raise --pool for more)", file=sys.stderr)
    return 0


def cmd_profile_show(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from nasutil.predictor.profile import load_profile

    profile = load_profile(args.profile)
    print_json({k: v for k, v in profile.to_dict().items() if k not in ("learned", "operators")}
               | {"operators": [{"dtype": t.dtype, "batch_size": t.batch_size, "mode": t.mode, "ops": len(t.times_us),
                                 **asdict(t.shared),
                                 "by_space": {k: asdict(v) for k, v in t.by_space.items()}}
                                for t in profile.operators]}
               | {"learned": [{"space": e.space, "dtype": e.dtype, "batch_size": e.batch_size, "mode": e.mode,
                               "features": e.features, "rows": e.rows, "validation_mape": e.validation}
                              for e in profile.learned]})
    return 0
