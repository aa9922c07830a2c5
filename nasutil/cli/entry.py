"""The installed commands' entry points.

Loading the libraries behind a command takes a second or more; a Ctrl-C in that time ends, like a
Ctrl-C at any later moment, in one line and exit code 130 (see `nasutil.cli.interrupts`).
"""

from __future__ import annotations

import sys

from nasutil.cli import interrupts

EXIT_INTERRUPTED = 130


def nasutil() -> int:
    with interrupts.handled():
        try:
            from nasutil.cli import main

            interrupts.stop_if_requested()
            return main()
        except KeyboardInterrupt:
            print("nasutil: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED


def nasutil_search() -> int:
    with interrupts.handled():
        try:
            from nasutil.cli.search_command import main

            interrupts.stop_if_requested()
            return main()
        except KeyboardInterrupt:
            print("nasutil-search: interrupted (finished trials are kept in the study; re-run to resume)",
                  file=sys.stderr)
            return EXIT_INTERRUPTED
