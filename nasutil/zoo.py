"""Known CNNs from torchvision and timm, addressed as `torchvision:NAME` or `timm:NAME`.

Models are built with random weights (no download): utilization does not depend on them.
"""

from __future__ import annotations

import torch.nn as nn

from nasutil.errors import NasutilError

ZOOS = ("torchvision", "timm")
DEFAULT_INPUT_SIZE = 224
DEFAULT_NUM_CLASSES = 1000


def is_zoo(space: str) -> bool:
    return space in ZOOS


def split_model_spec(spec: str) -> tuple[str, str]:
    """`ZOO:NAME` as (zoo, name); a one-line error for anything else (None once failed on `.partition`)."""
    zoo, sep, name = spec.partition(":") if isinstance(spec, str) else ("", "", "")
    if not sep or zoo not in ZOOS or not name:
        raise NasutilError(f"model must be torchvision:NAME or timm:NAME, got {spec!r}")
    return zoo, name


def check_zoo_model(zoo: str, name: str) -> None:
    """Raise a one-line NasutilError unless the zoo is installed and knows the model."""
    if zoo == "torchvision":
        try:
            import torchvision.models as tvm
        except ImportError as exc:
            raise NasutilError("torchvision is not installed (pip install 'nasutil[models]')") from exc
        if name not in tvm.list_models():
            raise NasutilError(f"torchvision has no model {name!r}")
    elif zoo == "timm":
        try:
            import timm
        except ImportError as exc:
            raise NasutilError("timm is not installed (pip install 'nasutil[models]')") from exc
        if not timm.is_model(name):
            raise NasutilError(f"timm has no model {name!r}")
    else:
        raise NasutilError(f"unknown model zoo {zoo!r}")


def build_zoo_model(zoo: str, name: str, num_classes: int = DEFAULT_NUM_CLASSES) -> nn.Module:
    check_zoo_model(zoo, name)
    if zoo == "torchvision":
        import torchvision.models as tvm

        return tvm.get_model(name, weights=None, num_classes=num_classes)
    import timm

    return timm.create_model(name, pretrained=False, num_classes=num_classes)


def zoo_input_size(zoo: str, name: str) -> int:
    """The resolution the model is usually run at (timm records it; torchvision: 224, 299 for Inception)."""
    if zoo == "timm":
        try:
            import timm

            cfg = timm.get_pretrained_cfg(name)
            if cfg is not None and getattr(cfg, "input_size", None):
                return int(cfg.input_size[-1])
        except Exception:
            pass
    if zoo == "torchvision" and name == "inception_v3":
        return 299
    return DEFAULT_INPUT_SIZE
