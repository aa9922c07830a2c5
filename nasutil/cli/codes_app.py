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
import hashlib
import json
import re
import sys
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from nasutil.cli.hydra_app import keep_user_error, run_hydra_app
from nasutil.codes.lock import LOCK, training_lock

PROG = "nasutil-codes"
CONFIG_PATH = "pkg://nasutil_conf"
SETTINGS = ("base", "dataset", "data_dir", "k", "r", "encoder", "decoder", "parity", "loss", "epochs",
            "base_epochs", "batch_size", "seed", "train_images", "test_images", "device", "progress", "runs")


#: the settings a run folder's name is made of (all but `epochs`, which a continued run may raise)
NAMED = ("dataset", "base", "k", "r", "encoder", "decoder", "parity", "loss", "seed", "base_epochs", "batch_size",
         "train_images", "test_images")
#: what a run writes; a folder holding any of them holds a run, and is never removed


def slug(text: Any) -> str:
    """A folder name for a setting: `nb201:|nor_conv_3x3~0|+...` becomes `nb201-nor_conv_3x3-0-...` plus,
    where characters were replaced, a short digest that keeps two settings apart."""
    text = str(text)
    clean = re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-") or "x"
    if clean == text:
        return text
    return f"{clean[:60]}-{zlib.crc32(text.encode()):08x}"


def run_name(*, _root_: DictConfig) -> str:
    """`DATASET/BASE/k2-r1-ENCODER-DECODER-PARITY-LOSS-sSEED-DIGEST`: the digest covers every named setting."""
    values = {key: _root_.get(key) for key in NAMED}
    digest = hashlib.sha1(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()[:8]
    leaf = "-".join(slug(v) for v in (f"k{values['k']}", f"r{values['r']}", values["encoder"], values["decoder"],
                                      values["parity"], values["loss"], f"s{values['seed']}", digest))
    return f"{slug(values['dataset'])}/{slug(values['base'])}/{leaf}"


for _name, _resolver in (("slug", slug), ("codes_run", run_name)):
    if not OmegaConf.has_resolver(_name):
        OmegaConf.register_new_resolver(_name, _resolver)


def run_codes(cfg: DictConfig) -> dict[str, Any]:
    """The task of one Hydra job: train the run folder of these settings, score it, print the scores."""
    from hydra.core.hydra_config import HydraConfig

    from nasutil.cli.codes_command import print_scores, train_with_progress
    from nasutil.cli.hydra_app import user_error
    from nasutil.codes import CodeSpec, RunSettings
    from nasutil.errors import NasutilError

    hydra_config = HydraConfig.get()
    folder = Path(hydra_config.runtime.output_dir)
    with training_lock(folder) as fresh:
        try:
            values = OmegaConf.to_container(cfg, resolve=True)
            unknown = sorted(set(values) - set(SETTINGS))
            if unknown:
                raise NasutilError(f"unknown setting(s) {', '.join(unknown)} (settings: {', '.join(SETTINGS)})")
            if not isinstance(values["progress"], bool):
                raise NasutilError(f"progress must be true or false, got {values['progress']!r}")
            spec = CodeSpec(k=values["k"], r=values["r"], encoder=str(values["encoder"]),
                            decoder=str(values["decoder"]), parity=str(values["parity"]), loss=str(values["loss"]))
            settings = RunSettings(base=str(values["base"]), dataset=str(values["dataset"]), code=spec,
                                   base_epochs=values["base_epochs"], epochs=values["epochs"],
                                   batch_size=values["batch_size"], seed=values["seed"],
                                   train_images=values["train_images"], test_images=values["test_images"])
            scores = train_with_progress(settings, folder, str(values["data_dir"]), str(values["device"]),
                                         show=values["progress"])
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
    if runs not in target.parents:
        return
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
                         "interrupted (finished epochs are kept in the run folder; re-run to continue)")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
