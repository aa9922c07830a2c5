"""What the Hydra front doors (`nasutil-search`, `nasutil-codes`) share: every error a user can fix ends
in one line on stderr and exit code 2, in a single run or a sweep, and Ctrl-C in one line and 130.

Hydra prints its own report of an exception raised in a job and, in a sweep, skips the jobs after it;
so a job keeps its user error (`keep_user_error`) and `run_hydra_app` reports it once Hydra returns.
A launcher may run jobs in other processes (joblib), so the errors go to a file that `run_hydra_app`
names in the environment, which those processes inherit.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from nasutil.cli import interrupts
from nasutil.errors import NasutilError, path_error, resource_error, warnings_for_users
from nasutil.files import nesting_depth
from nasutil.search.config import one_line
from nasutil.search.sweep_summary import ERRORS_FILE, failed_jobs

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
#: the deepest nesting of brackets a command-line setting may hold (a cell space's settings: 32 too)
MAX_SETTING_DEPTH = 32
T = TypeVar("T")


def keep_user_error(task: Callable[[Any], T], cfg: Any) -> T | None:
    """`task(cfg)`; a user error goes to the errors file of `run_hydra_app` (and None is returned), a bug
    or an error with no file to go to is raised."""
    try:
        return task(cfg)
    except Exception as exc:
        message, shared = user_error(exc), os.environ.get(ERRORS_FILE)
        if message is None or not shared:
            raise
        with open(shared, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"job": job_overrides(), "folder": job_folder(),
                                 "error": " ".join(message.split())}) + "\n")
        drop_folder_of_nothing()
        return None


def job_overrides() -> str:
    """The running job's own settings as given (Hydra's task overrides), for telling failed jobs apart."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return " ".join(str(o) for o in HydraConfig.get().overrides.task if not str(o).startswith("hydra."))
    except Exception:  # noqa: BLE001 - no Hydra job running (a direct call): nothing to name
        return ""


def job_folder() -> str:
    """The running job's output folder: a job that wrote its summary before its error (a storage that stopped
    mid-run) is one row of the sweep summary, not two."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return str(HydraConfig.get().runtime.output_dir)
    except Exception:  # noqa: BLE001 - no Hydra job running (a direct call): nothing to name
        return ""


HYDRA_FILES = frozenset({"config.yaml", "hydra.yaml", "overrides.yaml"})


def drop_folder_of_nothing() -> None:
    """Remove what Hydra wrote before the job was refused (its config files and an empty log) where the job's
    output folder holds nothing else, and the folder itself with the empty folders above it where they lie
    inside the launch folder (Hydra made them: `outputs/...`): a refused run leaves nothing behind. A folder
    with anything else in it (a study being resumed) is left as it is."""
    try:
        from hydra.core.hydra_config import HydraConfig

        hydra = HydraConfig.get()
        folder, top = Path(hydra.runtime.output_dir).resolve(), Path(hydra.runtime.cwd).resolve()
        subdir, log = hydra.output_subdir, f"{hydra.job.name}.log"
        written = []
        for entry in folder.iterdir():
            if subdir and entry.name == subdir and entry.is_dir() and not entry.is_symlink():
                if all(f.is_file() and f.name in HYDRA_FILES for f in entry.iterdir()):
                    written.append(entry)
                    continue
            elif entry.name == log and entry.is_file() and entry.stat().st_size == 0:
                written.append(entry)
                continue
            return
        for entry in written:
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        while top in folder.parents and not any(folder.iterdir()):
            folder.rmdir()
            folder = folder.parent
    except (ValueError, OSError):  # no Hydra job here, or a folder that cannot be read: leave it
        return


def user_error(exc: BaseException) -> str | None:
    """The one-line message for an error the user can fix, or None for a bug."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    seen: set[int] = set()
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(current)
        current = current.__cause__ or current.__context__
    for e in chain:
        if isinstance(e, NasutilError):
            return str(e)
    for e in chain:
        if path_error(e) is not None:
            return path_error(e)
    for e in chain:
        if resource_error(e) is not None:
            return resource_error(e)
    from optuna.exceptions import StorageInternalError

    if any(isinstance(e, StorageInternalError) for e in chain):  # a read-only database, a full disk
        from nasutil.search.storage import storage_failure

        file, why = storage_failure(exc)
        where = "" if file is None else f" {file!r}"
        return f"cannot write the study storage{where}: {why} (the trials stored before stay)"
    for e in chain:
        if isinstance(e, (OmegaConfBaseException, HydraException)) and "Error executing job" not in str(e):
            return one_line(e)
    # Hydra reports some malformed configs (a bad defaults list, say) as plain ValueErrors of its own.
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if isinstance(exc, (ValueError, TypeError)) and tb is not None and \
            any(f"{os.sep}{pkg}{os.sep}" in tb.tb_frame.f_code.co_filename for pkg in ("hydra", "omegaconf")):
        return f"bad config: {one_line(exc)}"
    # A launcher plugin that cannot launch here (submitit_slurm on a machine without SLURM, say)
    if isinstance(exc, (RuntimeError, ValueError)) and tb is not None and \
            any(f"{os.sep}{pkg}{os.sep}" in tb.tb_frame.f_code.co_filename for pkg in ("hydra_plugins", "submitit")):
        return f"the launcher cannot run here: {one_line(exc)}"
    return None


class _FlagError(Exception):
    pass


def flag_error(args: list[str]) -> str | None:
    """What is wrong with Hydra's own flags among `args` (an unknown flag, a bad choice), in one line; None
    where they parse. Hydra's parser would print its whole usage first."""
    try:
        from hydra._internal.utils import get_args_parser
    except ImportError:  # a Hydra that moved its parser: its own report stands
        return None
    parser = get_args_parser()

    def error(message: str) -> None:
        raise _FlagError(message)

    parser.error = error  # type: ignore[method-assign]
    try:
        parser.parse_args(args)
    except _FlagError as exc:
        message = str(exc)
        unknown = message.partition("unrecognized arguments:")[2].split()
        if any(a.startswith("--") for a in unknown):  # a setting written as a flag, most likely
            message += "; settings are given as key=value, e.g. n_trials=20"
        return f"{message} (see --help)"
    except SystemExit:  # --help, --version: the real run prints them
        return None
    return None


def too_deep(args: list[str]) -> str | None:
    """The setting among `args` whose value nests brackets deeper than MAX_SETTING_DEPTH, in one line; None
    where none does. Hydra's parser of settings recurses a few times a level: 300 levels ran past Python's
    limit into a traceback thousands of lines long."""
    for arg in args:
        depth = nesting_depth(arg, "'\"")
        if depth > MAX_SETTING_DEPTH:
            key = arg.partition("=")[0][:80]
            return (f"the setting {key!r} nests brackets {depth} levels deep, deeper than the {MAX_SETTING_DEPTH} "
                    f"a setting may")
    return None


def run_hydra_app(prog: str, hydra_main: Callable[[], Any], args: list[str], interrupted: str = "interrupted") -> int:
    """Run the `@hydra.main` function `hydra_main` on the command-line `args`; the exit code."""
    if any(a.startswith("--experimental-rerun") for a in args):
        print(f"{prog}: error: --experimental-rerun loads a pickle and is not supported", file=sys.stderr)
        return EXIT_USAGE
    message = flag_error(args) or too_deep(args)
    if message is not None:
        print(f"{prog}: error: {message}", file=sys.stderr)
        return EXIT_USAGE
    saved_argv, saved_env, saved_file = sys.argv, os.environ.get("HYDRA_FULL_ERROR"), os.environ.get(ERRORS_FILE)
    sys.argv = [prog, *args]
    os.environ["HYDRA_FULL_ERROR"] = "1"  # let errors reach us, to be reported in one line
    handle, shared = tempfile.mkstemp(prefix="nasutil-job-errors-", suffix=".txt")
    os.close(handle)
    os.environ[ERRORS_FILE] = shared
    try:
        with warnings_for_users(prog), interrupts.handled():
            hydra_main()
        errors = [job["error"] for job in failed_jobs(shared)]
        if errors:
            more = f" (and {len(errors) - 1} more failed jobs)" if len(errors) > 1 else ""
            print(f"{prog}: error: {errors[0]}{more}", file=sys.stderr)
            return EXIT_USAGE
        return 0
    except KeyboardInterrupt:
        print(f"{prog}: {interrupted}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        message = user_error(exc)
        if message is None:
            raise
        print(f"{prog}: error: {message}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        sys.argv = saved_argv
        Path(shared).unlink(missing_ok=True)
        for name, value in (("HYDRA_FULL_ERROR", saved_env), (ERRORS_FILE, saved_file)):
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
