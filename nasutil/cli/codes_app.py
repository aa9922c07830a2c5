"""`nasutil-codes`: learned-code training as a Hydra app (config `conf/codes.yaml`, installed as `nasutil_conf`).

    nasutil-codes                                  # MLP base, Fashion-MNIST, k=2, learned MLP encoder/decoder
    nasutil-codes k=4 encoder=sum decoder=subtract parity=copy epochs=50
    nasutil-codes -m k=2,4 encoder=mlp,sum         # a sweep; any Hydra launcher runs its jobs

Each job trains (or continues) one run folder, named by its settings under `runs`, and prints its
scores; the folder is what `nasutil codes eval RUN_DIR` reads. The settings and their checks are those
of `nasutil codes train`; every user error is one line on stderr and exit code 2.
"""

from __future__ import annotations

import re
import sys
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from nasutil.cli.hydra_app import keep_user_error, run_hydra_app

PROG = "nasutil-codes"
CONFIG_PATH = "pkg://nasutil_conf"
SETTINGS = ("base", "dataset", "data_dir", "k", "r", "encoder", "decoder", "parity", "loss", "epochs",
            "base_epochs", "batch_size", "seed", "train_images", "test_images", "device", "progress", "runs")


def slug(text: Any) -> str:
    """A folder name for a setting: `nb201:|nor_conv_3x3~0|+...` becomes `nb201-nor_conv_3x3-0-...` plus,
    where characters were replaced, a short digest that keeps two settings apart."""
    text = str(text)
    clean = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "x"
    if clean == text:
        return text
    return f"{clean[:60]}-{zlib.crc32(text.encode()):08x}"


if not OmegaConf.has_resolver("slug"):
    OmegaConf.register_new_resolver("slug", slug)


def run_codes(cfg: DictConfig) -> dict[str, Any]:
    """The task of one Hydra job: train the run folder of these settings, score it, print the scores."""
    from hydra.core.hydra_config import HydraConfig

    from nasutil.cli.codes_command import print_scores, train_with_progress
    from nasutil.codes import CodeSpec, RunSettings
    from nasutil.errors import NasutilError

    folder = Path(HydraConfig.get().runtime.output_dir)
    try:
        unknown = sorted(set(cfg) - set(SETTINGS))
        if unknown:
            raise NasutilError(f"unknown setting(s) {', '.join(unknown)} (settings: {', '.join(SETTINGS)})")
        spec = CodeSpec(k=cfg.k, r=cfg.r, encoder=str(cfg.encoder), decoder=str(cfg.decoder),
                        parity=str(cfg.parity), loss=str(cfg.loss))
        settings = RunSettings(base=str(cfg.base), dataset=str(cfg.dataset), code=spec, base_epochs=cfg.base_epochs,
                               epochs=cfg.epochs, batch_size=cfg.batch_size, seed=cfg.seed,
                               train_images=cfg.train_images, test_images=cfg.test_images)
        scores = train_with_progress(settings, folder, str(cfg.data_dir), str(cfg.device), show=bool(cfg.progress))
    except NasutilError:
        _remove_if_unused(folder, Path(str(cfg.runs)))
        raise
    print_scores(scores, False, folder)
    return scores.to_dict()


def _remove_if_unused(folder: Path, runs: Path) -> None:
    """Hydra makes a job's folder before the job runs; one that a refused setting left holding nothing but
    Hydra's own files and the settings (no checkpoint, no history) goes again, with the parents it leaves empty (never `runs` itself)."""
    import shutil

    hydra_files = {".hydra", f"{Path(__file__).stem}.log", "run.json"}  # run.json: settings, no results
    if not folder.is_dir() or any(p.name not in hydra_files for p in folder.iterdir()):
        return
    shutil.rmtree(folder)
    runs = runs.resolve()
    parent = folder.resolve().parent
    while parent != runs and runs in parent.parents and parent.is_dir() and not any(parent.iterdir()):
        parent.rmdir()
        parent = parent.parent


_job_errors: list[str] = []


@hydra.main(version_base="1.3", config_path=CONFIG_PATH, config_name="codes")
def _hydra_main(cfg: DictConfig) -> dict[str, Any] | None:
    return keep_user_error(run_codes, cfg, _job_errors)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    return run_hydra_app(PROG, _hydra_main, _job_errors, args,
                         "interrupted (finished epochs are kept in the run folder; re-run to continue)")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
