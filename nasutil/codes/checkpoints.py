"""Checkpoints that execute nothing on load: tensors in safetensors files, settings as JSON text in them.

A file holds named state dicts (`base.*`, `encoder.*`, `decoder.*`, `parity_model.*`, optimizer state as
`optimizer.*`) and a `nasutil` metadata entry: the format, what the run was (base spec, dataset, code
spec), how far it got (epochs), and the base's fingerprint, so that a code is never scored against a
base it was not trained for.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import torch

from nasutil.errors import NasutilError

FORMAT = "nasutil-codes/1"


def fingerprint(module: torch.nn.Module) -> str:
    """SHA-256 of a module's parameters and buffers, in name order (16 hex digits)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def optimizer_tensors(optimizer: torch.optim.Optimizer | None) -> tuple[dict[str, torch.Tensor], Any]:
    """An optimizer's state as flat tensors and its parameter groups as JSON-able data."""
    if optimizer is None:
        return {}, None
    state = optimizer.state_dict()
    tensors = {f"optimizer.{index}.{key}": (value if torch.is_tensor(value) else torch.tensor(value))
               for index, entry in state["state"].items() for key, value in entry.items()}
    return tensors, state["param_groups"]


def restore_optimizer(optimizer: torch.optim.Optimizer, tensors: dict[str, torch.Tensor], groups: Any) -> None:
    state: dict[int, dict[str, torch.Tensor]] = {}
    for name, value in tensors.items():
        if name.startswith("optimizer."):
            _, index, key = name.split(".", 2)
            state.setdefault(int(index), {})[key] = value
    try:
        optimizer.load_state_dict({"state": state, "param_groups": groups})
    except (ValueError, KeyError, TypeError) as exc:
        raise NasutilError(f"the checkpoint's optimizer state does not fit this code: {exc}") from None


def save(path: Path, modules: dict[str, torch.nn.Module], metadata: dict[str, Any],
         optimizer: torch.optim.Optimizer | None = None) -> None:
    """Written to a temporary name and renamed: a run killed while saving keeps its previous checkpoint."""
    from safetensors.torch import save_file

    tensors = {f"{prefix}.{name}": t.detach().cpu().contiguous()
               for prefix, module in modules.items() for name, t in module.state_dict().items()}
    extra, groups = optimizer_tensors(optimizer)
    tensors.update({k: v.detach().cpu().contiguous() for k, v in extra.items()})
    meta = {"format": FORMAT, **metadata, "optimizer_groups": groups}
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # two workers saving at once never share one
    try:
        save_file(tensors, str(tmp), metadata={"nasutil": json.dumps(meta)})
        tmp.replace(path)
    except OSError:
        tmp.unlink(missing_ok=True)  # a full disk leaves the previous checkpoint, and no partial copy beside it
        raise


def load(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Tensors and metadata of a checkpoint this format wrote; a one-line error for anything else."""
    from safetensors import safe_open

    if not path.is_file():
        raise NasutilError(f"no checkpoint at {str(path)!r}")
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = json.loads((f.metadata() or {}).get("nasutil", "null"))
            tensors = {name: f.get_tensor(name) for name in f.keys()}
    except Exception as exc:  # safetensors raises its own error types for damaged headers
        raise NasutilError(f"cannot read checkpoint {str(path)!r}: {str(exc).splitlines()[0] if str(exc) else exc}") \
            from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise NasutilError(f"{str(path)!r} is not a nasutil codes checkpoint")
    return tensors, meta


def load_into(module: torch.nn.Module, tensors: dict[str, torch.Tensor], prefix: str, where: Path) -> None:
    state = {name[len(prefix) + 1:]: t for name, t in tensors.items() if name.startswith(prefix + ".")}
    try:
        module.load_state_dict(state)
    except RuntimeError as exc:
        raise NasutilError(f"checkpoint {str(where)!r} does not fit this {prefix}: "
                           f"{str(exc).splitlines()[0]}") from None
