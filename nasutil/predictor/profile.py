"""Device profiles: what a predictor knows about one GPU, as plain versioned JSON.

A profile holds the device's identity (name, driver, torch version, date), optional
analytical-model constants per dtype and mode (from `analytical.calibrate`; defaults where
absent), and learned latency models per space and configuration (stored as their training
rows, refitted on load). Loading one reads JSON
and numbers only; it never executes anything from the file.
"""

from __future__ import annotations

import datetime as dt
import importlib.resources
import json
from dataclasses import dataclass, field
from pathlib import Path

from nasutil.errors import NasutilError
from nasutil.predictor.analytical import KernelModel
from nasutil.predictor.learned import LearnedLatencyModel

PROFILE_FORMAT = "nasutil-device-profile"
PROFILE_VERSION = 1


@dataclass
class LearnedEntry:
    space: str
    dtype: str
    batch_size: int
    mode: str
    features: str  # "encoding" or "encoding+operators"
    model: LearnedLatencyModel
    rows: int

    def matches(self, space: str, dtype: str, batch_size: int, mode: str) -> bool:
        return (self.space, self.dtype, self.batch_size, self.mode) == (space, dtype, batch_size, mode)


@dataclass
class DeviceProfile:
    device_name: str
    driver_version: str | None = None
    torch_version: str | None = None
    created: str = field(default_factory=lambda: dt.date.today().isoformat())
    source: str = ""
    analytical: dict[str, KernelModel] = field(default_factory=dict)  # "dtype/mode" -> constants
    learned: list[LearnedEntry] = field(default_factory=list)

    def kernel_model(self, dtype: str, mode: str) -> KernelModel:
        return self.analytical.get(f"{dtype}/{mode}", KernelModel())

    def learned_for(self, space: str, dtype: str, batch_size: int, mode: str) -> LearnedEntry | None:
        return next((e for e in self.learned if e.matches(space, dtype, batch_size, mode)), None)

    def to_dict(self) -> dict:
        return {
            "format": PROFILE_FORMAT, "version": PROFILE_VERSION, "device_name": self.device_name,
            "driver_version": self.driver_version, "torch_version": self.torch_version, "created": self.created,
            "source": self.source, "analytical": {k: v.to_dict() for k, v in self.analytical.items()},
            "learned": [{"space": e.space, "dtype": e.dtype, "batch_size": e.batch_size, "mode": e.mode,
                         "features": e.features, "rows": e.rows, "model": e.model.to_dict()} for e in self.learned],
        }

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), separators=(",", ":")))

    @classmethod
    def from_dict(cls, data: dict) -> DeviceProfile:
        if not isinstance(data, dict) or data.get("format") != PROFILE_FORMAT:
            raise NasutilError("not a nasutil device profile")
        if data.get("version") != PROFILE_VERSION:
            raise NasutilError(f"unsupported profile version {data.get('version')!r} (this nasutil reads "
                               f"version {PROFILE_VERSION})")
        try:
            learned = [LearnedEntry(e["space"], e["dtype"], int(e["batch_size"]), e["mode"], e["features"],
                                    LearnedLatencyModel.from_dict(e["model"]), int(e["rows"]))
                       for e in data.get("learned", [])]
            analytical = {k: KernelModel.from_dict(v) for k, v in data.get("analytical", {}).items()}
            return cls(device_name=str(data["device_name"]), driver_version=data.get("driver_version"),
                       torch_version=data.get("torch_version"), created=str(data.get("created", "")),
                       source=str(data.get("source", "")), analytical=analytical, learned=learned)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise NasutilError(f"malformed device profile: {exc}") from None


def builtin_profiles() -> list[str]:
    folder = importlib.resources.files("nasutil.data").joinpath("profiles")
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".json")) if folder.is_dir() else []


def load_profile(name_or_path: str) -> DeviceProfile:
    """A shipped profile by name (e.g. `h200`) or a profile JSON file by path."""
    path = Path(name_or_path)
    if path.suffix == ".json" or path.exists():
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise NasutilError(f"cannot read profile {name_or_path!r}: {exc}") from None
    else:
        resource = importlib.resources.files("nasutil.data").joinpath("profiles", f"{name_or_path}.json")
        if not resource.is_file():
            known = ", ".join(builtin_profiles()) or "none"
            raise NasutilError(f"unknown profile {name_or_path!r} (shipped: {known}; or give a .json path)")
        text = resource.read_text()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NasutilError(f"profile {name_or_path!r} is not valid JSON: {exc}") from None
    return DeviceProfile.from_dict(data)
