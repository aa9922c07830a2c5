"""The `nasutil` command line. Every user error ends with one line on stderr and exit code 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from nasutil.errors import NasutilError, path_error, resource_error, warnings_for_users

EXIT_USAGE = 2


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line (no usage dump) with exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from nasutil import __version__
    from nasutil.cli import codes_command, colocate_command, measure_command, predict_command, space_commands

    parser = OneLineParser(prog="nasutil", description="Utilization-aware neural architecture search.")
    parser.add_argument("--version", action="version", version=f"nasutil {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    sub.required = True
    space_commands.register(sub)
    measure_command.register(sub)
    colocate_command.register(sub)
    predict_command.register(sub)
    codes_command.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with warnings_for_users("nasutil"):
            return int(args.handler(args) or 0)
    except NasutilError as exc:
        print(f"nasutil: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("nasutil: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:
        message = path_error(exc)
        if message is None:
            raise
        print(f"nasutil: error: {message}", file=sys.stderr)
        return EXIT_USAGE
    except (MemoryError, RecursionError, RuntimeError) as exc:
        message = resource_error(exc)
        if message is None:
            raise
        print(f"nasutil: error: {message}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
