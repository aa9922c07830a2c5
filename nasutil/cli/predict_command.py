"""`nasutil predict` and `nasutil profile`: predict without the target GPU; make device profiles."""

from __future__ import annotations

import argparse
import os
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

PREDICTORS = ("auto", "learned", "operators", "analytical")


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
    p.add_argument("--input-size", type=positive_int, default=None, help="default: the space's own")
    p.add_argument("--predictor", choices=PREDICTORS, default="auto",
                   help="auto: of the profile's learned model and operator table for this space and "
                        "configuration, the one with the lower held-out error; else analytical")
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
    f.add_argument("--base", default=None, metavar="PROFILE",
                   help="start from this profile's operator tables (their overlap constants are refitted)")
    f.set_defaults(handler=cmd_profile_fit)
    b = psub.add_parser("build", help="measure operators and a few networks on this machine's GPU; write a profile")
    b.add_argument("--device", default="cuda")
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--spaces", default="nb201,mbconv", help="comma-separated spaces (default nb201,mbconv)")
    b.add_argument("--op-networks", type=positive_int, default=300,
                   help="networks sampled per space whose distinct ops are measured (default 300)")
    b.add_argument("--max-ops", type=positive_int, default=2000, help="ops measured per configuration")
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
    n.add_argument("--pool", type=positive_int, default=5000, help="candidates sampled to choose from")
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
    from nasutil.predictor.base import PredictTarget
    from nasutil.predictor.fit import ProfilePredictor
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
    predictor = ProfilePredictor(profile)
    predictor.choose(args.space, target, args.predictor)  # a missing model or table fails before any output
    rows = []
    for start in range(0, len(archs), 1024):  # batches: learned models score a batch at once
        for p in predictor.predict_many(space, args.space, archs[start:start + 1024], target, args.predictor,
                                        args.input_size):
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
    from nasutil.predictor.profile import load_profile

    rows = read_measurements(args.measurements)
    if not rows:
        raise NasutilError("no successful measurements found in the given files")
    base = load_profile(args.base) if args.base else None
    source = "fitted from " + ", ".join(str(p) for p in args.measurements)
    if base is not None:
        source = f"{base.source}; {source}" if base.source else source
    profile = fit_profile(rows, features=args.features, min_rows=args.min_rows, source=source, base=base)
    _save(profile, args.out)
    return 0


def cmd_profile_build(args: argparse.Namespace) -> int:
    import torch
    from rich.progress import Progress

    from nasutil.evaluator.candidate import Candidate
    from nasutil.evaluator.config import MeasureConfig
    from nasutil.evaluator.evaluator import Evaluator
    from nasutil.evaluator.counters import NvmlDevice
    from nasutil.evaluator.measure import device_name, resolve_device
    from nasutil.predictor.base import PredictTarget
    from nasutil.predictor.build import measure_tables, sampled_ops, select_ops
    from nasutil.predictor.fit import fit_profile
    from nasutil.predictor.profile import DeviceProfile
    from nasutil.registry import get_space

    if not args.device.startswith("cuda"):
        raise NasutilError("profile build times operators with CUDA graphs and events: it needs --device cuda[:N]")
    if not torch.cuda.is_available():
        raise NasutilError("no CUDA device here (profile build measures on the GPU it runs on)")
    spaces = [s.strip() for s in args.spaces.split(",") if s.strip()]
    if not spaces:
        raise NasutilError("--spaces names no space")
    for name in spaces:
        get_space(name)
    started = time.perf_counter()
    device = resolve_device(args.device)
    info = {"device_name": device_name(device), "torch_version": torch.__version__,
            "driver_version": NvmlDevice.for_torch_device(device).driver_version}
    configs = [(b, m) for b in (args.batch_size or [256, 1]) for m in (args.mode or ["cudagraph", "eager"])]
    targets = [PredictTarget(info["device_name"], args.dtype, b, m) for b, m in configs]
    ops = select_ops(sampled_ops(spaces, args.op_networks, args.seed), args.max_ops, args.seed)
    with Progress(console=console(), transient=True) as bar:
        task = bar.add_task(f"{len(ops)} ops x {len(targets)} configurations", total=len(ops) * len(targets))
        tables = measure_tables(ops, targets, args.device, progress=lambda: bar.advance(task))
    console().print(f"timed {len(ops)} ops at {len(targets)} configurations in {time.perf_counter() - started:.0f} s")
    profile = DeviceProfile(device_name=info["device_name"], driver_version=info.get("driver_version"),
                            torch_version=info.get("torch_version"), operators=tables,
                            source=f"built with nasutil profile build: {len(ops)} ops from {', '.join(spaces)}")
    _save(profile, args.out)  # the operator tables are kept even if the network measurements are cut short
    rows = []
    if args.networks:
        base = MeasureConfig(device=args.device, dtype=args.dtype, counters=False, warmup=2, repeats=5,
                             min_window_ms=2.0)
        candidates = [Candidate(name, a.to_string()) for name in spaces
                      for a in get_space(name).sample_many(args.networks, args.seed + 1)]
        for batch, mode in configs:
            workers = args.workers or max(1, min(8, len(os.sched_getaffinity(0)) // 2))
            with Evaluator(base.with_(batch_size=batch, mode=mode), workers=workers) as evaluator:
                results = evaluator.measure_many(candidates, progress=True, total=len(candidates),
                                                 description=f"networks, batch {batch} {mode}")
                rows += [m.to_dict(with_layers=False) for m in results if m.ok]
    elapsed = time.perf_counter() - started
    source = (f"built with nasutil profile build: {len(ops)} ops from {', '.join(spaces)}, {len(rows)} network "
              f"measurements, {elapsed:.0f} s")
    if rows:
        profile = fit_profile(rows, min_rows=50, source=source, base=profile)
    profile.source = source
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
    import numpy as np

    from nasutil.predictor.active import choose_next
    from nasutil.predictor.analytical import AnalyticalPredictor
    from nasutil.predictor.base import PredictTarget
    from nasutil.predictor.fit import feature_vector, median_latencies, read_measurements
    from nasutil.predictor.operator_level import OperatorPredictor
    from nasutil.predictor.profile import load_profile
    from nasutil.registry import get_space

    space = get_space(args.space)
    profile = load_profile(args.profile)
    rows = read_measurements(args.measurements)
    devices = {r["device_name"] for r in rows}
    if len(devices) > 1:
        raise NasutilError(f"measurements must come from one device, found {sorted(devices)}")
    latencies = median_latencies(rows).get((args.space, args.dtype, args.batch_size, args.mode), {})
    if len(latencies) < 10:
        raise NasutilError(f"need at least 10 measured {args.space} archs at {args.dtype}, batch {args.batch_size}, "
                           f"{args.mode}; found {len(latencies)} (measure a random sample first)")
    target = PredictTarget(devices.pop(), args.dtype, args.batch_size, args.mode)
    analytical = AnalyticalPredictor(profile.kernel_model(args.dtype, args.mode))
    operators = OperatorPredictor(profile.operators) if profile.operators else None

    def features(text: str) -> np.ndarray:
        arch = space.parse(text)
        return feature_vector(arch.encode(), space.operators(arch), target, "encoding+operators", analytical,
                              operators, args.space)

    measured = list(latencies)
    sampled = dict.fromkeys(a.to_string() for a in space.sample_many(args.pool, args.seed))
    pool = [a for a in sampled if a not in latencies]
    if not pool:
        raise NasutilError("every sampled candidate is measured already (raise --pool or change --seed)")
    picks = choose_next(np.array([features(a) for a in measured]), np.array([latencies[a] for a in measured]),
                        np.array([features(a) for a in pool]), args.count, seed=args.seed)
    for index in picks:
        print(pool[index])
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
