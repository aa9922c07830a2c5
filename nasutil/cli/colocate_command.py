"""`nasutil colocate`: run several candidates on one device at once and measure the group."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from nasutil.cli.args import (cache_location, non_negative_int, positive_float, positive_int, read_arch_file,
                              sample_count, timeout_seconds)
from nasutil.cli.output import console, human_count, print_json
from nasutil.devices import DTYPES
from nasutil.errors import NasutilError

if TYPE_CHECKING:  # imported where used: they bring torch, which listing the commands does not need
    from nasutil.colocate import GroupMeasurement
    from nasutil.evaluator import Candidate, MeasureConfig

MAX_SLO_BATCH = 1 << 16
GROUP_TIMEOUT_S = 600.0
COMPILE_S_PER_NETWORK = 30.0  # about twice what an NB201 network took to compile on an H200's host


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("colocate", help="run several candidates on one device at once and measure the group",
                       description="Run the architectures (SPACE ARCH..., --sample N or --archs FILE) together by "
                                   "a strategy and, in the same run, one after another (sequential); report the "
                                   "group's latency, throughput, utilization and the speedup.")
    p.add_argument("space", help="search space (NAME or NAME:OPTION)")
    p.add_argument("archs", nargs="*", metavar="ARCH", help="architecture strings (quote them)")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--sample", type=sample_count, metavar="N", help="N sampled architectures")
    what.add_argument("--archs", dest="archs_file", type=Path, metavar="FILE",
                      help="file with one architecture string per line")
    p.add_argument("--seed", type=non_negative_int, default=0, help="seed for --sample (default 0)")
    p.add_argument("--strategy", default="streams",
                   help="sequential, streams, fused, or one an installed package offers through the entry-point "
                        "group nasutil.colocate_strategies (default streams)")
    p.add_argument("--no-fallback", dest="fallback", action="store_false",
                   help="fail where the strategy does not apply, instead of running sequential")
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (default: cuda if present)")
    p.add_argument("--batch-size", type=positive_int, default=None, help="per network; default 32 on cuda, 4 on cpu")
    p.add_argument("--dtype", choices=DTYPES, default=None, help="default fp16 on cuda, fp32 on cpu")
    p.add_argument("--input-size", type=positive_int, default=None)
    p.add_argument("--slo-ms", type=positive_float, default=None,
                   help="find the largest batch (1, 2, 4, ...) whose group latency stays within this many ms")
    p.add_argument("--pack", type=positive_int, metavar="G", default=None,
                   help="split the candidates into groups of at most G of similar predicted latency and measure "
                        "each group (see --memory-budget-gb)")
    p.add_argument("--memory-budget-gb", type=positive_float, default=None,
                   help="device memory a group may use (estimated from each network's op listing)")
    p.add_argument("--compile", action="store_true",
                   help="compile each network by Inductor first (fewer, fused kernels; seconds per network, child "
                        "processes compiling side by side: NASUTIL_COMPILE_WORKERS, default half the cores), and "
                        "report the speedup over the uncompiled networks one after another too")
    p.add_argument("--freezing", action=argparse.BooleanOptionalAction, default=None,
                   help="with --compile: fold the weights (and BatchNorm) into the compiled networks; by default "
                        "they stay the networks' inputs, which ran as fast on an H200 and lets the child "
                        "processes' work serve this process whole (compiling takes 1.6-1.8x less)")
    p.add_argument("--no-counters", dest="counters", action="store_false", help="skip NVML GPM counters")
    p.add_argument("--timeout", type=timeout_seconds, default=None,
                   help=f"seconds per group (default {GROUP_TIMEOUT_S:g}, and {COMPILE_S_PER_NETWORK:g} more per "
                        "network with --compile)")
    p.add_argument("--in-process", action="store_true", help="measure in this process (no isolation)")
    p.add_argument("--cache", default=None, metavar="PATH|URL", type=cache_location,
                   help="measurement cache for group results (default: the one `nasutil measure` uses)")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    p.add_argument("--remeasure", action="store_true", help="measure again even if cached")
    p.add_argument("--json", action="store_true", help="one JSON object per measured group (with --slo-ms, "
                   "slo_ms and within_slo too)")
    p.set_defaults(handler=cmd_colocate)


def _candidates(args: argparse.Namespace) -> list[Candidate]:
    from nasutil.evaluator import Candidate

    from nasutil.registry import get_space

    space = get_space(args.space)
    given = sum(bool(x) for x in (args.archs, args.sample, args.archs_file))
    if given != 1:
        raise NasutilError("give the architectures as ARCH..., --sample N or --archs FILE (one of them)")
    if args.sample:
        archs = [a.to_string() for a in space.sample_many(args.sample, args.seed)]
    elif args.archs_file:
        archs = read_arch_file(args.archs_file, space)
    else:
        for text in args.archs:
            space.parse(text)
        archs = args.archs
    return [Candidate(args.space, a) for a in archs]


def _config(args: argparse.Namespace, batch_size: int | None = None) -> MeasureConfig:
    from nasutil.evaluator import MeasureConfig

    device = args.device
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    on_gpu = device.startswith("cuda")
    return MeasureConfig(device=device, dtype=args.dtype or ("fp16" if on_gpu else "fp32"),
                         batch_size=batch_size or args.batch_size or (32 if on_gpu else 4),
                         mode="compile" if args.compile else ("cudagraph" if on_gpu else "eager"),
                         input_size=args.input_size,
                         counters=args.counters)


def cmd_colocate(args: argparse.Namespace) -> int:
    from nasutil.colocate import check_strategy, measure_group_in_process, measure_group_isolated

    check_strategy(args.strategy)
    if args.slo_ms is not None and args.batch_size:
        raise NasutilError("--slo-ms chooses the batch sizes itself; drop --batch-size")
    if args.slo_ms is not None and args.pack:
        raise NasutilError("--slo-ms and --pack do not combine: measure the packed groups at one batch size")
    if args.freezing is not None and not args.compile:
        raise NasutilError("--freezing and --no-freezing apply to compiled networks: add --compile")
    args.freezing = bool(args.freezing)
    if args.compile:
        from nasutil.colocate.compile_cache import default_workers

        default_workers()  # a bad NASUTIL_COMPILE_WORKERS is one line here, not a failure in the worker
    candidates = _candidates(args)
    config = _config(args)
    groups = _groups(candidates, config, args)

    if args.cache and args.no_cache:
        raise NasutilError("--cache and --no-cache contradict each other")
    from nasutil.evaluator.cache import MeasurementCache, default_cache_location

    location = None if args.no_cache else (args.cache or default_cache_location())
    cache = MeasurementCache(location) if location is not None and args.in_process else None
    if location is not None and not args.in_process:
        MeasurementCache(location).close()  # a cache that cannot be opened is one line, before any measuring

    def measure_members(members: list[Candidate], cfg: MeasureConfig) -> GroupMeasurement:
        if args.in_process:
            return measure_group_in_process(members, cfg, args.strategy, fallback=args.fallback, cache=cache,
                                            remeasure=args.remeasure, freezing=args.freezing)
        timeout = args.timeout or GROUP_TIMEOUT_S + (COMPILE_S_PER_NETWORK * len(members) if args.compile else 0.0)
        return measure_group_isolated(members, cfg, args.strategy, fallback=args.fallback, timeout_s=timeout,
                                      cache_location=location, remeasure=args.remeasure, freezing=args.freezing)

    results: list[GroupMeasurement] = []

    def record(result: GroupMeasurement) -> GroupMeasurement:
        results.append(result)
        if args.json:  # as it comes: a later error or an interrupt keeps what was measured
            row = result.to_dict()
            if args.slo_ms is not None:  # the table's "largest batch within" answer, row by row
                row |= {"slo_ms": args.slo_ms, "within_slo": result.ok and result.latency_ms <= args.slo_ms}
            print_json(row)
        return result

    try:
        if groups is not None:
            for g in groups:
                record(measure_members([candidates[i] for i in g.members], config))
        elif args.slo_ms is None:
            record(measure_members(candidates, config))
        else:
            batch = 1
            while batch <= MAX_SLO_BATCH:
                cfg = _config(args, batch)
                if args.memory_budget_gb is not None and _over_budget(candidates, cfg, args, first=batch == 1):
                    break
                result = record(measure_members(candidates, cfg))
                if not result.ok or result.latency_ms > args.slo_ms:
                    break
                batch *= 2
    finally:
        if cache is not None:
            cache.close()
        if not args.json and results:
            _print(results, args.slo_ms)
            if groups is not None:
                _print_packing(results)
    return 0 if any(r.ok for r in results) else 1


def _groups(candidates: list[Candidate], config: MeasureConfig, args: argparse.Namespace):
    """With --pack: groups of similar predicted latency (`nasutil.colocate.planning`); else None, after
    checking the whole group against --memory-budget-gb."""
    from nasutil.colocate import over_budget, plan_groups

    if args.pack:
        from nasutil.predictor.registry import DEFAULT_PROFILE, make_predictor

        return plan_groups(candidates, config, args.pack, args.memory_budget_gb,
                           make_predictor("auto", profile=DEFAULT_PROFILE))
    if args.memory_budget_gb is not None and args.slo_ms is None:  # with --slo-ms: checked at each batch size
        excess = over_budget(candidates, config, args.memory_budget_gb)
        if excess:
            raise NasutilError(f"{excess}: split it with --pack G")
    return None


def _over_budget(candidates: list[Candidate], config: MeasureConfig, args: argparse.Namespace, first: bool) -> bool:
    """Whether the group at this batch size passes --memory-budget-gb (the SLO search stops there, saying so);
    at the first batch size that is an error: nothing could be measured."""
    from nasutil.colocate import over_budget

    message = over_budget(candidates, config, args.memory_budget_gb, at_batch=True)
    if message is None:
        return False
    if first:
        raise NasutilError(message)
    note = f"{message}: the search for the largest batch stops there"
    if args.json:  # standard output holds only the JSON rows
        print(note, file=sys.stderr)
    else:
        console().print(note)
    return True


def _print_packing(results: list[GroupMeasurement]) -> None:
    done = [r for r in results if r.ok]
    if not done:
        return
    total = sum(r.latency_ms for r in done)
    images = sum(len(r.archs) * r.batch_size for r in done)
    console().print(f"{len(done)} groups: every candidate once in {total:.3f} ms "
                    f"({human_count(images / (total * 1e-3))} images/s)")


def _print(results: list[GroupMeasurement], slo_ms: float | None) -> None:
    out = console()
    first = results[0]
    table = Table("batch", "strategy", "group ms (cv)", "sequential ms", "speedup", "images/s", "TFLOP/s",
                  "utilization", title=f"{len(first.archs)} {escape(first.space)} networks on "
                                       f"{escape(first.device_name or first.device)}, {first.dtype}")
    for r in results:
        if not r.ok:
            table.add_row(str(r.batch_size), r.requested, f"[red]failed: {escape(r.error or '')}[/]", "", "", "", "",
                          "")
            continue
        table.add_row(str(r.batch_size), r.strategy, f"{r.latency_ms:.3f} ({100 * r.latency_cv:.1f}%)",
                      f"{r.sequential_latency_ms:.3f}", "-" if r.speedup is None else f"{r.speedup:.2f}x",
                      human_count(r.throughput_per_s),
                      f"{r.achieved_tflops:.3g}", "-" if r.utilization is None else f"{100 * r.utilization:.2f}%")
    out.print(table)
    for r in results:
        if r.ok and r.compiled:
            out.print(f"batch {r.batch_size}: compiled in {r.compile_s:.1f} s; {r.speedup_over_plain:.2f}x faster "
                      f"than the uncompiled networks one after another ({r.plain_sequential_latency_ms:.3f} ms)")
    fell_back = next((r for r in results if r.ok and r.fallback_reason), None)
    if fell_back:
        out.print(f"{fell_back.requested} does not apply ({fell_back.fallback_reason}): ran sequential, so there is "
                  "no speedup to report")
    if slo_ms is not None:
        within = [r for r in results if r.ok and r.latency_ms <= slo_ms]
        out.print(f"largest batch within {slo_ms} ms: {within[-1].batch_size} per network "
                  f"({human_count(within[-1].throughput_per_s)} images/s)" if within
                  else f"no batch size keeps the group within {slo_ms} ms")
