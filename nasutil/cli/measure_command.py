"""`nasutil measure`: measure architectures or known models on real hardware."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from nasutil.cli.args import (add_arch_choice, cache_location, chosen_archs, num_classes, positive_float,
                              positive_int, refuse_overwriting, timeout_seconds)
from nasutil.cli.output import console, human_count, print_json
from nasutil.devices import DTYPES
from nasutil.errors import NasutilError
from nasutil.evaluator.cache import URL_VARIABLE, MeasurementCache, default_cache_location, default_cache_path
from nasutil.evaluator.config import MODES, MeasureConfig, available_device
from nasutil.evaluator.measurement import Measurement
from nasutil.evaluator.mps import require_server, shared_device_context

#: exit status where every candidate failed to measure (a user error is 2, as everywhere)
EXIT_ALL_FAILED = 1

if TYPE_CHECKING:  # imported where used: they bring torch, which listing the commands does not need
    from nasutil.evaluator import Candidate, Evaluator


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("measure", help="measure latency, throughput, utilization and counters on a device",
                       description="Measure one architecture (SPACE ARCH), many (SPACE --sample N or --archs FILE) "
                                   "or a known model (--model torchvision:resnet50 / timm:NAME).")
    p.add_argument("space", nargs="?", help="search space (NAME or NAME:OPTION)")
    what = p.add_mutually_exclusive_group()
    add_arch_choice(p, what)
    what.add_argument("--model", action="append", metavar="ZOO:NAME",
                      help="torchvision:NAME or timm:NAME (repeatable)")
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (default: cuda if present)")
    p.add_argument("--batch-size", type=positive_int, default=None, help="default 256 on cuda, 8 on cpu")
    p.add_argument("--dtype", choices=DTYPES, default=None, help="default fp16 on cuda, fp32 on cpu")
    p.add_argument("--mode", choices=MODES, default=None, help="default cudagraph on cuda, eager on cpu")
    p.add_argument("--no-channels-last", dest="channels_last", action="store_false",
                   help="keep NCHW (default: channels_last)")
    p.add_argument("--input-size", type=positive_int, default=None)
    p.add_argument("--num-classes", type=num_classes, default=None, help="default 10 (1000 for --model)")
    p.add_argument("--repeats", type=positive_int, default=7,
                   help="timed windows, at least 2 (default 7): the median is reported, their spread as latency_cv "
                        "and latency_iqr_ms")
    p.add_argument("--per-layer", action="store_true", help="add the per-layer kernel-time breakdown")
    p.add_argument("--fast", action="store_true",
                   help="settings for measuring a whole space: 4 windows of >= 0.5 ms, no counters, graphs captured "
                        "without eager warm-up and outside the worker's turn on the device, weights made on the "
                        "device (BENCHMARKS.md: within 1.18%% of the defaults on 200 fresh cells on an H100 with 8 "
                        "workers, 0.22%% at the median; all 15,625 NAS-Bench-201 cells in 4.0 min there; with 16 "
                        "workers and a dipping clock earlier settings read single cells up to 18%% off); where one "
                        "cell matters, measure without it")
    p.add_argument("--mps", action="store_true",
                   help="the workers share one device context through CUDA MPS (its daemon started for this run "
                        "and asked to quit after), so with --fast a worker's turn on the device holds its timing "
                        "alone: faster, but on an H100 it read cells 5%% above a plain loop without MPS, which "
                        "workers without MPS read below (BENCHMARKS.md); its readings are kept out of the cache")
    p.add_argument("--no-counters", dest="counters", action="store_false", help="skip NVML GPM counters")
    p.add_argument("--sweep", action="store_true", help="sweep batch sizes 1, 2, 4, ... until saturation")
    p.add_argument("--slo-ms", type=positive_float, default=None, help="with --sweep: largest batch within SLO")
    p.add_argument("--timeout", type=timeout_seconds, default=300.0, help="seconds per candidate (default 300)")
    p.add_argument("--cache", default=None, metavar="PATH|URL", type=cache_location,
                   help=f"an SQLite file or an SQLAlchemy URL (postgresql://...) that workers on other machines share "
                        f"(default ${URL_VARIABLE}, else {default_cache_path()})")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    p.add_argument("--remeasure", action="store_true", help="measure again even if cached")
    p.add_argument("--in-process", action="store_true", help="measure in this process (no isolation)")
    p.add_argument("--workers", type=positive_int, default=1,
                   help="worker processes that prepare candidates in parallel and take turns on the device")
    p.add_argument("--devices", default=None, metavar="DEV,DEV,...",
                   help="spread the workers over these devices, e.g. cuda:0,cuda:1 (at least one worker each)")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.add_argument("--out", type=Path, default=None, help="append JSON lines to FILE as results arrive")
    p.set_defaults(handler=cmd_measure)


def _config(args: argparse.Namespace) -> MeasureConfig:
    device = args.device
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    on_gpu = device.startswith("cuda")
    from nasutil.zoo import DEFAULT_NUM_CLASSES

    num_classes = args.num_classes or (DEFAULT_NUM_CLASSES if args.model else 10)
    config = MeasureConfig(
        device=device, dtype=args.dtype or ("fp16" if on_gpu else "fp32"),
        batch_size=args.batch_size or (256 if on_gpu else 8), mode=args.mode or ("cudagraph" if on_gpu else "eager"),
        channels_last=args.channels_last, input_size=args.input_size, num_classes=num_classes,
        repeats=args.repeats, counters=args.counters, per_layer=args.per_layer,
        device_turn="timing" if args.mps else "whole")
    if args.mps and not on_gpu:
        raise NasutilError("--mps shares a CUDA device among the workers; it needs --device cuda")
    return config.fast() if args.fast else config


def _devices(text: str | None) -> list[str] | None:
    """`--devices cuda:0,cuda:1`, each checked to exist here before any worker starts."""
    if text is None:
        return None
    devices = [d.strip() for d in text.split(",") if d.strip()]
    if not devices:
        raise NasutilError("--devices needs at least one device, e.g. --devices cuda:0,cuda:1")
    return [available_device(d, "--devices") for d in devices]


def _candidates(args: argparse.Namespace) -> tuple[list[Candidate] | Iterator[Candidate], int | None]:
    from nasutil.evaluator import Candidate

    if args.model:
        if args.space or args.arch:
            raise NasutilError("give either --model or SPACE [ARCH], not both")
        return [Candidate.model(spec) for spec in args.model], len(args.model)
    if not args.space:
        raise NasutilError("name a search space (or --model torchvision:NAME)")
    from nasutil.registry import get_space

    space = get_space(args.space)  # fail fast on an unknown space
    space.check_input_size(args.input_size)  # and on an input size it does not take
    archs = chosen_archs(args, space)
    return [Candidate(args.space, text) for text in archs], len(archs)


def cmd_measure(args: argparse.Namespace) -> int:
    from nasutil.evaluator import Evaluator

    if args.slo_ms is not None and not args.sweep:
        raise NasutilError("--slo-ms needs --sweep")
    if args.sweep and args.batch_size:
        raise NasutilError("--sweep chooses the batch sizes itself; drop --batch-size")
    config = _config(args)
    candidates, total = _candidates(args)
    if args.out is not None:
        refuse_overwriting(args.out, [args.archs] if getattr(args, "archs", None) else [], "--out")
    if args.cache and args.no_cache:
        raise NasutilError("--cache and --no-cache contradict each other")
    if args.mps and args.in_process:
        raise NasutilError("--mps shares the device among worker processes; drop --in-process")
    if args.mps and args.cache:
        raise NasutilError("--mps keeps its readings out of the cache (on an H100 they read 5% above a plain loop "
                           "without MPS); drop --cache")
    cache = None if args.no_cache or args.mps else MeasurementCache(args.cache or default_cache_location())
    out_file = None
    if args.out is not None:
        try:
            out_file = args.out.open("a")
        except OSError as exc:
            raise NasutilError(f"cannot write {str(args.out)!r}: {exc}") from None
    failures = measured = 0
    try:
        devices = _devices(args.devices)
        workers = max(args.workers, len(devices or ()))
        with shared_device_context() if args.mps else contextlib.nullcontext(), \
                Evaluator(config, cache=cache, isolate=not args.in_process, timeout_s=args.timeout,
                          remeasure=args.remeasure, workers=workers, devices=devices) as evaluator:
            if args.mps:  # the workers start now, and must have reached the MPS server
                evaluator.start()
                require_server()
            if args.sweep:
                return _sweep(evaluator, list(candidates), args, out_file)
            results = evaluator.measure_many(candidates, progress=(total or 0) > 1 and sys.stderr.isatty(),
                                             total=total)
            rows: list[Measurement] = []
            for m in results:
                failures, measured = failures + (not m.ok), measured + 1
                if out_file:
                    out_file.write(m.to_json() + "\n")
                    out_file.flush()
                if args.json:
                    print_json(m.to_dict())
                else:
                    rows.append(m)
            if not args.json:
                _print_table(rows, config)
    finally:
        if out_file:
            out_file.close()
        if cache:
            cache.close()
    if failures:  # each failure's cause is in its row; the count and the exit status say it to a script
        print(f"nasutil: {failures} of {measured} measurements failed (the error is in each one's row)",
              file=sys.stderr)
    return EXIT_ALL_FAILED if failures and failures == measured else 0


def _sweep(evaluator: Evaluator, candidates: list[Candidate], args: argparse.Namespace, out_file) -> int:
    from nasutil.evaluator.sweep import sweep_batch

    def keep(point: Measurement) -> None:  # each batch's result as it arrives: an interrupted sweep keeps them
        out_file.write(point.to_json() + "\n")
        out_file.flush()

    swept = 0
    for candidate in candidates:
        result = sweep_batch(evaluator, candidate, slo_ms=args.slo_ms, on_point=keep if out_file else None)
        swept += result.saturation_batch is not None
        record = {"space": candidate.space, "arch": candidate.arch, **result.to_dict()}
        if args.json:
            print_json(record)
        else:
            _print_table(result.points, evaluator.config)
            console().print(f"throughput saturates at batch {result.saturation_batch} "
                            f"({human_count(result.best_throughput_per_s or 0)} images/s)"
                            + (f"; largest batch within {args.slo_ms} ms: "
                               f"{result.slo_batch if result.slo_batch is not None else 'none of the swept batch sizes'}"
                               if args.slo_ms else ""))
    return 0 if swept else 1


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _print_table(rows: list[Measurement], config: MeasureConfig) -> None:
    out = console()
    device = next((m.device_name for m in rows if m.device_name), config.device)
    with_counters = any(v is not None for m in rows if m.ok for v in (m.counters or {}).values())
    columns = ["arch", "batch", "latency ms (cv)", "images/s", "TFLOP/s", "utilization"]
    if with_counters:
        columns += ["SM act.", "tensor act.", "DRAM BW", "SM MHz"]
    table = Table(*columns, title=f"{escape(device)}, {config.dtype}, {config.mode}")
    for m in rows:
        label = escape(m.arch if len(m.arch) < 60 else m.arch[:57] + "...")
        if not m.ok:
            table.add_row(label, str(m.batch_size), f"[red]failed: {escape(m.error or '')}[/]",
                          *[""] * (len(columns) - 3))
            continue
        cells = [label, str(m.batch_size),
                 f"{m.latency_ms:.3f} ({100 * m.latency_cv:.1f}%)" + (" noisy" if m.noisy else ""),
                 human_count(m.throughput_per_s), f"{m.achieved_tflops:.3g}", _pct(m.utilization)]
        if with_counters:
            c = m.counters or {}
            cells += [_counter(c, "sm_activity"), _counter(c, "tensor_activity"), _counter(c, "dram_bw_util"),
                      "-" if m.sm_clock_mhz is None else f"{m.sm_clock_mhz:.0f}"]
        table.add_row(*cells)
    out.print(table)
    measured = [m for m in rows if m.ok]
    if measured:
        out.print(f"utilization = achieved FLOP/s / {_peaks(measured)}; FLOPs per image x batch / median latency")
    for m in rows:
        if m.ok and m.layers:
            _print_layers(m)


def _peaks(rows: list[Measurement]) -> str:
    """The peak the rows' utilization divides by: one figure, or the range where the rows took their own
    (a GEMM peak is measured in each worker process, and on a busy CPU it differs from one to the next)."""
    source = rows[0].peak_source.replace("_", " ")
    peaks = [m.peak_tflops for m in rows]
    if _span(peaks) == f"{peaks[0]:.3g}":
        gemm = _span([m.measured_peak_tflops for m in rows])
        return f"{source} peak {peaks[0]:.3g} TFLOP/s (measured GEMM peak {gemm})"
    return (f"each row's own {source} peak, {_span(peaks)} TFLOP/s (measured in each worker; peak_tflops in "
            f"--json, --out)")


def _span(values: list[float]) -> str:
    low, high = f"{min(values):.3g}", f"{max(values):.3g}"
    return low if low == high else f"{low} to {high}"


def _counter(counters: dict, key: str) -> str:
    value = counters.get(key)
    return "-" if value is None else f"{value:.0f}%"


def _print_layers(m: Measurement, top: int = 10) -> None:
    layers = [l for l in m.layers or [] if l.get("time_ms")]
    total = sum(l["time_ms"] for l in layers) or 1.0
    table = Table("layer", "kind", "output", "time ms", "share", "TFLOP/s", "utilization", "wasted ms",
                  title=f"layers wasting the most GPU time: {escape(m.arch[:60])}")
    for l in sorted(layers, key=lambda l: -(l["wasted_ms"] or 0))[:top]:
        table.add_row(escape(l["name"]), l["kind"], "x".join(map(str, l["output_shape"])), f"{l['time_ms']:.4f}",
                      f"{100 * l['time_ms'] / total:.1f}%", f"{l['achieved_tflops'] or 0:.2f}", _pct(l["utilization"]),
                      f"{l['wasted_ms']:.4f}")
    console().print(table)
    kernel = m.timing.get("kernel_time_ms")
    if kernel and m.latency_ms:
        console().print(f"kernel time per batch (eager, profiled) {kernel:.3f} ms; the measured {m.mode} latency is "
                        f"{m.latency_ms:.3f} ms")
