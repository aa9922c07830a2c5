"""One candidate's whole training step as a single unit that a CUDA graph can hold.

A NAS candidate's eager training step is launch-bound: hundreds of small kernels, each launched by the
host, while the GPU waits. Captured whole (the batch gathered from the device-resident training set,
forward under autocast with the layers' weights cast in one launch (`weight_copies`), backward, SGD with
Nesterov momentum and weight decay, this step's learning rate), a step is one graph launch; graphs of
several candidates replayed on their own streams then run side by side. The same arithmetic runs eagerly where graphs are off or on a CPU, so the code that CI
tests is the code a GPU replays.

Everything a step reads that changes between steps lives on the device: the epoch's row order, and a
step counter from which the step picks its batch and its learning rate (from a schedule held on the
device) and which it advances itself. A step is therefore one graph launch and nothing else, and
nothing in it waits for the host: the loss is summed on the device and read once an epoch. A step is
captured without a device-wide synchronize, on a stream that only captures use (`capture_stream`), and
replayed on the candidate's own: members of a population are captured while the others train.
"""

from __future__ import annotations

import contextlib
import gc
import math
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future

import torch
import torch.nn as nn
import torch.nn.functional as F

from nasutil.colocate.weight_copies import WeightCopies
from nasutil.errors import NasutilError

#: held while a graph is captured: another thread's copies to the device (a candidate being moved
#: there) must not land in the middle of a capture
CAPTURE_LOCK = threading.RLock()

WARM_UP_STEPS = 3  # eager steps before a capture by default: cuDNN picks its algorithms, autograd its buffers

_capture_streams: dict[int, torch.cuda.Stream] = {}


def capture_stream(device: torch.device) -> torch.cuda.Stream:
    """The stream every capture on `device` runs on (call it holding `CAPTURE_LOCK`), lent to no candidate.

    A graph replays on whichever stream launches it, so it need not be captured on the stream it will run
    on. Capturing on a stream nothing else uses is what lets the others train meanwhile: PyTorch hands out
    streams from a pool of 32 a priority, so in a population of more than 32 places two members share a
    stream, and a step of one launched there during the other's capture would be taken into that graph
    instead of running (or break the capture). Populations lend the low-priority pool's streams; this one
    comes from the high-priority pool."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _capture_streams:
        _capture_streams[index] = torch.cuda.Stream(device=index, priority=-1)
    return _capture_streams[index]


def drop_batch_counters(model: nn.Module) -> list[tuple[nn.Module, torch.Tensor]]:
    """Take away the batch counters (`num_batches_tracked`) of `model`'s BatchNorm layers that never read
    theirs, and hand them back: a layer with a `momentum` updates its statistics by it, and reads its counter
    only where `momentum` is None, yet adds 1 to it every training batch: one kernel a layer a step, 45 of
    the 990 a NAS-Bench-201 network's step launched on average (BENCHMARKS.md, "Kernels a training step
    launches"). Meanwhile the model's state dict lacks them; `restore_batch_counters` puts them back."""
    dropped = []
    for module in model.modules():
        if (isinstance(module, nn.modules.batchnorm._BatchNorm) and module.momentum is not None
                and isinstance(getattr(module, "num_batches_tracked", None), torch.Tensor)):
            dropped.append((module, module.num_batches_tracked))
            module.num_batches_tracked = None
    return dropped


def restore_batch_counters(dropped: list[tuple[nn.Module, torch.Tensor]], batches: int) -> None:
    """Give back the counters `drop_batch_counters` took, each advanced by the `batches` trained meanwhile."""
    for module, counter in dropped:
        counter.add_(batches)
        module.num_batches_tracked = counter


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


@contextlib.contextmanager
def _no_collection() -> Iterator[None]:
    """No garbage collection while a graph is captured: a collection could destroy another candidate's
    graph from this thread, which a capture does not allow."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class TrainingStep:
    """Train `model` one batch at a time on `train_x`/`train_y` (already on the model's device).

    `start_epoch(order)` sets the rows of the coming epoch; `advance()` queues the next step, whose batch
    and learning rate follow from the steps taken. `run(step, rows)` takes the step number and the
    batch's row numbers explicitly. With `graph=True` (CUDA only) the step is captured in a CUDA graph on
    this candidate's stream (`capture()`, or the first step) and every step replays it there; the host
    never waits. With `compiled=True` the step's forward and backward are compiled by Inductor at the
    first step (`nasutil.colocate.compiled`): fewer, fused kernels, once the compilation is paid for.
    `stream`: the stream to run on (a population lends one); by default a new one where graphs are on.
    `epoch_batches`: the batches of an epoch, where it takes fewer than the data holds.
    `capture_alone`: a block in which nothing else of this process runs on the device (a population's
    `Gate.closed`, where `trainer.capture=alone`): the capture itself runs inside it. By default the
    capture runs beside the others' work, on `capture_stream`. `launching`: the block the eager warm-up,
    the capture (unless alone) and the restore after it run in (a population's `Gate.launching`, which
    `capture_alone` and a quiet measurement wait for). `warm_up_steps`: eager steps before the capture
    (undone after it), at least 1."""

    def __init__(self, model: nn.Module, inputs: Callable[[torch.Tensor], torch.Tensor], train_x: torch.Tensor,
                 train_y: torch.Tensor, batch_size: int, rates: torch.Tensor, momentum: float, weight_decay: float,
                 autocast_dtype: torch.dtype | None, graph: bool, compiled: bool = False,
                 stream: torch.cuda.Stream | None = None, epoch_batches: int | None = None,
                 capture_alone: Callable[[], contextlib.AbstractContextManager] | None = None,
                 launching: Callable[[], contextlib.AbstractContextManager] | None = None,
                 warm_up_steps: int = WARM_UP_STEPS) -> None:
        device = train_x.device
        if isinstance(warm_up_steps, bool) or not isinstance(warm_up_steps, int) or warm_up_steps < 1:
            raise NasutilError(f"warm_up_steps must be a whole number >= 1, got {warm_up_steps!r}")
        self.warm_up_steps = warm_up_steps
        if graph and device.type != "cuda":
            raise NasutilError("a training step can be captured in a CUDA graph only on a CUDA device")
        self.model, self.inputs, self.train_x, self.train_y = model, inputs, train_x, train_y
        # before any compilation (here, or of a copy in a child), which must see the network as it trains
        self._counters = drop_batch_counters(model)  # back in `release`
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
        self.batch_size = batch_size
        self.batches = len(train_y) // batch_size  # full batches only: a graph's shapes are fixed
        if self.batches < 1:
            raise NasutilError(f"a batch of {batch_size} is larger than the {len(train_y)} training rows")
        if epoch_batches is not None:  # an epoch shorter than the data
            self.batches = max(1, min(self.batches, int(epoch_batches)))
        self.graphed = graph
        if stream is None and graph:
            stream = torch.cuda.Stream(device=device)
        self.stream = stream if device.type == "cuda" else None
        if self.stream is not None:
            # the network and the data were copied to the device on the thread's current stream, and a
            # copy from pageable memory may still be landing: this stream's work must come after it
            self.stream.wait_stream(torch.cuda.current_stream(device))
        with self.on_stream():
            self.params = [p for p in model.parameters() if p.requires_grad]
            self.buffers = [torch.zeros_like(p) for p in self.params]
            # under autocast, the convolutions' and linear layers' weights are cast in one launch a step, not one
            # a weight (a compiled step fuses the casts itself)
            self.copies = (WeightCopies(model, autocast_dtype) if autocast_dtype is not None and not compiled
                           else None)
            self.order = torch.arange(self.batches * batch_size, device=device)  # the epoch's rows, in order
            self.offsets = torch.arange(batch_size, device=device)
            self.counter = torch.zeros((), dtype=torch.long, device=device)  # steps taken
            self.rates = rates.to(device=device, dtype=torch.float32)
            self.loss_sum = torch.zeros((), dtype=torch.float32, device=device)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.graph_bytes = 0  # memory the captured graph keeps for itself
        self.capture_phases: dict[str, float] = {}  # seconds of the capture's phases (warm-up, wait, capture, restore)
        self.capture_alone = capture_alone
        self.launching = launching or contextlib.nullcontext

    @contextlib.contextmanager
    def on_stream(self) -> Iterator[None]:
        """Work on this candidate's stream (its steps, its validation) stays in order with its steps."""
        if self.stream is None:
            yield
        else:
            with torch.cuda.stream(self.stream):
                yield

    def start_epoch(self, order: torch.Tensor) -> None:
        """The rows of the coming epoch (a device tensor; its first `batches * batch_size` are used)."""
        with self.on_stream():
            self.order.copy_(order[:len(self.order)], non_blocking=True)

    def advance(self) -> None:
        """Queue the next step: one graph launch (or the step's kernels, eagerly); never waits."""
        with self.on_stream():
            if not self.graphed:
                with self._compiling():
                    self._compute()
                return
            if self.graph is None:
                self._capture()
            self.graph.replay()

    def run(self, step: int, rows: torch.Tensor) -> None:
        """Step number `step` (its learning rate) on the batch `rows`."""
        with self.on_stream():
            slot = step % self.batches
            self.order[slot * self.batch_size:(slot + 1) * self.batch_size].copy_(rows, non_blocking=True)
            self.counter.fill_(step)
        self.advance()

    def capture(self) -> None:
        """Capture the step now (where graphs are on), rather than at the first step."""
        if self.graphed and self.graph is None:
            with self.on_stream():
                self._capture()

    def release(self) -> None:
        """Destroy the captured graph now, in this thread: left to the garbage collector, it could be
        destroyed in whichever thread collects, in the middle of another candidate's capture, and its
        memory pool (which the gradients it wrote live in) would stay allocated until then: one search
        training candidates one at a time at batch 256 ran out of an H200's memory after 94 of them. Waits
        for this candidate's stream first: a training stopped between steps may have one still in flight."""
        if self.stream is not None and self.graph is not None:
            self.stream.synchronize()
        self.graph = None
        for p in self.params:
            p.grad = None
        if self.copies is not None:
            self.copies.clear()
        if self._counters:
            with self.on_stream():
                restore_batch_counters(self._counters, int(self.counter))
            self._counters = []

    def take_loss(self, steps: int) -> float:
        """The mean loss of the last `steps` steps (waits for them), and the sum starts again."""
        return float(self.queue_loss()) / max(1, steps)

    def queue_loss(self) -> torch.Tensor:
        """The summed loss of the steps since the last call, as a device tensor (queued, not waited for),
        and the sum starts again."""
        with self.on_stream():
            total = self.loss_sum.clone()
            self.loss_sum.zero_()
        return total

    def mark(self) -> torch.cuda.Event | None:
        """An event after everything queued on this candidate's stream so far (None off CUDA): waiting for
        it waits for this candidate alone, and releases the interpreter meanwhile."""
        if self.stream is None:
            return None
        event = torch.cuda.Event()
        event.record(self.stream)
        return event

    def _compute(self) -> None:
        """The step's arithmetic: what the graph holds, or what runs eagerly."""
        for p in self.params:
            p.grad = None
        copies = self.copies
        if copies is not None:
            copies.clear()
            copies.refresh()
        step = self.counter.clamp(max=len(self.rates) - 1)
        rows = self.order.index_select(0, (step % self.batches) * self.batch_size + self.offsets)
        rate = self.rates.index_select(0, step.view(1)).view(())
        x = self.inputs(self.train_x.index_select(0, rows))
        y = self.train_y.index_select(0, rows)
        with torch.autocast(self.device.type, dtype=self.autocast_dtype or torch.bfloat16,
                            enabled=self.autocast_dtype is not None):
            with copies.swapped() if copies is not None else contextlib.nullcontext():
                logits = self.forward(x)
            loss = F.cross_entropy(logits, y)
        loss.backward()
        widened = copies.gradients() if copies is not None else {}
        grads = [widened.get(id(p), p.grad) for p in self.params]
        live = [(p, g, b) for p, g, b in zip(self.params, grads, self.buffers) if g is not None]
        if live:
            params, grads, buffers = (list(t) for t in zip(*live))
            sgd_nesterov_(params, grads, buffers, rate, self.momentum, self.weight_decay)
        with torch.no_grad():
            self.loss_sum.add_(loss.detach().float())
            self.counter.add_(1)

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
        return [*self.params, *self.model.buffers(), *self.buffers, self.loss_sum, self.counter]

    def _capture(self) -> None:
        """Warm up eagerly, capture, then put back every value the warm-up changed (weights, BatchNorm
        statistics, momentum, loss, step counter), so that the first replay is the candidate's next step.
        The warm-up and the restore run on this candidate's stream, the capture on `capture_stream` (a
        capture queues nothing, so nothing there has to follow the warm-up), all without the device-wide
        synchronize of `torch.cuda.graph`, so the other candidates' steps run on meanwhile."""
        started = time.perf_counter()
        with self.launching(), torch.no_grad():
            saved = [t.detach().clone() for t in self._state()]
        for _ in range(self.warm_up_steps):  # a step at a time: a quiet hold waits for one step, not all
            with self.launching(), self._compiling():  # the gate before the compile lock, as everywhere
                self._compute()
        for p in self.params:
            p.grad = None
        graph = torch.cuda.CUDAGraph()
        # beside the others' launches, never while the population is held quiet: a measurement there captures
        # a graph of its own, and a capture beside it fails ("operation not permitted when stream is capturing")
        guard = self.capture_alone() if self.capture_alone is not None else self.launching()
        asked = time.perf_counter()
        with CAPTURE_LOCK, guard, _no_collection(), torch.cuda.stream(capture_stream(self.device)):
            capturing = time.perf_counter()
            free_before = torch.cuda.mem_get_info(self.device)[0]
            graph.capture_begin(capture_error_mode="thread_local")
            try:
                self._compute()
            finally:
                graph.capture_end()
            self.graph_bytes = max(0, free_before - torch.cuda.mem_get_info(self.device)[0])
        captured = time.perf_counter()
        with self.launching(), torch.no_grad():
            torch._foreach_copy_(self._state(), saved)  # one call: per tensor, each waited its turn for the interpreter
        self.graph = graph
        self.capture_phases = {"warm_up": asked - started, "capture_wait": capturing - asked,
                               "capture": captured - capturing, "restore": time.perf_counter() - captured}
