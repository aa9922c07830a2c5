"""Build a device profile on the GPU it is for: time the ops the spaces use, measure a few networks, fit.

The operator tables come first and are handed to `on_tables` as soon as they exist (the CLI saves
them), so a build cut short during the network measurements still leaves a usable profile.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence

from nasutil.errors import NasutilError
from nasutil.predictor.prediction import PredictTarget
from nasutil.predictor.profile import DeviceProfile

DEFAULT_SPACES = ("nb201", "mbconv")
DEFAULT_CONFIGS = ((256, "cudagraph"), (256, "eager"), (1, "cudagraph"), (1, "eager"))  # (batch, mode)


def build_profile(device: str = "cuda", spaces: Sequence[str] = DEFAULT_SPACES, *, dtype: str = "fp16",
                  configs: Sequence[tuple[int, str]] = DEFAULT_CONFIGS, op_networks: int = 300, max_ops: int = 2000,
                  networks: int = 6, workers: int | None = None, seed: int = 0,
                  on_tables: Callable[[DeviceProfile], None] | None = None,
                  log: Callable[[str], None] = print, progress: bool = True) -> DeviceProfile:
    """A profile of this machine's GPU for `spaces`: op tables at each (batch, mode) of `configs`, their
    overlap constants fitted to `networks` measured networks per space and configuration. A space or
    configuration named twice is built once: a profile holds one table for each configuration."""
    import torch
    from rich.progress import Progress

    from nasutil.evaluator import Candidate, Evaluator, MeasureConfig
    from nasutil.evaluator.counters import NvmlDevice
    from nasutil.evaluator.run_model import device_name, resolve_device
    from nasutil.predictor.fit import fit_profile
    from nasutil.predictor.op_selection import sampled_ops, select_ops
    from nasutil.predictor.op_timing import measure_tables
    from nasutil.predictor.training_data import skipped_note
    from nasutil.registry import get_space

    if not device.startswith("cuda"):
        raise NasutilError(f"profile build times operators with CUDA graphs and events: it needs a CUDA device "
                           f"(cuda or cuda:N), not {device!r}")
    if not torch.cuda.is_available():
        raise NasutilError("no CUDA device here (profile build measures on the GPU it runs on)")
    spaces = list(dict.fromkeys(spaces))
    if not spaces:
        raise NasutilError("profile build needs at least one space")
    for name in spaces:
        get_space(name)
    started = time.perf_counter()
    resolved = resolve_device(device)
    name = device_name(resolved)
    targets = list(dict.fromkeys(PredictTarget(name, dtype, batch, mode) for batch, mode in configs))
    ops = select_ops(sampled_ops(spaces, op_networks, seed), max_ops, seed)
    with Progress(transient=True, disable=not progress) as bar:
        task = bar.add_task(f"{len(ops)} ops x {len(targets)} configurations", total=len(ops) * len(targets))
        tables = measure_tables(ops, targets, device, progress=lambda: bar.advance(task))
    log(f"timed {len(ops)} ops at {len(targets)} configurations in {time.perf_counter() - started:.0f} s")
    profile = DeviceProfile(device_name=name, driver_version=NvmlDevice.for_torch_device(resolved).driver_version,
                            torch_version=torch.__version__, operators=tables,
                            source=f"built with nasutil profile build: {len(ops)} ops from {', '.join(spaces)}")
    if on_tables is not None:
        on_tables(profile)
    rows = []
    if networks:
        base = MeasureConfig(device=device, dtype=dtype, counters=False, warmup=2, repeats=5, min_window_ms=2.0)
        candidates = [Candidate(space, a.to_string()) for space in spaces
                      for a in get_space(space).sample_many(networks, seed + 1)]
        for target in targets:
            count = workers or max(1, min(8, len(os.sched_getaffinity(0)) // 2))
            with Evaluator(base.with_(batch_size=target.batch_size, mode=target.mode), workers=count) as evaluator:
                results = evaluator.measure_many(candidates, progress=progress, total=len(candidates),
                                                 description=f"networks, batch {target.batch_size} {target.mode}")
                rows += [m.to_dict(with_layers=False) for m in results if m.ok]
    source = (f"built with nasutil profile build: {len(ops)} ops from {', '.join(spaces)}, {len(rows)} network "
              f"measurements, {time.perf_counter() - started:.0f} s")
    if rows:
        skipped: dict[str, int] = {}
        profile = fit_profile(rows, min_rows=50, source=source, base=profile, skipped=skipped)
        note = skipped_note(skipped)  # the rows of a throttled GPU, say
        if note:
            log(note)
    profile.source = source
    return profile
