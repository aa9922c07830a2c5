"""`nasutil predict` and `nasutil profile`: predict without the target GPU; make device profiles."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from nasutil.cli.measure_command import read_arch_file
from nasutil.cli.output import console, human_count, print_json
from nasutil.cli.space_commands import non_negative_int, positive_int
from nasutil.devices import DTYPES
from nasutil.errors import NasutilError
from nasutil.evaluator.config import MODES

PREDICTORS = ("auto", "learned", "analytical")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("predict", help="predict latency, throughput and utilization from a device profile")
    p.add_argument("space")
    p.add_argument("arch", nargs="?")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--sample", type=positive_int, metavar="N")
    what.add_argument("--archs", type=Path, metavar="FILE")
    p.add_argument("--seed", type=non_negative_int, default=0)
    p.add_argument("--profile", default="h200", help="shipped profile name or a profile .json (default h200)")
    p.add_argument("--batch-size", type=positive_int, default=256)
    p.add_argument("--dtype", choices=DTYPES, default="fp16")
    p.add_argument("--mode", choices=MODES, default="cudagraph")
    p.add_argument("--predictor", choices=PREDICTORS, default="auto",
                   help="auto: the profile's learned model where it has one, else analytical")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_predict)

    prof = sub.add_parser("profile", help="build, fit or show device profiles")
    psub = prof.add_subparsers(dest="profile_command", metavar="ACTION", parser_class=type(prof))
    psub.required = True
    f = psub.add_parser("fit", help="fit a profile from evaluator results (JSON lines or CSV)")
    f.add_argument("measurements", nargs="+", type=Path, help="files or folders of evaluator results")
    f.add_argument("--out", type=Path, required=True)
    f.add_argument("--features", choices=("encoding", "encoding+operators"), default="encoding+operators")
    f.add_argument("--min-rows", type=positive_int, default=50)
    f.set_defaults(handler=cmd_profile_fit)
    b = psub.add_parser("build", help="measure sampled candidates on this machine's device and fit a profile")
    b.add_argument("--device", default="cuda")
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--spaces", default="nb201,mbconv", help="comma-separated spaces (default nb201,mbconv)")
    b.add_argument("--per-space", type=positive_int, default=300, help="candidates per space (default 300)")
    b.add_argument("--batch-size", type=positive_int, action="append", help="repeatable (default 256)")
    b.add_argument("--mode", choices=MODES, action="append", help="repeatable (default cudagraph)")
    b.add_argument("--dtype", choices=DTYPES, default=None)
    b.add_argument("--input-size", type=positive_int, default=None)
    b.add_argument("--workers", type=positive_int, default=1)
    b.add_argument("--seed", type=non_negative_int, default=0)
    b.set_defaults(handler=cmd_profile_build)
    s = psub.add_parser("show", help="what a profile holds")
    s.add_argument("profile", nargs="?", default="h200")
    s.set_defaults(handler=cmd_profile_show)


def cmd_predict(args: argparse.Namespace) -> int:
    from nasutil.predictor.base import PredictTarget
    from nasutil.predictor.fit import predict
    from nasutil.predictor.profile import load_profile
    from nasutil.registry import get_space

    space = get_space(args.space)
    profile = load_profile(args.profile)
    target = PredictTarget(profile.device_name, args.dtype, args.batch_size, args.mode)
    if args.arch is not None:
        if args.sample or args.archs:
            raise NasutilError("give either ARCH, --sample or --archs")
        archs = [args.arch]
    elif args.sample:
        archs = [a.to_string() for a in space.sample_many(args.sample, args.seed)]
    elif args.archs:
        archs = read_arch_file(args.archs, space)
    else:
        raise NasutilError("give an ARCH, --sample N or --archs FILE")
    for text in archs:
        space.parse(text)
    rows = []
    for text in archs:
        p = predict(space, args.space, text, profile, target, args.predictor)
        if args.json:
            print_json(p.to_dict())
        else:
            rows.append(p)
    if not args.json:
        table = Table("arch", "predictor", "latency ms", "images/s", "utilization",
                      title=f"predicted for {escape(profile.device_name)}, {args.dtype}, batch {args.batch_size}, "
                            f"{args.mode}")
        for p in rows:
            label = p.arch if len(p.arch) < 60 else p.arch[:57] + "..."
            util = "-" if p.utilization is None else f"{100 * p.utilization:.2f}%"
            table.add_row(escape(label), p.predictor, f"{p.latency_ms:.3f}", human_count(p.throughput_per_s), util)
        console().print(table)
    return 0


def cmd_profile_fit(args: argparse.Namespace) -> int:
    from nasutil.predictor.fit import fit_profile, read_measurements

    rows = read_measurements(args.measurements)
    if not rows:
        raise NasutilError("no successful measurements found in the given files")
    source = "fitted from " + ", ".join(str(p) for p in args.measurements)
    profile = fit_profile(rows, features=args.features, min_rows=args.min_rows, source=source)
    _save(profile, args.out)
    return 0


def cmd_profile_build(args: argparse.Namespace) -> int:
    from nasutil.evaluator.candidate import Candidate
    from nasutil.evaluator.config import MeasureConfig
    from nasutil.evaluator.evaluator import Evaluator
    from nasutil.predictor.fit import fit_profile
    from nasutil.registry import get_space

    spaces = [s.strip() for s in args.spaces.split(",") if s.strip()]
    if not spaces:
        raise NasutilError("--spaces names no space")
    on_gpu = args.device.startswith("cuda")
    base = MeasureConfig(device=args.device, dtype=args.dtype or ("fp16" if on_gpu else "fp32"),
                         input_size=args.input_size, counters=False, warmup=2, repeats=5, min_window_ms=2.0,
                         mode="cudagraph" if on_gpu else "eager")
    candidates = []
    for name in spaces:
        space = get_space(name)
        candidates += [Candidate(name, a.to_string()) for a in space.sample_many(args.per_space, args.seed)]
    rows, started = [], time.perf_counter()
    for batch in args.batch_size or [256 if on_gpu else 8]:
        for mode in args.mode or [base.mode]:
            config = base.with_(batch_size=batch, mode=mode)
            with Evaluator(config, workers=args.workers) as evaluator:
                results = evaluator.measure_many(candidates, progress=True, total=len(candidates),
                                                 description=f"batch {batch} {mode}")
                rows += [m.to_dict(with_layers=False) for m in results if m.ok]
    if not rows:
        raise NasutilError("every measurement failed; nothing to fit")
    profile = fit_profile(rows, min_rows=min(50, args.per_space),
                          source=f"built with nasutil profile build ({len(rows)} measurements, "
                                 f"{time.perf_counter() - started:.0f} s)")
    _save(profile, args.out)
    return 0


def _save(profile, path: Path) -> None:
    try:
        profile.save(path)
    except OSError as exc:
        raise NasutilError(f"cannot write {str(path)!r}: {exc}") from None
    entries = ", ".join(f"{e.space} {e.dtype} b{e.batch_size} {e.mode} ({e.rows} archs)" for e in profile.learned)
    console().print(f"wrote {path}: {escape(profile.device_name)}; learned models: {escape(entries)}")


def cmd_profile_show(args: argparse.Namespace) -> int:
    from nasutil.predictor.profile import load_profile

    profile = load_profile(args.profile)
    print_json({k: v for k, v in profile.to_dict().items() if k != "learned"}
               | {"learned": [{"space": e.space, "dtype": e.dtype, "batch_size": e.batch_size, "mode": e.mode,
                               "features": e.features, "rows": e.rows} for e in profile.learned]})
    return 0
