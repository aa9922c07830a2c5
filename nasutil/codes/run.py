"""A code run in a folder: train the base, train the code, score it; resumable at every epoch.

    RUN/run.json           the settings (a re-run with other settings is refused, never mixed in)
    RUN/base.safetensors   the trained base and its fingerprint
    RUN/base.partial.safetensors
                           the base's finished epochs and optimizer while it trains (removed once it is done)
    RUN/code.safetensors   the code, its optimizer, the epochs done, the base it belongs to
    RUN/history.jsonl      one line per epoch: loss, validation reconstruction accuracy, seconds
    RUN/scores.json        test-set scores of the final code

Re-running the same command after an interruption continues from the last finished epoch; asking
for more epochs than a finished run has continues it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from nasutil.codes import checkpoints
from nasutil.codes.bases import build_base
from nasutil.codes.code import Code
from nasutil.codes.data import CodeData, load_code_data
from nasutil.codes.metrics import CodeScores, score_code
from nasutil.codes.settings import GROWABLE, RunSettings  # the schema of a run's settings
from nasutil.codes.training import (base_optimizer, base_outputs, freeze, make_optimizer, train_base,
                                    train_code_epoch)
from nasutil.errors import NasutilError
from nasutil.evaluator.config import chosen_device
from nasutil.files import regular_file

#: validation images scored after every epoch (enough for a steady figure, cheap beside an epoch)
VALID_IMAGES = 2000


Progress = Callable[[str, int, int, dict[str, float]], None]  # stage, done, total, figures


def resolve_device(spec: str, setting: str = "--device") -> torch.device:
    return torch.device(chosen_device(spec, setting))


def _check_against_folder(folder: Path, settings: RunSettings) -> None:
    """Refuse settings that differ from those the folder's run holds (only GROWABLE ones may)."""
    path = folder / "run.json"
    if path.is_file():
        try:
            stored = RunSettings.from_dict(read_record(path))
        except NasutilError as exc:
            raise NasutilError(f"{exc}; use another folder") from None
        if replace(stored, epochs=settings.epochs) != settings:
            changed = differences(stored.to_dict(), settings.to_dict())
            raise NasutilError(f"{str(folder)!r} holds a run with other settings ({'; '.join(changed)}); "
                               f"use another folder")


def differences(stored: dict[str, Any], given: dict[str, Any], prefix: str = "") -> list[str]:
    """`name: stored -> given` for each setting that differs (a code's own settings by their dotted name),
    the GROWABLE ones left out."""
    lines = []
    for key, value in given.items():
        before = stored.get(key)
        if before == value or (not prefix and key in GROWABLE):
            continue
        if isinstance(before, dict) and isinstance(value, dict):
            lines += differences(before, value, f"{prefix}{key}.")
        else:
            lines.append(f"{prefix}{key}: {before!r} -> {value!r}")
    return lines


def _write_settings(folder: Path, settings: RunSettings) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run.json").write_text(json.dumps(settings.to_dict(), indent=1))


def _data(settings: RunSettings, data_dir: str | Path) -> CodeData:
    return load_code_data(settings.dataset, data_dir).limited(settings.train_images, settings.test_images)


def trained_base(spec: str, data: CodeData, path: Path, epochs: int, batch_size: int, device: torch.device,
                 seed: int = 0, on_epoch: Callable[[int, float], None] | None = None) -> torch.nn.Module:
    """The frozen base stored at `path`, or one trained now (`epochs` of Adam) and stored there.

    Until its last epoch the base is stored after every epoch beside `path` (`*.partial.safetensors`,
    with its optimizer), so that a base stopped part-way continues from its last finished epoch.
    """
    torch.manual_seed(seed)
    base = build_base(spec, *data.shape[:2], data.num_classes)
    if path.is_file():
        tensors, _ = checkpoints.load(path)
        checkpoints.load_into(base, tensors, "base", path)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        _train_base_resumably(base, spec, data, path, epochs, batch_size, device, seed, on_epoch)
        checkpoints.save(path, {"base": base}, {"base": spec, "dataset": data.name,
                                                "fingerprint": checkpoints.fingerprint(base)})
        partial_base_path(path).unlink(missing_ok=True)
    freeze(base.to(device))
    return base


def partial_base_path(path: Path) -> Path:
    """Where a base in training keeps its finished epochs."""
    return path.with_name(f"{path.stem}.partial{path.suffix}")


def _train_base_resumably(base: torch.nn.Module, spec: str, data: CodeData, path: Path, epochs: int,
                          batch_size: int, device: torch.device, seed: int,
                          on_epoch: Callable[[int, float], None] | None) -> None:
    partial = partial_base_path(path)
    plan = {"base": spec, "dataset": data.name, "train_images": len(data.train[0]), "base_epochs": epochs,
            "batch_size": batch_size, "seed": seed}
    base.to(device)
    optimizer = base_optimizer(base)
    done = _resume_base(base, optimizer, partial, plan) if partial.is_file() else 0

    def store(epoch: int) -> None:
        if epoch < epochs:  # the last epoch is stored as the base itself
            checkpoints.save(partial, {"base": base}, {**plan, "epochs": epoch}, optimizer)

    train_base(base, data.train, epochs, batch_size, device, seed, on_epoch=on_epoch, optimizer=optimizer,
               done=done, after_epoch=store)


def _resume_base(base: torch.nn.Module, optimizer: torch.optim.Optimizer, partial: Path, plan: dict[str, Any]) -> int:
    """Epochs a stored partial base holds (its weights and optimizer restored), or 0 where it was trained
    under another plan (then it is trained again from the start and the partial file replaced)."""
    tensors, meta = checkpoints.load(partial)
    epochs = meta.get("epochs")
    if any(meta.get(key) != value for key, value in plan.items()) or not isinstance(epochs, int) \
            or isinstance(epochs, bool) or not 0 < epochs < plan["base_epochs"]:
        return 0
    checkpoints.load_into(base, tensors, "base", partial)
    checkpoints.restore_optimizer(optimizer, tensors, meta["optimizer_groups"])
    return epochs


def train_run(settings: RunSettings, folder: Path, data_dir: str | Path = "data", device: str = "auto",
              progress: Progress | None = None) -> CodeScores:
    """Train (or continue) the run in `folder` and score it on the test set."""
    if not isinstance(settings, RunSettings):
        raise NasutilError(f"train_run takes a RunSettings, got {type(settings).__name__}")
    if not isinstance(folder, (str, Path)):
        raise NasutilError(f"train_run's folder is a path, got {type(folder).__name__}")
    folder = Path(folder)
    settings.check()
    _check_against_folder(folder, settings)
    dev = resolve_device(device)
    data = _data(settings, data_dir)  # a missing data folder fails here, before the folder is written
    _write_settings(folder, settings)
    base = trained_base(settings.base, data, folder / "base.safetensors", settings.base_epochs, settings.batch_size,
                        dev, settings.seed, on_epoch=lambda e, loss: progress and progress(
                            "base", e, settings.base_epochs, {"loss": loss}))
    stamp = checkpoints.fingerprint(base)
    torch.manual_seed(settings.seed + 1)
    code = Code(settings.code, settings.base, data.shape, data.num_classes).to(dev)
    optimizer = make_optimizer(code)
    done, path = 0, folder / "code.safetensors"
    if path.is_file():
        done = _resume(code, optimizer, path, stamp)
    targets = base_outputs(base, data.train[0], dev)
    valid = (data.valid[0][:VALID_IMAGES], data.valid[1][:VALID_IMAGES])
    generator = torch.Generator().manual_seed(settings.seed + 2)
    for _ in range(done):  # the same group draws as an uninterrupted run
        torch.randperm(len(data.train[0]), generator=generator)
    for epoch in range(done + 1, settings.epochs + 1):
        started = time.perf_counter()
        loss = train_code_epoch(code, base, data.train[0], targets, optimizer, settings.batch_size, dev, generator) \
            if optimizer is not None else float("nan")
        scores = score_code(code, base, valid, dev)
        line = {"epoch": epoch, "loss": loss, "valid_reconstruction_accuracy": scores.reconstruction_accuracy,
                "valid_degraded_accuracy": scores.degraded_accuracy, "seconds": time.perf_counter() - started}
        checkpoints.save(path, _code_modules(code), {"epochs": epoch, "base_fingerprint": stamp,
                                                     "settings": settings.to_dict()}, optimizer)
        with open(folder / "history.jsonl", "a") as f:
            f.write(json.dumps(line) + "\n")
        if progress is not None:
            progress("code", epoch, settings.epochs, line)
    scores = score_code(code, base, data.test, dev)
    (folder / "scores.json").write_text(json.dumps({**scores.to_dict(), "epochs": settings.epochs,
                                                    "settings": settings.to_dict()}, indent=1))
    return scores


def _code_modules(code: Code) -> dict[str, torch.nn.Module]:
    parts = {"encoder": code.encoder, "decoder": code.decoder}
    if code.parity_model is not None:
        parts["parity_model"] = code.parity_model
    return parts


def _resume(code: Code, optimizer: torch.optim.Optimizer | None, path: Path, stamp: str) -> int:
    tensors, meta = checkpoints.load(path)
    if meta.get("base_fingerprint") != stamp:
        raise NasutilError(f"checkpoint {str(path)!r} belongs to another base (fingerprint "
                           f"{meta.get('base_fingerprint')!r}, this base {stamp!r})")
    for prefix, module in _code_modules(code).items():
        checkpoints.load_into(module, tensors, prefix, path)
    if optimizer is not None and meta.get("optimizer_groups") is not None:
        checkpoints.restore_optimizer(optimizer, tensors, meta["optimizer_groups"])
    epochs = meta.get("epochs")
    if not isinstance(epochs, int) or epochs < 0:
        raise NasutilError(f"checkpoint {str(path)!r} does not say how many epochs it holds")
    return epochs


#: the largest run.json or scores.json read: a run writes a few kilobytes
MAX_RECORD_BYTES = 1 << 20


def read_record(path: Path) -> dict[str, Any]:
    """A run's JSON record (run.json, scores.json) as a mapping, or a one-line NasutilError saying it is
    damaged: too large, not UTF-8, not JSON, nested too deep to read, or a number too long to convert."""
    try:
        regular_file(path, "run record", MAX_RECORD_BYTES)  # too large, or a device or a pipe: one line
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError, ValueError) as exc:
        reason = "nested too deep" if isinstance(exc, RecursionError) else str(exc).splitlines()[0][:120]
        raise NasutilError(f"{str(path)!r} is damaged ({type(exc).__name__}: {reason})") from None
    except OSError as exc:
        raise NasutilError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
    if not isinstance(data, dict):
        raise NasutilError(f"{str(path)!r} is damaged (not a JSON object)")
    return data


def read_settings(folder: Path) -> RunSettings:
    """The settings of the run in `folder`."""
    path = folder / "run.json"
    if not path.is_file():
        raise NasutilError(f"{str(folder)!r} is not a codes run (no run.json)")
    return RunSettings.from_dict(read_record(path))


def load_run(folder: Path, settings: RunSettings, data: CodeData, device: torch.device,
             code_checkpoint: Path | None = None) -> tuple[torch.nn.Module, Code]:
    """The run's frozen base and its code (or another run's `code_checkpoint`, which must belong to this
    base), on `device`."""
    base = build_base(settings.base, *data.shape[:2], data.num_classes)
    base_path = folder / "base.safetensors"
    tensors, _ = checkpoints.load(base_path)
    checkpoints.load_into(base, tensors, "base", base_path)
    freeze(base.to(device))
    code_path = code_checkpoint or folder / "code.safetensors"
    _, meta = checkpoints.load(code_path)
    stored = meta.get("settings")
    spec = RunSettings.from_dict(stored).code if isinstance(stored, dict) else settings.code
    code = Code(spec, settings.base, data.shape, data.num_classes).to(device)
    _resume(code, None, code_path, checkpoints.fingerprint(base))
    return base, code


def evaluate_run(folder: Path, data_dir: str | Path = "data", device: str = "auto",
                 code_checkpoint: Path | None = None) -> CodeScores:
    """Score a run's code (or another run's `code_checkpoint`) on the test set of the run's dataset."""
    settings = read_settings(folder)
    dev = resolve_device(device)
    data = _data(settings, data_dir)
    base, code = load_run(folder, settings, data, dev, code_checkpoint)
    return score_code(code, base, data.test, dev)
