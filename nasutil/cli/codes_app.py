"""`nasutil-codes`: learned-code training as a Hydra app (config `conf/codes.yaml`, installed as `nasutil_conf`).

    nasutil-codes                                  # MLP base, Fashion-MNIST, k=2, learned MLP encoder/decoder
    nasutil-codes k=4 encoder=sum decoder=subtract parity=copy epochs=50
    nasutil-codes -m k=2,4 encoder=mlp,sum         # a sweep; any Hydra launcher runs its jobs

Each job trains (or continues) one run folder, named by its settings under `runs`, and prints its
scores; the folder is what `nasutil codes eval RUN_DIR` reads. The name holds every setting but
`epochs` (the readable ones spelled out, and a digest of them all), so a larger `epochs` continues a run;
a job holds a lock on its folder while it trains, so two jobs never train one folder at once. The
settings and their checks are those of `nasutil codes train`; every user error is one line on stderr
and exit code 2, and a job refused before it wrote anything leaves no folder behind.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from nasutil.cli.hydra_app import keep_user_error, run_hydra_app
from nasutil.codes.lock import LOCK, RESULTS, training_lock
from nasutil.codes.settings import data_folder, from_values, run_folder_name, slug
from nasutil.errors import NasutilError

PROG = "nasutil-codes"
CONFIG_PATH = "pkg://nasutil_conf"


def run_name(*, _root_: DictConfig) -> str:
    """The run folder of the job's settings (`nasutil.codes.settings.run_folder_name`), as a config resolver."""
    return run_folder_name(_root_)


def runs_folder(runs: Any) -> str:
    """The `runs` setting as the folder run folders go under: an empty one put them at the file system's root."""
    text = str(runs)
    if runs is None or not text.strip():
        raise NasutilError("runs must name a folder (the default is outputs/codes), got an empty one")
    return text


for _name, _resolver in (("slug", slug), ("codes_run", run_name), ("codes_runs", runs_folder)):
    if not OmegaConf.has_resolver(_name):
        OmegaConf.register_new_resolver(_name, _resolver)


def run_codes(cfg: DictConfig) -> dict[str, Any]:
    """The task of one Hydra job: train the run folder of these settings, score it, print the scores."""
    from hydra.core.hydra_config import HydraConfig

    from nasutil.cli.codes_command import print_scores, train_with_progress
    from nasutil.cli.hydra_app import user_error

    hydra_config = HydraConfig.get()
    folder = Path(hydra_config.runtime.output_dir)
    with training_lock(folder) as fresh:
        try:
            run, job = from_values(OmegaConf.to_container(cfg, resolve=True))
            scores = train_with_progress(run, folder, data_folder(job.data_dir), job.device, show=job.progress)
        except Exception as exc:
            if fresh and user_error(exc) is not None:
                _remove_fresh(folder, Path(str(cfg.runs)), hydra_config.output_subdir)
            raise
    print_scores(scores, False, folder)
    return scores.to_dict()


def _remove_fresh(folder: Path, runs: Path, records: str | None) -> None:
    """Remove what a refused job made in a folder that held no run: its own Hydra records (`records`,
    relative to the folder), an empty job log, the settings it may have written and its lock. Anything
    else found there stays, and so does the folder then; only folders strictly inside `runs` are touched."""
    import shutil

    runs, target = runs.resolve(), folder.resolve()
    if runs not in target.parents or any((target / name).exists() for name in RESULTS if name != "run.json"):
        return  # outside the runs folder, or the job trained something before it failed: all of it stays
    if records:
        mine = (target / records).resolve()
        if target in mine.parents and mine.is_dir():
            shutil.rmtree(mine)
            with contextlib.suppress(OSError):
                mine.parent.rmdir()  # .hydra, where no other job's records are left
    log = target / f"{Path(__file__).stem}.log"
    if log.is_file() and log.stat().st_size == 0:
        log.unlink()
    (target / "run.json").unlink(missing_ok=True)
    (target / LOCK).unlink(missing_ok=True)
    parent = target
    while parent != runs and runs in parent.parents and parent.is_dir() and not any(parent.iterdir()):
        parent.rmdir()
        parent = parent.parent


@hydra.main(version_base="1.3", config_path=CONFIG_PATH, config_name="codes")
def _hydra_main(cfg: DictConfig) -> dict[str, Any] | None:
    return keep_user_error(run_codes, cfg)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    return run_hydra_app(PROG, _hydra_main, args,
                         "interrupted (finished epochs of the base and the code are kept in the run folder; "
                         "re-run to continue)")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
