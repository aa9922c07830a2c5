"""What a search asks of a predictor: the figures of one candidate on the target GPU, cheaply.

The search talks to this small interface only, so that the predictor behind it (a device profile
now, faster or different models later, or a table computed once) can change freely.
"""

from __future__ import annotations

import csv
import math
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from pathlib import Path

from nasutil.errors import NasutilError
from nasutil.space import SearchSpace


@dataclass(frozen=True)
class Scored:
    """Predicted figures of one candidate (latency and throughput per batch of the target's size)."""

    arch: str
    predictor: str
    device_name: str
    latency_ms: float
    throughput_per_s: float
    utilization: float | None
    flops_per_image: int | None
    params: int | None

    def to_dict(self) -> dict:
        return asdict(self)


class CandidatePredictor(ABC):
    """Scores architectures of one space without a GPU."""

    #: one line for the summary, e.g. "h200 profile, learned, fp16, batch 256, cudagraph"
    description: str = ""

    @abstractmethod
    def score(self, arch_text: str) -> Scored:
        """Predicted figures for a canonical arch string of the space."""


class ProfilePredictor(CandidatePredictor):
    """A device profile's predictor (`nasutil.predictor.fit.predict`), cached per arch string."""

    def __init__(self, space: SearchSpace, space_spec: str, profile: str, model: str = "auto",
                 dtype: str = "fp16", batch_size: int = 256, mode: str = "cudagraph") -> None:
        from nasutil.predictor.base import PredictTarget

        self.space, self.space_spec, self.model = space, space_spec, model
        self.profile = _load_profile(profile)
        self.target = PredictTarget(self.profile.device_name, dtype, int(batch_size), mode)
        self.description = f"{profile} profile ({self.profile.device_name}), {model}, {dtype}, batch {batch_size}, {mode}"
        self._cache: dict[str, Scored] = {}

    def score(self, arch_text: str) -> Scored:
        if arch_text not in self._cache:
            import torch

            from nasutil.predictor.fit import predict

            threads = torch.get_num_threads()
            torch.set_num_threads(1)  # tiny CPU-side builds: threads only contend (and spin) with each other
            try:
                p = predict(self.space, self.space_spec, arch_text, self.profile, self.target, predictor=self.model)
                params = count_params_of(self.space, arch_text)
            finally:
                torch.set_num_threads(threads)
            if not self.description.endswith(f"-> {p.predictor}"):
                self.description = f"{self.description.split(' -> ')[0]} -> {p.predictor}"
            self._cache[arch_text] = Scored(arch_text, p.predictor, p.device_name, p.latency_ms, p.throughput_per_s,
                                            p.utilization, p.flops_per_image, params)
        return self._cache[arch_text]


class TablePredictor(CandidatePredictor):
    """Predictions computed once and stored as CSV (a plain text table; nothing in it is executed)."""

    REQUIRED = ("arch", "latency_ms", "throughput_per_s", "utilization")

    def __init__(self, path: str | Path, space: SearchSpace) -> None:
        path = Path(path)
        try:
            with path.open(newline="") as f:
                rows = list(csv.DictReader(f))
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            raise NasutilError(f"cannot read prediction table {str(path)!r}: {exc}") from None
        missing = [c for c in self.REQUIRED if not rows or c not in rows[0]]
        if missing:
            raise NasutilError(f"prediction table {str(path)!r} lacks column(s) {', '.join(missing)}")
        self._rows: dict[str, Scored] = {}
        for number, row in enumerate(rows, start=2):
            try:
                arch = space.parse(row["arch"]).to_string()
                self._rows[arch] = Scored(
                    arch, row.get("predictor") or "table", row.get("device_name") or "", float(row["latency_ms"]),
                    float(row["throughput_per_s"]), _optional(row["utilization"], float),
                    _optional(row.get("flops_per_image"), int), _optional(row.get("params"), int))
            except (ValueError, NasutilError) as exc:
                raise NasutilError(f"{path}:{number}: {exc}") from None
        self.description = f"table {path.name} ({len(self._rows)} architectures)"

    def score(self, arch_text: str) -> Scored:
        try:
            return self._rows[arch_text]
        except KeyError:
            raise NasutilError(f"architecture {arch_text} is not in the prediction table") from None


def count_params_of(space: SearchSpace, arch_text: str) -> int:
    """Parameters from the space's operator list where it has one (no network built), else counted."""
    arch = space.parse(arch_text)
    if hasattr(space, "operators"):
        from nasutil.operators import network_params

        return int(network_params(space.operators(arch)))
    from nasutil.counting import count_params

    return count_params(space.build(arch))


_PROFILES: dict[tuple, object] = {}


def _load_profile(name_or_path: str):
    """Profiles refit their models on load (seconds); keep each loaded one for the process's life,
    keyed by name, or by path and modification time so an edited file is read again."""
    from nasutil.predictor.profile import load_profile

    path = Path(name_or_path)
    key = (str(path.resolve()), path.stat().st_mtime_ns) if path.is_file() else (name_or_path,)
    if key not in _PROFILES:
        _PROFILES[key] = load_profile(name_or_path)
    return _PROFILES[key]


def _optional(text: str | None, kind: type):
    if text in (None, ""):
        return None
    value = kind(float(text)) if kind is int else kind(text)
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"non-finite number {text!r}")
    return value


def make_predictor(cfg: dict, space: SearchSpace, space_spec: str) -> CandidatePredictor:
    """The predictor named by the `predictor` config group."""
    name = cfg.get("name")
    if name == "profile":
        return ProfilePredictor(space, space_spec, str(cfg.get("profile", "h200")), str(cfg.get("model", "auto")),
                                str(cfg.get("dtype", "fp16")), int(cfg.get("batch_size", 256)),
                                str(cfg.get("mode", "cudagraph")))
    if name == "table":
        return TablePredictor(cfg["path"], space)
    raise NasutilError(f"unknown predictor {name!r} (choose from profile, table)")
