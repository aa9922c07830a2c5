"""What a device can do: datasheet peaks keyed by device name and dtype, and device facts.

Peaks are dense (no structured sparsity) tensor-core figures for fp16/bf16/tf32 and CUDA-core
figures for fp32, in TFLOP/s, from the vendors' datasheets for the SXM/standard board
of each part. They are the denominators of the headline utilization.
"""

from __future__ import annotations

import platform
import re
from dataclasses import dataclass

DTYPES = ("fp32", "tf32", "fp16", "bf16")


@dataclass(frozen=True)
class DeviceSpec:
    """Datasheet figures of one GPU model."""

    name: str
    pattern: str  # regex matched against torch.cuda.get_device_name()
    peak_tflops: dict[str, float | None]
    memory_bandwidth_gbs: float
    sm_count: int

    def peak(self, dtype: str) -> float | None:
        return self.peak_tflops.get(dtype)


def _spec(name: str, pattern: str, fp32: float, tf32: float | None, fp16: float, bf16: float | None,
          bandwidth: float, sms: int) -> DeviceSpec:
    return DeviceSpec(name, pattern, {"fp32": fp32, "tf32": tf32, "fp16": fp16, "bf16": bf16}, bandwidth, sms)


#: Ordered: the first pattern that matches wins (so "H100 PCIe" precedes "H100").
DATASHEET: tuple[DeviceSpec, ...] = (
    _spec("H200 NVL", r"H200.*NVL", 60.0, 417.5, 835.5, 835.5, 4800, 132),
    _spec("H200", r"H200", 66.9, 494.7, 989.4, 989.4, 4800, 132),
    _spec("H100 PCIe", r"H100.*PCIe", 51.2, 378.0, 756.0, 756.0, 2000, 114),
    _spec("H100 NVL", r"H100.*NVL", 60.0, 417.5, 835.5, 835.5, 3900, 132),
    _spec("H100", r"H100", 66.9, 494.7, 989.4, 989.4, 3350, 132),
    _spec("A100 40GB", r"A100.*40GB", 19.5, 156.0, 312.0, 312.0, 1555, 108),
    _spec("A100", r"A100", 19.5, 156.0, 312.0, 312.0, 2039, 108),
    _spec("L40S", r"L40S", 91.6, 183.0, 362.0, 362.0, 864, 142),
    _spec("L4", r"\bL4\b", 30.3, 60.0, 121.0, 121.0, 300, 58),
    _spec("A10", r"\bA10\b", 31.2, 62.5, 125.0, 125.0, 600, 72),
    _spec("T4", r"\bT4\b", 8.1, None, 65.0, None, 320, 40),
    _spec("V100 PCIe", r"V100.*PCIE", 14.0, None, 112.0, None, 900, 80),
    _spec("V100", r"V100", 15.7, None, 125.0, None, 900, 80),
)


def lookup(device_name: str) -> DeviceSpec | None:
    """The datasheet entry for a device name as CUDA reports it, or None if unknown."""
    for spec in DATASHEET:
        if re.search(spec.pattern, device_name, flags=re.IGNORECASE):
            return spec
    return None


def same_device(a: str, b: str) -> bool:
    """Two device names for one device: the same datasheet entry, or the same name apart from case."""
    known = lookup(a)
    return (known is not None and known == lookup(b)) or a.casefold() == b.casefold()


def datasheet_peak_tflops(device_name: str, dtype: str) -> float | None:
    spec = lookup(device_name)
    return spec.peak(dtype) if spec else None


def cpu_name() -> str:
    """A readable CPU model name (falls back to the architecture)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"
