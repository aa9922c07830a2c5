"""Any NNI 3.0 `ModelSpace` as a nasutil search space.

`get_space("nni")` wraps NNI's NAS-Bench-201 hub space, `get_space("nni:ProxylessNAS")`
any hub space of `nni.nas.hub.pytorch` by class name, and
`get_space("nni:my.module:MySpace")` any importable `ModelSpace` subclass.

The decisions are the space's simplified mutables (`ModelSpace.simplify()`):
`Categorical` (one value) and `CategoricalMultiple` (a subset of values, kept in
the order of its values). `Constraint`s are honoured by rejection sampling and
checked on parse; continuous `Numerical` mutables are not supported. An
architecture is the NNI sample `{label: value}`, printed as compact JSON with
sorted keys. Sampling is uniform over each mutable's choices (NNI's optional
prior `weights` are ignored).

nni is imported here only, and only inside functions: importing it pulls in
pytorch_lightning (seconds), and every other space must stay free of it.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import itertools
import json
import logging
import math
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from nasutil.arch import Arch
from nasutil.errors import InvalidArchError, NasutilError, NotEnumerableError
from nasutil.space import SearchSpace

if TYPE_CHECKING:
    import optuna
    import torch.nn as nn

DEFAULT_SPACE = "NasBench201"
HUB_MODULE = "nni.nas.hub.pytorch"
#: spaces with at most this many architectures can be enumerated
ENUMERATE_LIMIT = 100_000
#: a CategoricalMultiple over more values would make one decision with too many subsets
MAX_MULTIPLE_VALUES = 12
#: hub spaces designed for ImageNet-sized inputs (the rest are CIFAR-sized)
_IMAGENET_HUB = frozenset({"ProxylessNAS", "MobileNetV3Space", "ShuffleNetSpace", "AutoformerSpace", "AutoFormer"})
_CLASS_ARGS = ("num_labels", "num_classes")
_SCALARS = (str, int, float, bool, type(None))
_SAMPLE_TRIES = 1000

Choice = int | tuple[int, ...]  # an index into the values, or a sorted tuple of indices


@contextlib.contextmanager
def _quiet_nni() -> Iterator[None]:
    """Hush NNI for the duration of a call into it, and no longer.

    NNI 3.0 warns at import that it does not know this torch version (it works),
    and some hub spaces log at INFO on every constraint check and build.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*PyTorch version might not be supported",
                                category=RuntimeWarning)
        import nni  # noqa: F401  (configures NNI's logger, so its level is saved after this)

        logger = logging.getLogger("nni")
        level = logger.level
        logger.setLevel(max(level, logging.WARNING))
        try:
            yield
        finally:
            logger.setLevel(level)


def _nni_hub() -> ModuleType:
    with _quiet_nni():
        return importlib.import_module(HUB_MODULE)


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _is_plain(value: object) -> bool:
    """A value JSON writes and reads back unchanged."""
    return isinstance(value, _SCALARS) and not (isinstance(value, float) and not math.isfinite(value))


def _same_choice(choice: object, value: object) -> bool:
    """Equality that keeps bools apart from numbers (JSON `true` must not select the choice 1)."""
    if isinstance(choice, bool) or isinstance(value, bool):
        return isinstance(choice, bool) and isinstance(value, bool) and choice == value
    if isinstance(choice, (int, float)) != isinstance(value, (int, float)):
        return False
    return choice == value


@dataclass(frozen=True)
class Dim:
    """One decision: a Categorical (pick one value) or a CategoricalMultiple (pick a subset)."""

    label: str
    values: tuple[Any, ...]
    multiple: bool = False
    #: allowed subsets (sorted index tuples) of a CategoricalMultiple, in a fixed order
    subsets: tuple[tuple[int, ...], ...] = ()
    n_chosen: int | None = None

    @cached_property
    def plain(self) -> bool:
        """Values are JSON scalars and are written as themselves; otherwise by their index."""
        return all(_is_plain(v) for v in self.values)

    @property
    def count(self) -> int:
        return len(self.subsets) if self.multiple else len(self.values)

    def choices(self) -> list[Choice]:
        return list(self.subsets) if self.multiple else list(range(len(self.values)))

    def value(self, choice: Choice) -> Any:
        if self.multiple:
            return [self.values[i] for i in choice]  # type: ignore[union-attr]
        return self.values[choice]  # type: ignore[index]

    def to_json(self, choice: Choice) -> Any:
        if self.plain:
            return self.value(choice)
        return list(choice) if self.multiple else choice  # type: ignore[arg-type]

    def index_of(self, value: object) -> int:
        if not self.plain:
            if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(self.values):
                return value
            raise InvalidArchError(
                f"label {self.label!r} takes a choice index 0..{len(self.values) - 1}, got {value!r}")
        for i, v in enumerate(self.values):
            if _same_choice(v, value):
                return i
        shown = ", ".join(map(repr, self.values[:8])) + (", ..." if len(self.values) > 8 else "")
        raise InvalidArchError(f"{value!r} is not a choice of label {self.label!r} (choices: {shown})")

    def from_json(self, value: object) -> Choice:
        if not self.multiple:
            return self.index_of(value)
        if not isinstance(value, (list, tuple)):
            raise InvalidArchError(f"label {self.label!r} takes a list of choices, got {value!r}")
        indices = [self.index_of(v) for v in value]
        if len(set(indices)) != len(indices):
            raise InvalidArchError(f"label {self.label!r} repeats a choice in {value!r}")
        if self.n_chosen is not None and len(indices) != self.n_chosen:
            raise InvalidArchError(f"label {self.label!r} needs exactly {self.n_chosen} choice(s), got {len(indices)}")
        return tuple(sorted(indices))

    def one_hot(self, choice: Choice) -> np.ndarray:
        vec = np.zeros(len(self.values), dtype=np.float32)
        vec[list(choice) if self.multiple else choice] = 1.0  # type: ignore[arg-type]
        return vec


@dataclass(frozen=True)
class Schema:
    """The decisions of one model space, in NNI's order (plain data, so archs pickle without NNI objects)."""

    identity: str
    dims: tuple[Dim, ...]

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(d.label for d in self.dims)

    @property
    def encoding_size(self) -> int:
        return sum(len(d.values) for d in self.dims)


@dataclass(frozen=True)
class NNIArch(Arch):
    """An NNI sample: one choice per label of `schema`, stored as indices into the values."""

    model_space: str
    choices: tuple[Choice, ...]
    schema: Schema = field(compare=False, repr=False)
    space = "nni"

    @property
    def sample(self) -> dict[str, Any]:
        """The sample in NNI's own format, ready for `ModelSpace.freeze` or `model_context`."""
        return {d.label: d.value(c) for d, c in zip(self.schema.dims, self.choices)}

    def to_string(self) -> str:
        data = {d.label: d.to_json(c) for d, c in zip(self.schema.dims, self.choices)}
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    def canonical_key(self) -> str:
        # "nni" names every wrapped space; the model space tells two of them apart.
        return f"{self.model_space}\0{self.to_string()}"

    def encode(self) -> np.ndarray:
        if not self.schema.dims:
            return np.zeros(0, dtype=np.float32)
        return np.concatenate([d.one_hot(c) for d, c in zip(self.schema.dims, self.choices)])


def _resolve(target: str | type) -> tuple[type, str]:
    """The ModelSpace class named by `target`, and the identity it goes by."""
    hub = _nni_hub()
    from nni.nas.nn.pytorch import ModelSpace

    hub_names = sorted(n for n, obj in vars(hub).items()
                       if isinstance(obj, type) and issubclass(obj, ModelSpace))
    if isinstance(target, type):
        cls = target
        name = cls.__name__ if getattr(hub, cls.__name__, None) is cls else f"{cls.__module__}:{cls.__qualname__}"
    elif not isinstance(target, str) or not target.strip():
        raise NasutilError(f"empty NNI model-space name (hub spaces: {', '.join(hub_names)}; or module:Class)")
    elif ":" in target:
        module_name, _, attr = target.strip().partition(":")
        try:
            with _quiet_nni():
                obj: Any = importlib.import_module(module_name)
            for part in attr.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError, ValueError) as exc:
            raise NasutilError(f"cannot import NNI model space {target!r}: {_one_line(exc)}") from exc
        cls, name = obj, target.strip()
    else:
        wanted = target.strip()
        matches = [n for n in hub_names if n == wanted] or [n for n in hub_names if n.lower() == wanted.lower()]
        if not matches:
            raise NasutilError(f"unknown NNI hub space {wanted!r} (known: {', '.join(hub_names)}; "
                               "or give module:Class for your own ModelSpace)")
        name = matches[0]
        cls = getattr(hub, name)
    if not (isinstance(cls, type) and issubclass(cls, ModelSpace)):
        raise NasutilError(f"{name!r} is not an NNI ModelSpace subclass")
    return cls, name


def _class_kwarg(cls: type) -> str | None:
    """The constructor argument that sets the number of classes, if the space has one."""
    init = getattr(cls, "_init_wrapped", cls.__init__)  # NNI wraps __init__ and hides its signature
    try:
        params = inspect.signature(init).parameters
    except (TypeError, ValueError):
        return None
    return next((p for p in _CLASS_ARGS if p in params), None)


def _schema(identity: str, mutables: Mapping[str, Any]) -> tuple[Schema, list[Any]]:
    """Dims for the supported mutables and the list of constraints; anything else is an error."""
    from nni.mutable import Categorical, CategoricalMultiple, Constraint

    dims: list[Dim] = []
    constraints: list[Any] = []
    for label, mutable in mutables.items():
        if isinstance(mutable, Constraint):
            constraints.append(mutable)
        elif isinstance(mutable, Categorical):
            dims.append(Dim(label, tuple(mutable.values)))
        elif isinstance(mutable, CategoricalMultiple):
            n, k = len(mutable.values), mutable.n_chosen
            if n > MAX_MULTIPLE_VALUES:
                raise NasutilError(f"NNI space {identity}: CategoricalMultiple {label!r} has {n} values "
                                   f"(at most {MAX_MULTIPLE_VALUES} are supported)")
            sizes = [k] if k is not None else range(n + 1)
            subsets = tuple(c for r in sizes for c in itertools.combinations(range(n), r))
            dims.append(Dim(label, tuple(mutable.values), multiple=True, subsets=subsets, n_chosen=k))
        else:
            raise NasutilError(f"NNI space {identity}: mutable {label!r} is a {type(mutable).__name__}; "
                               "only Categorical, CategoricalMultiple and Constraint are supported")
    return Schema(identity, tuple(dims)), constraints


class NNIModelSpace(SearchSpace[NNIArch]):
    """Adapter from an NNI 3.0 ModelSpace class to the nasutil protocol.

    `target` is a hub class name (`"ProxylessNAS"`), `"module:Class"`, or the class
    itself; `space_kwargs` go to its constructor (e.g. `stem_out_channels=8`).
    The number of classes is set at `build` through the class's `num_labels`
    (or `num_classes`) argument where it has one.
    """

    name = "nni"
    description = "any NNI 3.0 ModelSpace (default: its NAS-Bench-201 hub space); nni:HubName or nni:module:Class"
    default_input_size = 32

    def __init__(self, target: str | type = DEFAULT_SPACE, **space_kwargs: Any) -> None:
        for arg in _CLASS_ARGS:
            if arg in space_kwargs:
                raise NasutilError(f"pass the number of classes to build(num_classes=...), not {arg}=")
        self._cls, base = _resolve(target)
        self.identity = base + (f"({', '.join(f'{k}={v!r}' for k, v in sorted(space_kwargs.items()))})"
                                if space_kwargs else "")
        self._kwargs = space_kwargs
        self._class_arg = _class_kwarg(self._cls)
        self._instances: dict[int, nn.Module] = {}
        if base in _IMAGENET_HUB:
            self.default_input_size = 224
        try:
            mutables = self.model_space().simplify()
        except NasutilError:
            raise
        except Exception as exc:
            raise NasutilError(f"cannot list the mutables of NNI space {self.identity}: {_one_line(exc)}") from exc
        self.schema, self._constraints = _schema(self.identity, mutables)
        self._dim = {d.label: d for d in self.schema.dims}

    @classmethod
    def from_option(cls, option: str) -> NNIModelSpace:
        """`nni:ProxylessNAS` (hub class) or `nni:my.module:MySpace` (any importable ModelSpace)."""
        return cls(option)

    def __repr__(self) -> str:
        return f"NNIModelSpace({self.identity})"

    # -- the wrapped NNI objects -------------------------------------------------

    def _init_kwargs(self, num_classes: int) -> dict[str, Any]:
        return {**self._kwargs, self._class_arg: num_classes} if self._class_arg else dict(self._kwargs)

    def model_space(self, num_classes: int = 10) -> nn.Module:
        """The NNI ModelSpace instance (one per class count, cached: building a supernet is slow)."""
        if num_classes not in self._instances:
            try:
                with _quiet_nni():
                    self._instances[num_classes] = self._cls(**self._init_kwargs(num_classes))
            except Exception as exc:
                raise NasutilError(f"cannot build NNI space {self.identity}: {_one_line(exc)}") from exc
        return self._instances[num_classes]

    # -- arch values ------------------------------------------------------------

    def _violation(self, sample: dict[str, Any]) -> str | None:
        for constraint in self._constraints:
            with _quiet_nni():
                error = constraint.check_contains(sample)
            if error is not None:
                return f"violates NNI constraint {constraint.label!r}: {_one_line(error)}"
        return None

    def _make(self, choices: tuple[Choice, ...]) -> NNIArch:
        return NNIArch(self.identity, choices, self.schema)

    def arch_from_sample(self, sample: Mapping[str, Any]) -> NNIArch:
        """Validate an NNI sample `{label: value}` and wrap it; raises a one-line InvalidArchError."""
        if not isinstance(sample, Mapping):
            raise InvalidArchError(f"an NNI architecture is a JSON object {{label: choice}}, got {type(sample).__name__}")
        unknown = [k for k in sample if k not in self._dim]
        if unknown:
            shown = ", ".join(map(repr, self.schema.labels[:6])) + (", ..." if len(self.schema.dims) > 6 else "")
            raise InvalidArchError(f"unknown label {unknown[0]!r} for NNI space {self.identity} (labels: {shown})")
        missing = [d.label for d in self.schema.dims if d.label not in sample]
        if missing:
            raise InvalidArchError(f"missing label {missing[0]!r} ({len(missing)} of {len(self.schema.dims)} "
                                   f"labels have no choice) for NNI space {self.identity}")
        arch = self._make(tuple(d.from_json(sample[d.label]) for d in self.schema.dims))
        reason = self._violation(arch.sample) if self._constraints else None
        if reason:
            raise InvalidArchError(f"architecture {reason}")
        return arch

    def parse(self, text: str) -> NNIArch:
        if not isinstance(text, str) or not text.strip():
            raise InvalidArchError("empty NNI architecture string")

        def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
            keys = [k for k, _ in pairs]
            for k in keys:
                if keys.count(k) > 1:
                    raise InvalidArchError(f"label {k!r} appears twice in the NNI architecture string")
            return dict(pairs)

        try:
            data = json.loads(text, object_pairs_hook=no_duplicates)
        except json.JSONDecodeError as exc:
            raise InvalidArchError(f"NNI architecture string is not valid JSON ({exc.msg} at char {exc.pos})") from None
        return self.arch_from_sample(data)

    # -- search -----------------------------------------------------------------

    def _draw(self, rng: np.random.Generator) -> NNIArch:
        choices: list[Choice] = []
        for d in self.schema.dims:
            k = int(rng.integers(d.count))
            choices.append(d.subsets[k] if d.multiple else k)
        return self._make(tuple(choices))

    def sample(self, rng: np.random.Generator) -> NNIArch:
        """Uniform per mutable; with constraints, redrawn until they hold."""
        for _ in range(_SAMPLE_TRIES):
            arch = self._draw(rng)
            if not self._constraints or self._violation(arch.sample) is None:
                return arch
        raise NasutilError(f"no architecture of NNI space {self.identity} met its constraints "
                           f"in {_SAMPLE_TRIES} draws")

    def suggest(self, trial: optuna.Trial) -> NNIArch:
        """One categorical parameter per label. Values optuna cannot store (and subsets) go by index.

        Optuna cannot respect NNI constraints; a suggestion that breaks one raises
        `optuna.TrialPruned`, which `study.optimize` records as a pruned trial.
        """
        choices: list[Choice] = []
        for d in self.schema.dims:
            if d.multiple:
                choices.append(d.subsets[trial.suggest_categorical(d.label, list(range(len(d.subsets))))])
            elif d.plain:
                choices.append(d.index_of(trial.suggest_categorical(d.label, list(d.values))))
            else:
                choices.append(trial.suggest_categorical(d.label, list(range(len(d.values)))))
        arch = self._make(tuple(choices))
        reason = self._violation(arch.sample) if self._constraints else None
        if reason:
            import optuna

            raise optuna.TrialPruned(f"suggested architecture {reason}")
        return arch

    def build(self, arch: NNIArch, num_classes: int = 10, input_size: int | None = None) -> nn.Module:
        """A fresh network for `arch` (`input_size` is unused: these spaces adapt to any resolution).

        The space's constructor is re-run under NNI's `model_context(sample)`, the route
        NNI's own trial execution takes: only the chosen ops are created, with fresh
        weights shared with nothing. `ModelSpace.freeze(sample)` gives the same network
        but deep-copies the whole supernet (tens of times slower, and its result shares
        modules with the space), and it refuses spaces that register mutables with
        `add_mutable`, which re-running the constructor handles.
        """
        if not isinstance(arch, NNIArch) or arch.model_space != self.identity:
            owner = arch.model_space if isinstance(arch, NNIArch) else type(arch).__name__
            raise InvalidArchError(f"architecture of {owner} given to NNI space {self.identity}")
        num_classes = self.check_num_classes(num_classes)
        sample = arch.sample
        with _quiet_nni():
            from nni.nas.space import model_context

            try:
                with model_context(sample):
                    model = self._cls(**self._init_kwargs(num_classes))
            except Exception as exc:
                raise NasutilError(f"cannot build {arch} in NNI space {self.identity}: {_one_line(exc)}") from exc
        return model.train()

    # -- size -------------------------------------------------------------------

    @property
    def encoding_size(self) -> int:
        return self.schema.encoding_size

    def _product(self) -> int:
        return math.prod(d.count for d in self.schema.dims)

    def size(self) -> int | None:
        """Exact count; with constraints it is counted by enumeration, or None when too large to."""
        if not self._constraints:
            return self._product()
        if self._product() > ENUMERATE_LIMIT:
            return None
        return sum(1 for _ in self.enumerate())

    def enumerate(self) -> Iterator[NNIArch]:
        """Every architecture in `itertools.product` order of the labels and their values."""
        if self._product() > ENUMERATE_LIMIT:
            raise NotEnumerableError(f"NNI space {self.identity} has {self._product():,} architectures "
                                     f"(enumeration stops at {ENUMERATE_LIMIT:,})")
        for choices in itertools.product(*(d.choices() for d in self.schema.dims)):
            arch = self._make(choices)
            if not self._constraints or self._violation(arch.sample) is None:
                yield arch
