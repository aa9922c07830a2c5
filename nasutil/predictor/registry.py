"""Predictor kinds: the interface every kind implements, one registry of them, one entry point.

A kind is a `Predictor` subclass. The built-in kinds live one file each in `nasutil/predictor/kinds/`
and are found there by name, so adding one is adding one file; a third-party package registers its
kinds under the `nasutil.predictors` entry-point group; a Hydra config may also name any subclass
directly (`predictor._target_: my_package.MyPredictor`). `predict_many` lists each candidate's ops
once, so every kind (and the params of every prediction) works from the same listing.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from nasutil.arch import Arch
from nasutil.devices import same_device
from nasutil.errors import NasutilError, did_you_mean
from nasutil.ops import Op, network_flops, network_params
from nasutil.plugins import Registry
from nasutil.predictor.op_tables import op_kind
from nasutil.predictor.prediction import Prediction, PredictTarget, prediction_from_latency
from nasutil.predictor.profile import DeviceProfile, load_profile
from nasutil.space import SearchSpace

ENTRY_POINT_GROUP = "nasutil.predictors"
DEFAULT_PROFILE = "h200"


@dataclass(frozen=True)
class Candidates:
    """Architectures of one space, parsed and with their ops listed once: what a kind predicts from."""

    space_spec: str
    space: SearchSpace
    archs: list[Arch]
    ops: list[list[Op]]  # one listing per arch (empty where the kind does not use ops)


class Predictor(ABC):
    """Predicts the latency of candidate networks on a target without running them there."""

    #: the kind's name on the command line and in configs
    name: ClassVar[str]
    #: whether `latencies_ms` reads `Candidates.ops` (listing them is most of a prediction's cost)
    uses_ops: ClassVar[bool] = True

    @property
    @abstractmethod
    def device_name(self) -> str:
        """The device this predictor knows (a profile's GPU, say)."""

    @property
    def content_digest(self) -> str | None:
        """A digest of the content of what this predictor reads (a profile, a table), or None where it reads
        nothing of the kind: a study stores it, so that the file changed under the same name is refused
        and the same file reached by another name is not."""
        return None

    def target(self, dtype: str = "fp16", batch_size: int = 256, mode: str = "cudagraph") -> PredictTarget:
        return PredictTarget(self.device_name, dtype, int(batch_size), mode)

    def check_device(self, target: PredictTarget) -> None:
        """A target on another device than the one this predictor knows is refused in one line: its figures
        would be this device's under the other's name (an unknown name once got the H200's, marked validated)."""
        check_target(target)
        known = self.device_name
        if not known or not target.device_name:
            return  # a predictor that does not know its device (a table, say) answers for any
        if not same_device(known, target.device_name):
            raise NasutilError(f"{self.name} predicts for {known}, not {target.device_name!r} (give a profile of "
                               f"that device, or leave the target's device to the predictor)")

    def check(self, space_spec: str, target: PredictTarget) -> None:
        """Raise a one-line NasutilError, before any prediction, if this kind cannot serve the space at the target."""

    def answering(self, space_spec: str, target: PredictTarget) -> str:
        """The name of the model whose figures the predictions carry (`auto` names the one it chose)."""
        return self.name

    def expected_error(self, space_spec: str, target: PredictTarget) -> float | None:
        """Held-out mean relative latency error for the space at the target, where it is known."""
        return None

    def unvalidated_reasons(self, candidates: Candidates, target: PredictTarget) -> list[str | None]:
        """For each candidate, what the model never saw that its prediction rests on (None: nothing). By
        default: a space without a held-out error at the target was never validated."""
        if self.expected_error(candidates.space_spec, target) is not None:
            return [None] * len(candidates.archs)
        return [f"{self.name} was never validated on {candidates.space_spec} at {target.key}"] * len(candidates.archs)

    @abstractmethod
    def latencies_ms(self, candidates: Candidates, target: PredictTarget) -> list[float]:
        """Predicted median latency of one batch, for each candidate."""

    def describe(self) -> str:
        """One line for summaries."""
        return self.name

    def predict_many(self, space: str | SearchSpace, archs: Sequence[str | Arch], target: PredictTarget,
                     input_size: int | None = None) -> list[Prediction]:
        """Predictions for many archs of one space at once (learned models score a batch in one pass,
        which is what makes them cheap per candidate)."""
        self.check_device(target)
        with one_thread():
            candidates = self.candidates(space, archs, input_size)
            self.check(candidates.space_spec, target)
            latencies = self.latencies_ms(candidates, target)
            reasons = self.unvalidated_reasons(candidates, target)
        answered_by = self.answering(candidates.space_spec, target)
        error = self.expected_error(candidates.space_spec, target)
        return [prediction_from_latency(network_flops(ops) if self.uses_ops else None, target, latency, answered_by,
                                        candidates.space_spec, arch.to_string(),
                                        int(network_params(ops)) if self.uses_ops else None, error, reason)
                for arch, ops, latency, reason in zip(candidates.archs, candidates.ops, latencies, reasons)]

    def candidates(self, space: str | SearchSpace, archs: Sequence[str | Arch],
                   input_size: int | None = None) -> Candidates:
        space_spec, space = _space(space)
        if isinstance(archs, (str, bytes)) or not isinstance(archs, Iterable):
            raise NasutilError(f"archs must be a list of architectures (their text or Arch objects), got "
                               f"{type(archs).__name__}" + (" (put one arch in a list)" if isinstance(archs, str) else ""))
        parsed = [space.as_arch(a) for a in archs]  # another space's Arch is refused here, in one line
        if not self.uses_ops:
            return Candidates(space_spec, space, parsed, [[] for _ in parsed])
        input_size = space.check_input_size(input_size)
        return Candidates(space_spec, space, parsed, [space.operators(arch, input_size=input_size) for arch in parsed])


@contextmanager
def one_thread() -> Iterator[None]:
    """Predicting is small CPU work (listing ops, tracing tiny networks, scoring a few rows with a learned
    model) for which extra threads only contend and spin, badly so beside other busy processes: on a
    loaded 2-core machine the shipped nb201 model's first fit took 88 s with two threads and 5 s with
    one. (Fitting a learned model caps its own threads; a saved one needs none.) Torch is capped where it
    is already loaded, or loads during the prediction: a space that lists its own ops never loads it."""
    import sys

    if "torch" not in sys.modules:
        yield
        if "torch" in sys.modules:  # loaded on the way (a network traced): capped from now on
            sys.modules["torch"].set_num_threads(1)
        return
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _space(space: str | SearchSpace) -> tuple[str, SearchSpace]:
    from nasutil.registry import get_space

    if isinstance(space, str):
        return space, get_space(space)
    return space.name, space


# ---- profiles, loaded once per process ----

_PROFILES: dict[tuple, DeviceProfile] = {}


def open_profile(profile: str | Path | DeviceProfile) -> DeviceProfile:
    """A profile object, or a shipped name or JSON path loaded once per process (profiles refit their learned
    models on first use, which takes seconds); a file is read again once it has been modified."""
    if isinstance(profile, DeviceProfile):
        return profile
    path = Path(profile)
    key = (str(path.resolve()), path.stat().st_mtime_ns) if path.is_file() else (str(profile),)
    if key not in _PROFILES:
        _PROFILES[key] = load_profile(str(profile))
    return _PROFILES[key]


class ProfileKind(Predictor, ABC):
    """A kind that predicts from a device profile (a shipped name, a JSON path or a loaded profile)."""

    def __init__(self, profile: str | Path | DeviceProfile = DEFAULT_PROFILE) -> None:
        # a loaded profile is named by its device, never by str(): its repr spells out every fitted model,
        # and a search builds a kind for each prediction (that repr once took seconds of a search's start)
        self.profile_label = (profile if isinstance(profile, str)
                              else profile.device_name if isinstance(profile, DeviceProfile) else str(profile))
        self.profile = open_profile(profile)

    @property
    def device_name(self) -> str:
        return self.profile.device_name

    @property
    def content_digest(self) -> str | None:
        return self.profile.digest

    def describe(self) -> str:
        return f"{self.profile_label} profile ({self.device_name}), {self.name}"

    def expected_error(self, space_spec: str, target: PredictTarget) -> float | None:
        """The held-out error the profile scored for this kind when it was fitted to the space's networks."""
        entry = self.profile.learned_for(space_spec, target.dtype, target.batch_size, target.mode)
        return entry.validation.get(self.answering(space_spec, target)) if entry is not None else None

    def unvalidated_reasons(self, candidates: Candidates, target: PredictTarget) -> list[str | None]:
        """Besides a space the profile was never validated on: kinds of op (family, kernel, stride, dilation,
        variant) that its operator table never timed at the target, which the model interpolates."""
        space_note = None
        if self.expected_error(candidates.space_spec, target) is None:
            space_note = f"the {self.profile_label} profile was never validated on {candidates.space_spec} at {target.key}"
        timed = self.profile.timed_op_kinds(target.dtype, target.batch_size, target.mode) if self.uses_ops else None
        out: list[str | None] = []
        for ops in candidates.ops:
            notes = [space_note] if space_note else []
            if timed is not None:
                unseen = sorted({op_kind(op) for op in ops} - timed)
                if unseen:
                    shown = ", ".join(unseen[:3]) + (f" and {len(unseen) - 3} more" if len(unseen) > 3 else "")
                    notes.append(f"{len(unseen)} kind{'s' if len(unseen) > 1 else ''} of op never timed ({shown})")
            out.append("; ".join(notes) or None)
        return out


# ---- the registry ----


def _accept(value: object, name: str) -> type[Predictor]:
    if not (isinstance(value, type) and issubclass(value, Predictor)):
        raise TypeError("it is not a nasutil Predictor subclass")
    return value


# The built-in kinds are entry points of nasutil itself (pyproject.toml), found as a plugin's are; the kinds
# import this module, never the other way round.
KINDS: Registry[type[Predictor]] = Registry(ENTRY_POINT_GROUP, "predictor", _accept, owner=__name__,
                                            unknown="unknown {kind} {name!r} (choose from {known})")


def register_predictor(cls: type[Predictor]) -> type[Predictor]:
    """Register a predictor kind under its `name` (usable as a class decorator)."""
    return KINDS.register(getattr(cls, "name", repr(cls)), cls)


def predictor_names() -> list[str]:
    return sorted(KINDS.names())


def predictor_class(kind: str) -> type[Predictor]:
    return KINDS.get(kind)


def check_target(target: object) -> None:
    """A target that is not a PredictTarget (a tuple of its four fields, say) is refused in one line."""
    if not isinstance(target, PredictTarget):
        raise NasutilError(f"target must be a PredictTarget(device_name, dtype, batch_size, mode), got "
                           f"{type(target).__name__}")


def make_predictor(kind: str = "auto", **options: Any) -> Predictor:
    """A predictor of a registered kind, given the options its constructor takes (e.g. `profile`, `path`);
    options it does not take are an error only if they are set, and one it needs is an error if missing."""
    cls = predictor_class(kind)
    parameters = dict(inspect.signature(cls.__init__).parameters)
    parameters.pop("self", None)
    accepted = set(parameters)
    unknown = sorted(k for k, v in options.items() if k not in accepted and v is not None)
    if unknown:
        raise NasutilError(f"predictor {kind!r} takes no option {', '.join(unknown)}{did_you_mean(unknown, accepted)} "
                           f"(takes: {', '.join(sorted(accepted)) or 'none'})")
    given = {k: v for k, v in options.items() if k in accepted}
    needed = sorted(name for name, p in parameters.items() if p.default is inspect.Parameter.empty
                    and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and name not in given)
    if needed:
        raise NasutilError(f"predictor {kind!r} needs {', '.join(needed)} (make_predictor({kind!r}, "
                           f"{needed[0]}=...), or pass a Predictor object as `predictor`)")
    return cls(**given)


def predict_many(space: str | SearchSpace, archs: Sequence[str | Arch], target: PredictTarget | None = None, *,
                 predictor: str | Predictor = "auto", profile: str | Path | DeviceProfile = DEFAULT_PROFILE,
                 input_size: int | None = None) -> list[Prediction]:
    """Predicted latency, throughput, utilization, FLOPs and params of each arch, by one predictor kind.

    `target` defaults to fp16, batch 256, CUDA graph on the profile's device."""
    if not isinstance(predictor, Predictor):
        takes_profile = "profile" in inspect.signature(predictor_class(predictor).__init__).parameters
        predictor = make_predictor(predictor, **({"profile": profile} if takes_profile else {}))
    if target is not None:
        check_target(target)
    return predictor.predict_many(space, archs, target or predictor.target(), input_size)
