"""The settings of a codes training job, declared once.

Three dataclasses are the schema: `CodeSpec` (the code), `RunSettings` (a run: its base, data, code and
training) and `JobSettings` (where and how one job trains a run; none of it is part of the run). Each field
holds its default and, in its metadata (`setting`), its help text, its allowed values and, for a whole
number, the least value its flag takes. `nasutil codes train` makes its flags from `settings()`, and a test
holds `conf/codes.yaml` (the settings of `nasutil-codes`) to the same names and defaults, so a setting is
declared here and nowhere else. A run folder's name is made of the run's settings (`run_folder_name`).

This module loads without torch: the command line reads it to list its flags.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import zlib
from collections.abc import Mapping
from dataclasses import Field, asdict, dataclass, field, fields
from functools import cache
from typing import Any

from nasutil.errors import NasutilError

ENCODERS = ("mlp", "conv", "sum", "concat")
LEARNED_ENCODERS = ("mlp", "conv")
DECODERS = ("mlp", "subtract")
LOSSES = ("mse", "kl")
MAX_K = 16
#: settings that may grow between runs of one folder: a run continues rather than restarts
GROWABLE = ("epochs",)
#: how conf/codes.yaml spells the data folder's default (`$NASUTIL_DATA_DIR`, else `data`)
DATA_DIR_YAML = "${oc.env:NASUTIL_DATA_DIR,data}"
_SAME = object()
#: the largest whole number a setting takes unless it says less (10**20 overflowed inside torch)
MAX_WHOLE = 2**31 - 1
#: the most epochs and the largest batch a code trains with
MAX_EPOCHS, MAX_BATCH = 100_000, 65_536


def setting(default: Any, help: str | None = None, *, choices: tuple[str, ...] | None = None,
            least: int | None = None, most: int = MAX_WHOLE, flag: bool = True, yaml: Any = _SAME) -> Any:
    """A field of the schema. `least`: a whole number, and the least value its flag takes (a check of its
    own may ask for more, as `k` does); None for text (or a flag). `most`: the largest whole number it takes.
    `flag`: whether `nasutil codes train` has a flag for it (`progress` and `runs` are `nasutil-codes` settings
    only). `yaml`: how conf/codes.yaml spells the default, where that differs from `default`."""
    return field(default=default, metadata={"help": help, "choices": choices, "least": least, "most": most,
                                            "flag": flag, "yaml": default if yaml is _SAME else yaml})


def _check_fields(schema: Any) -> None:
    """Each setting of `schema` (an instance of a schema dataclass) of the kind its field declares, else one
    line naming it: a whole number >= `least`, one of `choices`, true or false, or text. A wrong kind once
    failed far from the setting, as "argument of type 'NoneType' is not iterable" for a base of None."""
    for f in fields(schema):
        if "least" not in f.metadata:  # a nested schema (the run's code), checked by its own `check`
            continue
        value, least, choices = getattr(schema, f.name), f.metadata["least"], f.metadata["choices"]
        if value is None and f.default is None:  # "all" images, or the default folder, where that is the default
            continue
        if least is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise NasutilError(f"{f.name} must be a whole number >= {least}, got {value!r}")
            if value > f.metadata["most"]:
                raise NasutilError(f"{f.name} must be at most {f.metadata['most']:,}, got {value!r}")
        elif choices is not None:
            if not isinstance(value, str) or value not in choices:
                raise NasutilError(f"unknown {f.name} {value!r} (choose from {', '.join(choices)})")
        elif isinstance(f.default, bool):
            if not isinstance(value, bool):
                raise NasutilError(f"{f.name} must be true or false, got {value!r}")
        elif not isinstance(value, str):
            raise NasutilError(f"{f.name} must be text, got {value!r}")


@dataclass(frozen=True)
class CodeSpec:
    """Everything that decides a code's shape and training; saved with every checkpoint. With r > 1 (learned
    encoder and decoder only) the decoder sees r parity outputs; training and evaluation rebuild one
    unavailable output per group, as in the papers."""

    k: int = setting(2, "queries per parity group", least=1)
    r: int = setting(1, "parity queries per group", least=1)
    encoder: str = setting("mlp", "mlp, conv (learned) or sum, concat (fixed)", choices=ENCODERS)
    decoder: str = setting("mlp", "mlp (learned) or subtract (fixed)", choices=DECODERS)
    parity: str = setting("base", "base: parity queries run through the base (a learned code); copy: a parity "
                                  "model with the base's architecture; or a base spec for the parity model")
    loss: str = setting("mse", "mse or kl, against the base's outputs", choices=LOSSES)

    def check(self) -> CodeSpec:
        if not isinstance(self.k, int) or not 2 <= self.k <= MAX_K:
            raise NasutilError(f"k must be a whole number from 2 to {MAX_K}, got {self.k!r}")
        if not isinstance(self.r, int) or not 1 <= self.r <= self.k:
            raise NasutilError(f"r must be a whole number from 1 to k = {self.k}, got {self.r!r}")
        _check_fields(self)
        if self.r > 1 and (self.encoder not in LEARNED_ENCODERS or self.decoder != "mlp"):
            raise NasutilError("r > 1 needs a learned encoder (mlp, conv) and the mlp decoder")
        if self.parity == "base" and self.encoder not in LEARNED_ENCODERS and self.decoder != "mlp":
            raise NasutilError(f"with parity=base nothing would be trained: the {self.encoder} encoder and "
                               f"{self.decoder} decoder are fixed; train a parity model (parity=copy or a base spec)")
        return self

    @property
    def trains_parity_model(self) -> bool:
        return self.parity != "base"

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class RunSettings:
    """A run: what its folder's `run.json` holds (and, `epochs` aside, what names the folder)."""

    base: str = setting("mlp", "mlp, lenet5, resnet18 or SPACE:ARCH")
    dataset: str = setting("fashion_mnist", "digits, mnist, fashion_mnist or cifar10")
    code: CodeSpec = field(default_factory=CodeSpec)
    #: at least 1: a run folder's base is trained in it, and a code of an untrained base rebuilds noise
    base_epochs: int = setting(10, "base training epochs", least=1, most=MAX_EPOCHS)
    epochs: int = setting(30, "code training epochs", least=1, most=MAX_EPOCHS)
    batch_size: int = setting(64, "groups per step", least=1, most=MAX_BATCH)
    seed: int = setting(0, least=0)
    train_images: int | None = setting(None, "use only the first N training images", least=1)  # None: all
    test_images: int | None = setting(None, "score only the first N test images", least=1)  # None: all

    def check(self) -> RunSettings:
        """Every setting checked before anything is written or trained (the base and parity specs are
        built once on the CPU, so that a bad architecture fails now and not after the base's training)."""
        from nasutil.codes.bases import build_base
        from nasutil.datasets import DATASETS, SHAPES

        if not isinstance(self.code, CodeSpec):
            raise NasutilError(f"code must be a CodeSpec, got {self.code!r}")
        self.code.check()
        if not isinstance(self.dataset, str) or self.dataset not in DATASETS:
            raise NasutilError(f"unknown dataset {self.dataset!r} (choose from {', '.join(DATASETS)})")
        _check_fields(self)
        for name in ("train_images", "test_images"):  # a code works on groups of k images: fewer form none
            value = getattr(self, name)
            if value is not None and value < self.code.k:
                raise NasutilError(f"{name} must be at least k = {self.code.k} (one group of k queries), "
                                   f"got {value}")
        (channels, size, _), classes = SHAPES[self.dataset]
        for spec in {self.base, *([] if self.code.parity in ("base", "copy") else [self.code.parity])}:
            build_base(spec, channels, size, classes)
        return self

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "code": self.code.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunSettings:
        try:
            return cls(**{**data, "code": CodeSpec(**data["code"])}).check()
        except (TypeError, KeyError, AttributeError) as exc:
            raise NasutilError(f"unreadable run settings: {exc}") from None


@dataclass(frozen=True)
class JobSettings:
    """Where and how one job trains its run: none of these is part of the run (its folder's name, run.json)."""

    data_dir: str | None = setting(None, "folder of MNIST/FashionMNIST/cifar-10-batches-bin (default "
                                         "$NASUTIL_DATA_DIR, else data)", yaml=DATA_DIR_YAML)
    device: str = setting("auto", "cpu, cuda, cuda:N or auto (default)")
    progress: bool = setting(True, "a progress bar per training stage on stderr", flag=False)
    runs: str = setting("outputs/codes", "where run folders go (relative to the launch folder)", flag=False)

    def check(self) -> JobSettings:
        _check_fields(self)
        return self


def data_folder(given: str | None) -> str:
    """The data folder of `data_dir`: the one given, else $NASUTIL_DATA_DIR, else `data` (what conf/codes.yaml
    says too)."""
    return given or os.environ.get("NASUTIL_DATA_DIR") or "data"


#: every setting of a job, in the order `nasutil codes train --help` and conf/codes.yaml list them
ORDER = ("base", "dataset", "data_dir", "k", "r", "encoder", "decoder", "parity", "loss", "epochs", "base_epochs",
         "batch_size", "seed", "train_images", "test_images", "device", "progress", "runs")


@dataclass(frozen=True)
class Setting:
    """One setting of the schema, as the front doors read it."""

    name: str
    owner: type  # CodeSpec, RunSettings or JobSettings
    default: Any
    help: str | None
    choices: tuple[str, ...] | None
    least: int | None  # a whole number, and the least value its flag takes; None: text (or a flag)
    flag: bool  # `nasutil codes train --NAME` takes it
    yaml: Any  # its default as conf/codes.yaml spells it

    @property
    def text(self) -> bool:
        return self.least is None and not isinstance(self.default, bool)


def _setting(owner: type, f: Field) -> Setting:
    return Setting(f.name, owner, f.default, f.metadata["help"], f.metadata["choices"], f.metadata["least"],
                   f.metadata["flag"], f.metadata["yaml"])


@cache
def settings() -> tuple[Setting, ...]:
    """Every setting of a job (the code's, the run's and the job's), in ORDER."""
    found = {f.name: _setting(owner, f) for owner in (CodeSpec, RunSettings, JobSettings) for f in fields(owner)
             if f.name != "code"}
    if sorted(found) != sorted(ORDER):
        raise RuntimeError(f"ORDER lists {sorted(ORDER)} but the settings are {sorted(found)}")
    return tuple(found[name] for name in ORDER)


def from_values(values: Mapping[str, Any]) -> tuple[RunSettings, JobSettings]:
    """The run and job settings of flat `values` (a `nasutil-codes` config, or `nasutil codes train`'s flags):
    a name outside the schema is refused, a missing one takes its default, text is taken as text. The run's
    settings are checked by `train_run`, the job's here."""
    unknown = sorted(set(values) - set(ORDER))
    if unknown:
        raise NasutilError(f"unknown setting(s) {', '.join(unknown)} (settings: {', '.join(ORDER)})")
    parts: dict[type, dict[str, Any]] = {CodeSpec: {}, RunSettings: {}, JobSettings: {}}
    for s in settings():
        if s.name in values:
            value = values[s.name]
            keep = not s.text or (value is None and s.default is None)  # None: "the default folder", say
            parts[s.owner][s.name] = value if keep else str(value)
    job = JobSettings(**parts[JobSettings]).check()
    return RunSettings(**parts[RunSettings], code=CodeSpec(**parts[CodeSpec])), job


# ---------------------------------------------------------------- a run folder's name

def named_settings() -> tuple[str, ...]:
    """The settings a run folder's name is made of: every setting of the run but those a continued run may
    raise (`epochs`)."""
    return tuple(s.name for s in settings() if s.owner is not JobSettings and s.name not in GROWABLE)


def slug(text: Any) -> str:
    """A folder name for a setting: `nb201:|nor_conv_3x3~0|+...` becomes `nb201-nor_conv_3x3-0-...` plus,
    where characters were replaced, a short digest that keeps two settings apart."""
    text = str(text)
    clean = re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-") or "x"
    if clean == text:
        return text
    return f"{clean[:60]}-{zlib.crc32(text.encode()):08x}"


def run_folder_name(values: Mapping[str, Any]) -> str:
    """`DATASET/BASE/k2-r1-ENCODER-DECODER-PARITY-LOSS-sSEED-DIGEST` for flat setting `values` (a config):
    the digest covers every named setting."""
    named = {key: values.get(key) for key in named_settings()}
    digest = hashlib.sha1(json.dumps(named, sort_keys=True, default=str).encode()).hexdigest()[:8]
    leaf = "-".join(slug(v) for v in (f"k{named['k']}", f"r{named['r']}", named["encoder"], named["decoder"],
                                      named["parity"], named["loss"], f"s{named['seed']}", digest))
    return f"{slug(named['dataset'])}/{slug(named['base'])}/{leaf}"
