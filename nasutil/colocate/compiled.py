"""Networks compiled by Inductor before they are co-located: fewer, fused kernels in each one.

A co-located group of small candidates is bound by the number of kernels the GPU works through, not by
their arithmetic: in a plain NAS-Bench-201 network every ReLU, BatchNorm and sum is a kernel of its own
(306 kernels a forward). Inductor fuses the element-wise rest into a few generated kernels (75 a
forward on an H200, weights frozen). The weights stay the compiled graphs' inputs by default: frozen
(BatchNorm folded into the convolutions) the networks ran no faster on an H200, within 0.4% at batch 1,
32 and 256, and compiling a group took 1.6-1.8x longer, because AOTAutograd's cache cannot serve frozen
graphs. The compiled networks are then captured in CUDA graphs by the strategies that run networks as
they are (`sequential`, `streams`), exactly as plain ones are; `fused` builds networks of its own and
falls back.

Compiling costs time, paid once per architecture, input shape and process (networks of one
architecture share their compiled code): 14-17 s for an NB201 network's inference on a 16-core host with
an H200, one network after another. Where the host has the cores, child processes compile a group's
networks side by side first and this process finds their code in Inductor's and AOTAutograd's caches
(`nasutil.colocate.compile_cache`): about 6 s a network for 16, and 14-22 s a candidate's training step
for 8 to 32. It pays for a network that runs or trains for long.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Sequence

import torch
import torch.nn as nn

from nasutil.colocate.compile_cache import many_networks

#: Dynamo is not safe to compile from several threads at once (a population trains in threads)
COMPILE_LOCK = threading.RLock()

#: Inductor's options for training steps
TRAINING_OPTIONS: dict[str, object] = {}


def compile_for_inference(models: Sequence[nn.Module], inputs: Sequence[torch.Tensor],
                          progress: Callable[[int, int, float], None] | None = None,
                          workers: int | None = None, freezing: bool = False) -> list[nn.Module]:
    """Each model compiled for its input (static shapes) and run once, so that compilation happens here and
    not inside a strategy's warm-up. Call under `torch.inference_mode()` with the models in eval mode;
    `progress(done, total, seconds)` after each.

    `workers` child processes (default: `$NASUTIL_COMPILE_WORKERS`, else half the cores, at most 16;
    fewer than 2: none) compile the networks side by side first, so that each compilation here finds
    its code in Inductor's cache; a network this process compiled before for the same input and options
    (a second strategy over the same group) is not sent to them. The weights stay the graphs' inputs, which
    lets AOTAutograd's cache serve this process too; freezing=True folds them in (and BatchNorm into the
    convolutions)."""
    from nasutil.colocate.compile_cache import MIN_WORKERS, CompileCacheWarmer, default_workers, wait_quietly

    options = inference_options(freezing)
    keys = [_compiled_for(x, options) for x in inputs]
    new = [key not in _COMPILED_HERE.get(m, ()) for m, key in zip(models, keys)]
    workers = default_workers() if workers is None else workers
    warmer = CompileCacheWarmer(workers) if workers >= MIN_WORKERS and sum(new) > 1 else None
    compiled = []
    try:
        ready = [warmer.submit(m, x, options=options) if fresh else None
                 for m, x, fresh in zip(models, inputs, new)] if warmer else []
        with COMPILE_LOCK, many_networks():
            for n, (model, x) in enumerate(zip(models, inputs)):
                start = time.perf_counter()
                if ready:
                    wait_quietly(ready[n])
                fast = torch.compile(model, dynamic=False, options=dict(options))
                fast(x)
                _COMPILED_HERE.setdefault(model, set()).add(keys[n])
                compiled.append(fast)
                if progress is not None:
                    progress(n + 1, len(models), time.perf_counter() - start)
    finally:
        if warmer is not None:
            warmer.close()
    return compiled


#: what each network was compiled for in this process: Dynamo keeps that code, so children need not warm it
_COMPILED_HERE: weakref.WeakKeyDictionary[nn.Module, set[tuple]] = weakref.WeakKeyDictionary()


def inference_options(freezing: bool = False) -> dict[str, object]:
    """Inductor's options for a network's inference: the weights frozen (folded in) or kept as inputs."""
    return {"freezing": freezing}


def _compiled_for(x: torch.Tensor, options: dict[str, object]) -> tuple:
    return (str(x.device), tuple(x.shape), tuple(x.stride()), x.dtype, tuple(sorted(options.items())))


def compile_for_training(model: nn.Module) -> nn.Module:
    """The model compiled for training steps (forward and backward; it shares the model's parameters and
    buffers). Compilation happens at its first call, which must hold `COMPILE_LOCK` and `many_networks()`."""
    return torch.compile(model, dynamic=False, options=dict(TRAINING_OPTIONS))
