"""`nasutil spaces`, `nasutil sample` and `nasutil describe`: explore search spaces."""

from __future__ import annotations

import argparse
from collections import defaultdict

from rich.markup import escape
from rich.table import Table

from nasutil.cli.args import non_negative_int, num_classes, positive_int, sample_count
from nasutil.cli.output import console, human_count, print_json
from nasutil.errors import NasutilError
from nasutil.registry import entries, get_space


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("spaces", help="list the registered search spaces")
    p.add_argument("--json", action="store_true", help="one JSON object per space")
    p.set_defaults(handler=cmd_spaces)

    p = sub.add_parser("sample", help="print N architectures of a space, one per line")
    p.add_argument("space", help="space name, or NAME:OPTION (e.g. nni:ProxylessNAS)")
    p.add_argument("-n", "--num", type=sample_count, default=10, help="how many (default 10)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="seed of the numpy Generator (default 0)")
    p.add_argument("--unique", action="store_true", help="skip architectures already printed")
    p.set_defaults(handler=cmd_sample)

    p = sub.add_parser("describe", help="parameters, FLOPs and a per-layer table of one architecture")
    p.add_argument("space")
    p.add_argument("arch", help="the architecture string (quote it)")
    p.add_argument("--input-size", type=positive_int, default=None, help="input resolution (default: the space's)")
    p.add_argument("--num-classes", type=num_classes, default=10)
    p.add_argument("--top", type=positive_int, default=15, help="layers to list, most FLOPs first (default 15)")
    p.add_argument("--json", action="store_true", help="everything, all layers included, as one JSON object")
    p.set_defaults(handler=cmd_describe)


def cmd_spaces(args: argparse.Namespace) -> int:
    rows = []
    for name, entry in entries().items():
        try:
            cls = entry.load()
            rows.append({"name": name, "description": cls.description, "origin": entry.origin,
                         "default_input_size": cls.default_input_size})
        except NasutilError as exc:
            rows.append({"name": name, "description": f"unavailable: {exc}", "origin": entry.origin,
                         "default_input_size": None})
    if args.json:
        for row in rows:
            print_json(row)
        return 0
    table = Table("space", "description", "input", "provided by", title="nasutil search spaces")
    for row in rows:
        table.add_row(row["name"], row["description"], str(row["default_input_size"] or "-"), row["origin"])
    console().print(table)
    return 0


def cmd_sample(args: argparse.Namespace) -> int:
    import numpy as np

    space = get_space(args.space)
    rng = np.random.default_rng(args.seed)
    seen: set[str] = set()
    printed, attempts = 0, 0
    limit = space.size() if args.unique else None
    if limit is not None and args.num > limit:  # before drawing: nb101's 423,624 once took hours to run out
        raise NasutilError(f"space {args.space!r} has only {limit:,} distinct architectures; --unique cannot print "
                           f"{args.num:,}")
    while printed < args.num:
        if args.unique and limit is not None and len(seen) >= limit:
            raise NasutilError(f"space {args.space!r} has only {limit} distinct architectures")
        arch = space.sample(rng)
        attempts += 1
        if args.unique:
            key = arch.canonical_hash()
            if key in seen:
                if attempts > 100 * args.num:
                    raise NasutilError(f"could not draw {args.num} distinct architectures")
                continue
            seen.add(key)
        print(arch.to_string(), flush=False)
        printed += 1
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    space = get_space(args.space)
    arch = space.parse(args.arch)
    input_size = space.check_input_size(args.input_size)
    model = space.build(arch, num_classes=args.num_classes, input_size=input_size)
    try:
        from nasutil.counting import count_model

        counts = count_model(model, input_size, in_channels=space.in_channels)
    except RuntimeError as exc:
        raise NasutilError(f"forward pass at input size {input_size} failed: {str(exc).splitlines()[0]}") from None
    if args.json:
        print_json({"space": space.name, "arch": arch.to_string(), "canonical_hash": arch.canonical_hash(),
                    "num_classes": args.num_classes, **counts.to_dict(with_layers=True)})
        return 0
    out = console()
    out.print(f"[bold]{space.name}[/] {escape(arch.to_string())}")
    out.print(f"input {space.in_channels}x{input_size}x{input_size}, {args.num_classes} classes: "
              f"params {human_count(counts.params)}, FLOPs per image {human_count(counts.flops_per_image)} "
              f"(multiply-add = 2), activation+weight traffic {human_count(counts.bytes_per_image(4))}B fp32")
    by_kind: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for layer in counts.layers:
        agg = by_kind[layer.kind]
        agg[0] += 1
        agg[1] += layer.flops
        agg[2] += layer.params
    total = max(counts.flops_per_image, 1)
    kinds = Table("kind", "layers", "FLOPs", "share", "params", title="by operator kind")
    for kind, (n, flops, params) in sorted(by_kind.items(), key=lambda kv: -kv[1][1]):
        kinds.add_row(kind, str(n), human_count(flops), f"{100 * flops / total:.1f}%", human_count(params))
    out.print(kinds)
    top = sorted(counts.layers, key=lambda l: -l.flops)[: args.top]
    layers = Table("layer", "kind", "output", "FLOPs", "share", "params", "FLOP/byte (fp32)",
                   title=f"top {len(top)} of {len(counts.layers)} layers by FLOPs")
    for layer in top:
        layers.add_row(escape(layer.name), layer.kind, "x".join(map(str, layer.output_shape)), human_count(layer.flops),
                       f"{100 * layer.flops / total:.1f}%", human_count(layer.params),
                       f"{layer.arithmetic_intensity(4):.1f}")
    out.print(layers)
    return 0
