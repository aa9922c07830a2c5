"""Networks compiled by Inductor before they are co-located: fewer, fused kernels in each one.

A co-located group of small candidates is bound by the number of kernels the GPU works through, not by
their arithmetic: in a plain NAS-Bench-201 network every ReLU, BatchNorm and sum is a kernel of its own
(306 kernels a forward). Inductor folds BatchNorm into the convolutions (freezing) and fuses the
element-wise rest into a few generated kernels (75 a forward on an H200). The compiled networks are then
captured in CUDA graphs by any strategy, exactly as plain ones are.

Compiling costs time, paid once per architecture, input shape and process (networks of one
architecture share their compiled code): 14-16 s for an NB201 network's inference on a 16-core host with
an H200, and far longer for a training step's forward and backward (two candidates' steps were not ready
after 190 s there). It pays for a network that runs or trains for long.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence

import torch
import torch.nn as nn

#: Dynamo is not safe to compile from several threads at once (a population trains in threads)
COMPILE_LOCK = threading.RLock()

#: the candidates of a space share one forward code object; each is a recompilation of it
_MANY = 1 << 16


@contextlib.contextmanager
def many_networks() -> Iterator[None]:
    """Let Dynamo keep a compiled entry for every network of a group, and fail loudly rather than run a
    network eagerly once its default limit of a few recompilations is reached."""
    config = torch._dynamo.config
    wanted = {"recompile_limit": _MANY, "cache_size_limit": _MANY, "accumulated_recompile_limit": _MANY,
              "accumulated_cache_size_limit": _MANY, "fail_on_recompile_limit_hit": True,
              "fail_on_cache_limit_hit": True}
    known = {name: value for name, value in wanted.items() if hasattr(config, name)}
    with config.patch(known):
        yield


def compile_for_inference(models: Sequence[nn.Module], inputs: Sequence[torch.Tensor],
                          progress: Callable[[int, int, float], None] | None = None) -> list[nn.Module]:
    """Each model compiled for its input (static shapes, Inductor's freezing on) and run once, so
    that compilation happens here and not inside a strategy's warm-up. Call under
    `torch.inference_mode()` with the models in eval mode; `progress(done, total, seconds)` after each."""
    compiled = []
    with COMPILE_LOCK, many_networks():
        for n, (model, x) in enumerate(zip(models, inputs)):
            start = time.perf_counter()
            fast = torch.compile(model, dynamic=False, options={"freezing": True})
            fast(x)
            compiled.append(fast)
            if progress is not None:
                progress(n + 1, len(models), time.perf_counter() - start)
    return compiled


def compile_for_training(model: nn.Module) -> nn.Module:
    """The model compiled for training steps (forward and backward; it shares the model's parameters and
    buffers). Compilation happens at its first call, which must hold `COMPILE_LOCK` and `many_networks()`."""
    return torch.compile(model, dynamic=False)
