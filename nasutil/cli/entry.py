"""The installed commands' entry points.

Loading the libraries behind a command takes a second or more; a Ctrl-C in that time ends, like a
Ctrl-C at any later moment, in one line and exit code 130 (see `nasutil.cli.interrupts`).
"""

from __future__ import annotations

import importlib
import sys

from nasutil.cli import interrupts

EXIT_INTERRUPTED = 130


def _run(module: str, interrupted: str) -> int:
    """`module.main()`, with a Ctrl-C during its import or its run ending in the line `interrupted`."""
    _report_native_crashes()
    with interrupts.handled():
        try:
            main = importlib.import_module(module).main
            interrupts.stop_if_requested()
            code = main()
        except KeyboardInterrupt:
            print(interrupted, file=sys.stderr)
            code = EXIT_INTERRUPTED
    if code == EXIT_INTERRUPTED:
        _let_the_stop_finish()
    return code


def _report_native_crashes() -> None:
    """A crash inside a native library (a segmentation fault in a driver, a kernel library or a
    compiled extension) ends the process with no Python traceback, only the shell's "Segmentation
    fault"; with faulthandler on, every thread's Python stack is written to stderr first, which is what
    a bug report needs to say where it happened. Where the user already turned it on
    (`PYTHONFAULTHANDLER`, `-X faulthandler`) their choice of file stands."""
    import faulthandler

    if not faulthandler.is_enabled():
        faulthandler.enable(file=sys.stderr, all_threads=True)


def _let_the_stop_finish() -> None:
    """A stopped command has kept its results and said so; what is left is the interpreter's teardown,
    seconds with torch loaded. A Ctrl-C or SIGTERM repeated then (`timeout` and batch systems signal again,
    impatient users press again) ended the process by the signal (a shell reads 143 after SIGTERM) instead
    of exit 130, as if the stop had not happened: the process ignores them while it exits."""
    import signal

    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, signal.SIG_IGN)


def nasutil() -> int:
    return _run("nasutil.cli", "nasutil: interrupted")


def _with_working_folder() -> None:
    """A class of the user's own (`prune._target_=my_module.MyPolicy`) is found in the folder the command
    runs from, as with `python -m nasutil.search`; after the installed packages, so that it shadows none."""
    import os

    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())


def nasutil_search() -> int:
    _with_working_folder()
    return _run("nasutil.cli.search_command",
                "nasutil-search: interrupted (finished trials are kept in the study; re-run to resume)")


def nasutil_codes() -> int:
    _with_working_folder()
    return _run("nasutil.cli.codes_app",
                "nasutil-codes: interrupted (finished epochs of the base and the code are kept in the run "
                "folder; re-run to continue)")
