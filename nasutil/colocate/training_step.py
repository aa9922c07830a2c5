"""One candidate's whole training step as a single unit that a CUDA graph can hold.

A NAS candidate's eager training step is launch-bound: hundreds of small kernels, each launched by the
host, while the GPU waits. Captured whole (the batch gathered from the device-resident training set,
forward under autocast, backward, SGD with Nesterov momentum and weight decay, this step's learning
rate), a step is one graph launch; graphs of several candidates replayed on their own streams then run
side by side. The same arithmetic runs eagerly where graphs are off or on a CPU, so the code that CI
tests is the code a GPU replays.

Everything a step reads that changes between steps lives in a device tensor that is copied in before
the replay: the batch's row numbers and the learning rate (taken from a schedule held on the device).
Nothing in a step waits for the host, so the loss is summed on the device and read once an epoch.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future

import torch
import torch.nn as nn
import torch.nn.functional as F

from nasutil.errors import NasutilError

#: held while a graph is captured: another thread's copies to the device (a candidate being moved
#: there) must not land in the middle of a capture
CAPTURE_LOCK = threading.RLock()

WARM_UP_STEPS = 3  # eager steps before a capture: cuDNN picks its algorithms, autograd its buffers


def cosine_rates(lr: float, steps: int) -> torch.Tensor:
    """The learning rate of every step of a cosine schedule from `lr` to 0 (torch's CosineAnnealingLR
    with T_max = steps, in closed form), as float32."""
    t = torch.arange(steps, dtype=torch.float64)
    return (lr * 0.5 * (1.0 + torch.cos(math.pi * t / steps))).float()


@torch.no_grad()
def sgd_nesterov_(params: list[torch.Tensor], grads: list[torch.Tensor], buffers: list[torch.Tensor],
                  rate: torch.Tensor, momentum: float, weight_decay: float) -> None:
    """SGD with Nesterov momentum and L2 weight decay, in place, with the learning rate a device tensor
    (torch.optim.SGD reads a tensor rate back to the host, which a graph cannot hold). The gradients are
    used as scratch space. Buffers start at zero, which gives torch's first step (buffer = gradient)."""
    if weight_decay:
        torch._foreach_add_(grads, params, alpha=weight_decay)
    torch._foreach_mul_(buffers, momentum)
    torch._foreach_add_(buffers, grads)
    torch._foreach_add_(grads, buffers, alpha=momentum)
    torch._foreach_mul_(grads, rate)
    torch._foreach_sub_(params, grads)


class TrainingStep:
    """Train `model` one batch at a time on `train_x`/`train_y` (already on the model's device).

    `run(step, rows)` takes the step number (for the learning rate) and the batch's row numbers (a device
    tensor of `batch_size`). With `graph=True` (CUDA only) the first call captures the step in a CUDA graph
    on this candidate's own stream and every call replays it there; the host never waits. With
    `compiled=True` the step's forward and backward are compiled by Inductor at the first call
    (`nasutil.colocate.compiled`): fewer, fused kernels, once the compilation is paid for."""

    def __init__(self, model: nn.Module, inputs: Callable[[torch.Tensor], torch.Tensor], train_x: torch.Tensor,
                 train_y: torch.Tensor, batch_size: int, rates: torch.Tensor, momentum: float, weight_decay: float,
                 autocast_dtype: torch.dtype | None, graph: bool, compiled: bool = False) -> None:
        device = train_x.device
        if graph and device.type != "cuda":
            raise NasutilError("a training step can be captured in a CUDA graph only on a CUDA device")
        self.model, self.inputs, self.train_x, self.train_y = model, inputs, train_x, train_y
        self.compiled = compiled
        self.forward = model
        self._warm_cache: Future[float] | None = None
        self._compiled_once = False
        if compiled:
            from nasutil.colocate.compile_cache import shared_warmer
            from nasutil.colocate.compiled import TRAINING_OPTIONS, compile_for_training

            self.forward = compile_for_training(model)  # shares the model's parameters and buffers
            warmer = shared_warmer()  # a child process compiles a copy meanwhile, for the cache
            if warmer is not None:
                self._warm_cache = warmer.submit(model, inputs(train_x[:batch_size]), training=True,
                                                 autocast_dtype=autocast_dtype, options=TRAINING_OPTIONS)
        self.momentum, self.weight_decay, self.autocast_dtype = momentum, weight_decay, autocast_dtype
        self.device = device
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.buffers = [torch.zeros_like(p) for p in self.params]
        self.rows = torch.zeros(batch_size, dtype=torch.long, device=device)
        self.rate = torch.zeros((), dtype=torch.float32, device=device)
        self.rates = rates.to(device=device, dtype=torch.float32)
        self.loss_sum = torch.zeros((), dtype=torch.float32, device=device)
        self.stream = torch.cuda.Stream(device=device) if graph else None
        self.graph: torch.cuda.CUDAGraph | None = None
        self.graph_bytes = 0  # memory the captured graph keeps for itself

    @contextlib.contextmanager
    def on_stream(self) -> Iterator[None]:
        """Work on this candidate's stream (its steps, its validation) stays in order with its steps."""
        if self.stream is None:
            yield
        else:
            with torch.cuda.stream(self.stream):
                yield

    def run(self, step: int, rows: torch.Tensor) -> None:
        with self.on_stream():
            self.rows.copy_(rows, non_blocking=True)
            self.rate.copy_(self.rates[step], non_blocking=True)
            if self.stream is None:
                with self._compiling():
                    self._compute()
                return
            if self.graph is None:
                self._capture()
            self.graph.replay()

    def take_loss(self, steps: int) -> float:
        """The mean loss of the last `steps` steps (waits for them), and the sum starts again."""
        with self.on_stream():
            mean = float(self.loss_sum) / max(1, steps)
            self.loss_sum.zero_()
        return mean

    def _compute(self) -> None:
        """The step's arithmetic: what the graph holds, or what runs eagerly."""
        for p in self.params:
            p.grad = None
        x = self.inputs(self.train_x.index_select(0, self.rows))
        y = self.train_y.index_select(0, self.rows)
        with torch.autocast(self.device.type, dtype=self.autocast_dtype or torch.bfloat16,
                            enabled=self.autocast_dtype is not None):
            loss = F.cross_entropy(self.forward(x), y)
        loss.backward()
        live = [(p, p.grad, b) for p, b in zip(self.params, self.buffers) if p.grad is not None]
        if live:
            params, grads, buffers = (list(t) for t in zip(*live))
            sgd_nesterov_(params, grads, buffers, self.rate, self.momentum, self.weight_decay)
        with torch.no_grad():
            self.loss_sum.add_(loss.detach().float())

    @contextlib.contextmanager
    def _compiling(self) -> Iterator[None]:
        """Where a compiled step may compile: one thread at a time, with room for every candidate's code."""
        if not self.compiled or self._compiled_once:  # nothing (left) to compile
            yield
            return
        from nasutil.colocate.compile_cache import wait_quietly
        from nasutil.colocate.compiled import COMPILE_LOCK, many_networks

        if self._warm_cache is not None:  # the child's code, in the cache, before this thread compiles
            wait_quietly(self._warm_cache)
            self._warm_cache = None
        with COMPILE_LOCK, many_networks():
            yield
        self._compiled_once = True

    def _state(self) -> list[torch.Tensor]:
        return [*self.params, *self.model.buffers(), *self.buffers, self.loss_sum]

    def _capture(self) -> None:
        """Warm up eagerly, capture, then put back every value the warm-up changed (weights, BatchNorm
        statistics, momentum, loss), so that the first replay is the candidate's first step."""
        with torch.no_grad():
            saved = [t.detach().clone() for t in self._state()]
        rows, rate = self.rows.clone(), self.rate.clone()
        self.rate.zero_()
        with self._compiling():
            for _ in range(WARM_UP_STEPS):
                self._compute()
        for p in self.params:
            p.grad = None
        free_before = torch.cuda.mem_get_info(self.device)[0]
        graph = torch.cuda.CUDAGraph()
        with CAPTURE_LOCK, torch.cuda.graph(graph, stream=self.stream, capture_error_mode="thread_local"):
            self._compute()
        self.graph_bytes = max(0, free_before - torch.cuda.mem_get_info(self.device)[0])
        with torch.no_grad():
            for t, s in zip(self._state(), saved):
                t.copy_(s)
        self.rows.copy_(rows)
        self.rate.copy_(rate)
        self.graph = graph
