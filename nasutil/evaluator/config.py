"""How to measure: device, dtype, batch size, execution mode and timing budget."""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import asdict, dataclass, replace

from nasutil.devices import DTYPES
from nasutil.errors import NasutilError
from nasutil.space import MAX_NUM_CLASSES

MODES = ("eager", "cudagraph", "compile")
DEVICE_PATTERN = r"cpu|cuda(:\d+)?"
DEVICE_TURNS = ("whole", "timing", "split")  # what a worker's turn on the device covers (`MeasureConfig.device_turn`)
WEIGHTS = ("host", "device")  # where a measured network's weights are made (`MeasureConfig.weights`)
#: the largest batch measured or predicted: 10**20 overflowed inside torch, and a prediction for it was nonsense
MAX_BATCH_SIZE = 1 << 16
#: the largest input resolution (height and width) a network is measured at
MAX_INPUT_SIZE = 8192


def check_run_settings(dtype: str, mode: str, batch_size: int) -> None:
    """The settings a measurement and a prediction share; a one-line error for a bad one."""
    if dtype not in DTYPES:
        raise NasutilError(f"unknown dtype {dtype!r} (choose from {', '.join(DTYPES)})")
    if mode not in MODES:
        raise NasutilError(f"unknown mode {mode!r} (choose from {', '.join(MODES)})")
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) \
            or not 1 <= batch_size <= MAX_BATCH_SIZE:
        raise NasutilError(f"batch size must be a whole number from 1 to {MAX_BATCH_SIZE}, got {batch_size!r}")


def available_device(name: str, setting: str) -> str:
    """`name` (cpu, cuda or cuda:N) if that device is on this machine; else a one-line error naming `setting`."""
    if not isinstance(name, str) or not re.fullmatch(DEVICE_PATTERN, name):  # None or 3 once failed in re
        raise NasutilError(f"{setting}: unknown device {name!r} (cpu, cuda or cuda:N)")
    if name != "cpu":
        import torch

        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if (int(name.split(":")[1]) if ":" in name else 0) >= count:
            raise NasutilError(f"{setting}: {name} is not on this machine ({count} CUDA device(s))")
    return name


def chosen_device(spec: str, setting: str) -> str:
    """`auto` (cuda where CUDA is available, else cpu), or a device `available_device` accepts."""
    if spec == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return available_device(spec, setting)


#: (setting, least value, most value) of the settings that count something: each bound keeps a measurement
#: within minutes (`repeats` of 10**20 ran until the worker's time limit)
WHOLE_NUMBERS = (("warmup", 0, 10_000), ("repeats", 2, 10_000), ("max_iters_per_window", 1, 1_000_000),
                 ("num_classes", 1, MAX_NUM_CLASSES))
#: (setting, least value, whether it must lie above it) of the settings that measure something
FINITE_NUMBERS = (("min_window_ms", 0.0, False), ("lead_in_ms", 0.0, False), ("cv_threshold", 0.0, True),
                  ("counter_window_ms", 0.0, True), ("counter_tolerance", 0.0, False), ("counter_max_ms", 0.0, True))


@dataclass(frozen=True)
class MeasureConfig:
    """What a measurement runs. Left out, `device` is `auto` (CUDA where it is available, else the CPU),
    and `dtype`, `batch_size` and `mode` are the device's defaults, as `nasutil measure` takes them: fp16,
    256 and a CUDA graph on a GPU; fp32, 8 and eager on the CPU."""

    device: str = "auto"
    dtype: str = None  # type: ignore[assignment]  (resolved from the device)
    batch_size: int = None  # type: ignore[assignment]
    mode: str = None  # type: ignore[assignment]
    channels_last: bool = True
    input_size: int | None = None  # None: the space's default
    num_classes: int = 10
    warmup: int = 3
    repeats: int = 7  # timed windows
    min_window_ms: float = 5.0  # each window runs enough iterations to last this long
    max_iters_per_window: int = 200
    lead_in_ms: float = 0.0  # untimed calls for this long before the timed windows
    cv_threshold: float = 0.05  # a result noisier than this is re-measured, then flagged
    counters: bool = True  # NVML GPM counters over extra windows, until two successive ones agree
    counter_window_ms: float = 500.0  # each counter window lasts this long
    counter_tolerance: float = 2.0  # percentage points within which two windows agree
    counter_max_ms: float = 4000.0  # counter windows stop here, converged or not
    per_layer: bool = False
    # run the model eagerly twice before capturing its CUDA graph; False skips that in a worker that has
    # captured before, where library handles and workspaces already exist (see `fast`)
    eager_warm_up: bool = True
    # what a worker's turn on the device covers: "whole" (copy, capture and timing; the default), "split"
    # (two turns, the copy in one and the timing in the other, a capture without eager warm-up between them
    # outside both) or "timing" (timing, counters and profiling; the copy and a capture without eager
    # warm-up outside it). With the copies and the capture outside the turn, the other workers' work
    # lengthened timed windows; "split" leaves out only the capture, which records and launches nothing, and
    # read the cells as one turn did. "timing" is meant for workers that share one context through CUDA MPS
    # (`nvidia-cuda-mps-control -d` before they start).
    device_turn: str = "whole"
    # where a network's weights are made: "host" (built there and copied to the device, one copy a tensor) or
    # "device" (built without storage, given device memory outside the turn where the allocator's cache holds
    # it, inside otherwise, and filled there inside it:
    # values of the scale a built network has, not the same values; `nasutil.evaluator.weights`). "device"
    # serves spaces that list their ops (nb201, mbconv) in measurements without per-layer profiles, and
    # graphs captured without an eager warm-up (a worker's first network is copied); other networks are
    # built on the host.
    weights: str = "host"

    def __post_init__(self) -> None:
        if not isinstance(self.device, str):
            raise NasutilError(f"device must be text (cpu, cuda, cuda:N or auto), got {self.device!r}")
        if self.device == "auto":
            object.__setattr__(self, "device", chosen_device("auto", "device"))
        on_cpu = self.device == "cpu"
        for name, gpu, cpu in (("dtype", "fp16", "fp32"), ("batch_size", 256, 8), ("mode", "cudagraph", "eager")):
            if getattr(self, name) is None:
                object.__setattr__(self, name, cpu if on_cpu else gpu)
        check_run_settings(self.dtype, self.mode, self.batch_size)
        if not re.fullmatch(DEVICE_PATTERN, self.device):
            raise NasutilError(f"unknown device {self.device!r} (use cpu, cuda or cuda:N)")
        if self.mode == "cudagraph" and self.device == "cpu":
            raise NasutilError("mode 'cudagraph' needs a CUDA device (use eager or compile on CPU)")
        for name, least, most in WHOLE_NUMBERS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not least <= value <= most:
                raise NasutilError(f"{name} must be a whole number from {least} to {most:,}, got {value!r}")
        for name, least, above in FINITE_NUMBERS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) \
                    or value < least or (above and value == least):
                raise NasutilError(f"{name} must be a finite number {'>' if above else '>='} {least:g}, got {value!r}")
        if self.counter_max_ms < self.counter_window_ms:
            raise NasutilError("counter windows need counter_max_ms >= counter_window_ms")
        if self.device_turn not in DEVICE_TURNS:
            raise NasutilError(f"device_turn must be one of {', '.join(DEVICE_TURNS)}, got {self.device_turn!r}")
        if self.weights not in WEIGHTS:
            raise NasutilError(f"weights must be one of {', '.join(WEIGHTS)}, got {self.weights!r}")
        for name in ("channels_last", "counters", "per_layer", "eager_warm_up"):
            if not isinstance(getattr(self, name), bool):
                raise NasutilError(f"{name} must be True or False, got {getattr(self, name)!r}")
        size = self.input_size
        if size is not None and (isinstance(size, bool) or not isinstance(size, numbers.Integral)
                                 or not 1 <= size <= MAX_INPUT_SIZE):
            raise NasutilError(f"input size must be a whole number from 1 to {MAX_INPUT_SIZE}, got {size!r}")

    def fast(self) -> MeasureConfig:
        """Settings for measuring a whole space: 4 windows of >= 0.5 ms after one warm-up, timed again with
        longer windows where their CV exceeds 1%, no counters, CUDA graphs captured without eager warm-up
        runs once the worker has captured one, and that capture outside the worker's turn on the device
        (`device_turn="split"`, whatever was asked but "timing", which is kept for workers under MPS;
        `.fast().with_(device_turn="whole")` keeps one turn for all), and the weights made on the device
        (`weights="device"`) in place of a copy a tensor inside the turn; `.fast().with_(weights="host")` copies.
        On an H100 with 8 workers the weights made on the device held the turn 17 ms a cell against 22, read 200
        fresh cells within 1.18% of the default settings (0.22% at the median), and measured all 15,625
        NAS-Bench-201 cells in 4.0 minutes against 5.3 with the copies, the two tables within 1.79% of each
        other cell by cell (BENCHMARKS.md, "A worker's first network copied").

        Most NAS-Bench-201 cells at batch 256 take 1.5-3.3 ms a forward on an H100, so a window is one
        forward: 5 windows of >= 2 ms (one forward or two) agreed with the default settings as closely on 200
        fresh cells (0.30% against 0.36% at the median, 1.16% against 1.07% at worst) and took 1.2x as long a
        timing (BENCHMARKS.md, "Shorter fast timings"). On H100s the split turn measured 1.27-1.30x as many
        cells a second as one turn for all, reading them within 0.22-0.29% of the default settings at the
        median (BENCHMARKS.md, "The capture outside the turn"). BENCHMARKS.md measures its rate and
        repeatability against the defaults and a plain timing loop."""
        return replace(self, warmup=1, repeats=4, min_window_ms=0.5, cv_threshold=0.01, counters=False,
                       eager_warm_up=False, device_turn="timing" if self.device_turn == "timing" else "split",
                       weights="device")

    def with_(self, **changes) -> MeasureConfig:
        return replace(self, **changes)

    def to_dict(self) -> dict:
        return asdict(self)
