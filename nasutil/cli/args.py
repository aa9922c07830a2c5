"""Argument helpers every `nasutil` command shares: number types, and which architectures a command is about."""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterable
from pathlib import Path

from nasutil.errors import NasutilError
from nasutil.files import read_text
from nasutil.space import MAX_NUM_CLASSES, SearchSpace  # one bound of classes, the command line's and the API's


def _number(text: str, kind: type, what: str, ok) -> int | float:
    """`text` as a `kind` that passes `ok`, else argparse's one-line usage error naming `what` was expected."""
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if not ok(value):
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    return _number(text, int, "a positive integer", lambda v: v > 0)


def non_negative_int(text: str) -> int:
    return _number(text, int, "a non-negative integer", lambda v: v >= 0)


def positive_float(text: str) -> float:
    return _number(text, float, "a positive number", lambda v: v > 0 and math.isfinite(v))


#: the most architectures one command samples: a list that size already takes gigabytes and hours to score
MAX_SAMPLE = 10_000_000


def sample_count(text: str) -> int:
    return _number(text, int, f"a positive integer up to {MAX_SAMPLE:,}", lambda v: 0 < v <= MAX_SAMPLE)


def num_classes(text: str) -> int:
    return _number(text, int, f"a number of classes from 1 to {MAX_NUM_CLASSES:,}", lambda v: 0 < v <= MAX_NUM_CLASSES)


#: the longest time limit a worker takes (a week): the clocks that wait on it overflow far above
MAX_TIMEOUT_S = 7 * 24 * 3600.0


def timeout_seconds(text: str) -> float:
    return _number(text, float, f"a positive number of seconds up to {MAX_TIMEOUT_S:.0f}",
                   lambda v: 0 < v <= MAX_TIMEOUT_S)


def cache_location(text: str) -> str:
    """A --cache value: a file or a URL; an empty one would quietly fall back to the default cache."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must name a file or a URL (leave --cache out for the default cache)")
    return text


def refuse_overwriting(out: Path, inputs: Iterable[Path | str], flag: str) -> None:
    """A one-line error where the output `flag` names a file that the command also reads (one of `inputs`,
    files or folders): writing it would destroy what the command was given."""
    if not out.exists():
        return
    target = out.resolve()
    for given in inputs:
        given = Path(given)
        if not given.exists():
            continue
        source = given.resolve()
        if target == source or (source.is_dir() and source in target.parents and target.suffix in (".jsonl", ".csv")):
            raise NasutilError(f"{flag} {str(out)!r} is one of this command's inputs ({str(given)!r}); "
                               f"writing it would overwrite them: choose another file")


def add_arch_choice(parser: argparse.ArgumentParser, what: argparse._MutuallyExclusiveGroup | None = None) -> None:
    """ARCH, --sample N or --archs FILE (and --seed for --sample); `what` is the exclusive group to join."""
    parser.add_argument("arch", nargs="?", help="one architecture string (quote it)")
    group = what or parser.add_mutually_exclusive_group()
    group.add_argument("--sample", type=sample_count, metavar="N", help="N sampled architectures")
    group.add_argument("--archs", type=Path, metavar="FILE", help="file with one architecture string per line")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="seed for --sample (default 0)")


def chosen_archs(args: argparse.Namespace, space: SearchSpace) -> list[str]:
    """The architecture strings of ARCH, --sample N or --archs FILE, every one checked before any work."""
    if args.arch is not None:
        if args.sample or args.archs:
            raise NasutilError("give either ARCH, --sample or --archs")
        space.parse(args.arch)
        return [args.arch]
    if args.sample:
        return [a.to_string() for a in space.sample_many(args.sample, args.seed)]
    if args.archs:
        return read_arch_file(args.archs, space)
    raise NasutilError("give an ARCH, --sample N or --archs FILE")


#: the largest architecture file read (all 423,624 NAS-Bench-101 graphs as JSON lines take about 100 MB)
MAX_ARCH_FILE_BYTES = 256 * 1024 * 1024


def read_arch_file(path: Path, space: SearchSpace) -> list[str]:
    """One architecture string per line (blank lines and # comments skipped), all checked up front."""
    # utf-8-sig: a byte-order mark that an editor put first is no part of the first arch
    lines = [line.strip() for line in read_text(path, "architecture file", MAX_ARCH_FILE_BYTES).splitlines()]
    archs = [line for line in lines if line and not line.startswith("#")]
    if not archs:
        raise NasutilError(f"{str(path)!r} holds no architecture strings")
    for number, text in enumerate(archs, start=1):
        try:
            space.parse(text)
        except NasutilError as exc:
            raise NasutilError(f"{path}: entry {number}: {exc}") from None
    return archs
