"""Real training: SGD with Nesterov momentum, a cosine schedule, bf16 autocast on CUDA and channels_last.

The training set is split into train and validation parts (fixed seed); validation accuracy after
each epoch is reported (so Optuna pruners can stop training early) and the last one is the
objective. Test accuracy is recorded beside it, never used to choose. Epochs use full batches only.

On CUDA each candidate's whole training step is captured in a CUDA graph and replayed
(`nasutil.colocate.training_step`): the step is launch-bound in eager PyTorch, and one graph launch
replaces hundreds of kernel launches. `graphs=false` runs the same arithmetic eagerly. `compile=true`
compiles each candidate's forward and backward by Inductor first (fewer, fused kernels): it pays where a
candidate trains for many steps: a population's candidates took 14-22 s each on an H200's 16-core host,
compiled side by side by child processes (`nasutil.colocate.compile_cache`).

With `population=P` the search runs up to P trials at once and their candidates train together
(`nasutil.colocate.Population`): each takes one step per round, and each computes what it would
alone, from the same seed.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator
from pathlib import Path

import torch
import torch.nn as nn

from nasutil.colocate import Member, Population
from nasutil.colocate.compiled import COMPILE_LOCK
from nasutil.colocate.training_step import CAPTURE_LOCK, TrainingStep, cosine_rates
from nasutil.errors import NasutilError
from nasutil.evaluator.config import chosen_device
from nasutil.search.trainers import datasets
from nasutil.search.trainers.base import Reporter, Trainer, TrainResult
from nasutil.space import SearchSpace


class TorchTrainer(Trainer):
    name = "torch"

    def __init__(self, dataset: str = "digits", data_dir: str = "data", epochs: int = 3, batch_size: int = 128,
                 lr: float = 0.05, momentum: float = 0.9, weight_decay: float = 5e-4, valid_fraction: float = 0.1,
                 amp: bool | str = "auto", channels_last: bool = True, device: str = "auto",
                 max_batches_per_epoch: int | None = None, threads: int | None = None, seed: int = 0,
                 population: int = 1, graphs: bool | str = "auto", memory_budget_gb: float | None = None,
                 compile: bool = False) -> None:
        if dataset not in datasets.DATASETS:
            raise NasutilError(f"unknown dataset {dataset!r} (choose from {', '.join(datasets.DATASETS)})")
        for name, value in (("epochs", epochs), ("batch_size", batch_size), ("lr", lr), ("momentum", momentum),
                            ("weight_decay", weight_decay), ("valid_fraction", valid_fraction)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise NasutilError(f"trainer.{name} must be a finite number, got {value!r}")
        if epochs < 1 or batch_size < 1 or lr <= 0:
            raise NasutilError(f"trainer: epochs and batch_size must be >= 1 and lr > 0 "
                               f"(got epochs={epochs}, batch_size={batch_size}, lr={lr})")
        if momentum < 0 or weight_decay < 0:
            raise NasutilError(f"trainer.momentum and trainer.weight_decay must be >= 0, got {momentum} and "
                               f"{weight_decay}")
        if not 0 < valid_fraction < 1:
            raise NasutilError(f"trainer.valid_fraction must be in (0, 1), got {valid_fraction}")
        if max_batches_per_epoch is not None and max_batches_per_epoch < 1:
            raise NasutilError("trainer.max_batches_per_epoch must be >= 1 or null")
        if not isinstance(population, int) or population < 1:
            raise NasutilError(f"trainer.population must be a whole number >= 1, got {population!r}")
        self.dataset, self.data_dir, self.epochs, self.batch_size = dataset, str(data_dir), int(epochs), int(batch_size)
        self.lr, self.momentum, self.weight_decay = float(lr), float(momentum), float(weight_decay)
        self.valid_fraction, self.channels_last, self.seed = float(valid_fraction), bool(channels_last), int(seed)
        self.max_batches = max_batches_per_epoch
        self.threads = threads
        self.device = self._device(device)
        if amp == "auto":
            self.amp = self.device.type == "cuda"
        elif isinstance(amp, bool):
            self.amp = amp
        else:
            raise NasutilError(f"trainer.amp must be auto, true or false, got {amp!r}")
        if graphs == "auto":
            self.graphs = self.device.type == "cuda"
        elif isinstance(graphs, bool):
            if graphs and self.device.type != "cuda":
                raise NasutilError(f"trainer.graphs=true needs a CUDA device, and training runs on {self.device}")
            self.graphs = graphs
        else:
            raise NasutilError(f"trainer.graphs must be auto, true or false, got {graphs!r}")
        if not isinstance(compile, bool):
            raise NasutilError(f"trainer.compile must be true or false, got {compile!r}")
        if compile:
            from nasutil.colocate.compile_cache import default_workers

            default_workers()  # a bad NASUTIL_COMPILE_WORKERS stops the search here, not each trial
        self.compile = compile
        if memory_budget_gb is not None and (isinstance(memory_budget_gb, bool)
                                             or not isinstance(memory_budget_gb, (int, float)) or memory_budget_gb <= 0):
            raise NasutilError(f"trainer.memory_budget_gb must be a positive number or null, got {memory_budget_gb!r}")
        self.memory_budget = None if memory_budget_gb is None else float(memory_budget_gb) * 2**30
        self.max_step = self.epochs
        self.population = population  # trials the search runs at once
        self._population = Population(population, self.memory_budget) if population > 1 else None
        self._data: dict | None = None
        self._loading = threading.Lock()

    @staticmethod
    def _device(spec: str) -> torch.device:
        return torch.device(chosen_device(spec, "trainer.device"))

    def check(self, space_spec: str) -> None:
        data = self._load()
        if self.memory_budget is not None:
            from nasutil.registry import get_space

            space = get_space(space_spec)
            smallest = min(self._memory(space, a.to_string(), data) for a in space.sample_many(16, seed=0))
            if smallest > self.memory_budget:
                raise NasutilError(f"trainer.memory_budget_gb {self.memory_budget / 2**30:g} is too small for one "
                                   f"candidate: the smallest of 16 sampled needs about {_gib(smallest)} to train "
                                   f"at batch {self.batch_size}")

    def _memory(self, space: SearchSpace, arch_text: str, data: dict) -> float:
        """Estimated device memory to train the candidate (weights, gradients, momentum, activations)."""
        from nasutil.colocate.packing import estimated_memory_bytes

        ops = space.operators(space.parse(arch_text), num_classes=data["num_classes"], input_size=data["input_size"])
        return estimated_memory_bytes(ops, self.batch_size, 2 if self.amp else 4, training=True)

    def _load(self) -> dict:
        """Tensors on the training device, normalised with the train split's statistics (loaded once,
        whichever trial's thread asks first)."""
        with self._loading:
            return self._load_once()

    def _load_once(self) -> dict:
        if self._data is None:
            data = datasets.load(self.dataset, Path(self.data_dir).expanduser())
            scale = 255.0 if data.train_x.dtype == torch.uint8 else 1.0
            x, test_x = data.train_x.float() / scale, data.test_x.float() / scale
            order = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
            n_valid = max(1, int(round(self.valid_fraction * len(x))))
            valid, train = order[:n_valid], order[n_valid:]
            mean = x[train].mean(dim=(0, 2, 3), keepdim=True)
            std = x[train].std(dim=(0, 2, 3), keepdim=True).clamp_min(1e-6)

            def prep(t: torch.Tensor) -> torch.Tensor:
                t = (t - mean) / std
                return t.to(self.device)

            self._data = {"train": (prep(x[train]), data.train_y[train].to(self.device)),
                          "valid": (prep(x[valid]), data.train_y[valid].to(self.device)),
                          "test": (prep(test_x), data.test_y.to(self.device)),
                          "num_classes": data.num_classes, "input_size": data.input_size,
                          "channels": int(x.shape[1])}
        return self._data

    def _inputs(self, x: torch.Tensor, in_channels: int) -> torch.Tensor:
        if x.shape[1] != in_channels:  # grayscale into a 3-channel stem
            x = x.expand(-1, in_channels, -1, -1)
        return x.contiguous(memory_format=torch.channels_last) if self.channels_last else x

    @torch.no_grad()
    def _accuracy(self, model: nn.Module, split: tuple[torch.Tensor, torch.Tensor], in_channels: int) -> float:
        model.eval()
        x, y = split
        correct = 0
        for start in range(0, len(y), 1024):
            with torch.autocast(self.device.type, enabled=self.amp, dtype=self._amp_dtype):
                logits = model(self._inputs(x[start:start + 1024], in_channels))
            correct += int((logits.argmax(1) == y[start:start + 1024]).sum())
        return 100.0 * correct / len(y)

    @property
    def _amp_dtype(self) -> torch.dtype:
        """bfloat16: fp32's range, so no loss scaling (whose overflow checks wait for the host)."""
        return torch.bfloat16

    def train(self, space: SearchSpace, arch_text: str, reporter: Reporter, trial_number: int = 0) -> TrainResult:
        data = self._load()
        memory = self._memory(space, arch_text, data) if self.memory_budget is not None else 0.0
        if self.memory_budget is not None and memory > self.memory_budget:
            raise NasutilError(f"needs about {_gib(memory)} to train, over trainer.memory_budget_gb "
                               f"{self.memory_budget / 2**30:g}")
        with SEEDING:  # the global RNG seeds the weights: one thread at a time, and no compilation meanwhile
            torch.manual_seed(self.seed * 100_003 + trial_number)
            model = space.build(space.parse(arch_text), num_classes=data["num_classes"],
                                input_size=data["input_size"])
        run = _Run(self, model, space.in_channels, reporter, trial_number, data)
        with _threads(self.threads):
            if self._population is None:
                while not run.finished:
                    run.step()
            else:
                self._population.run(Member(run.step, run.total_steps, memory))
        return run.result()

    def describe(self) -> str:
        amp = ", bf16 autocast" if self.amp else ""
        amp += ", CUDA-graph steps" if self.graphs else ""
        amp += ", compiled by Inductor" if self.compile else ""
        together = f", {self.population} candidates at once" if self.population > 1 else ""
        return f"torch, {self.dataset}, {self.epochs} epochs on {self.device}{amp}{together}"


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**29 else f"{n / 2**20:.1f} MiB"


#: held while a candidate's weights are drawn from the global RNG. It is the compile lock: Dynamo saves
#: the global RNG state before compiling and puts it back after, from whichever thread compiles, and that
#: would rewind the RNG under a candidate being built in another thread.
SEEDING = COMPILE_LOCK
_THREADS = threading.Lock()
_threads_users = 0
_threads_before = 0


@contextlib.contextmanager
def _threads(count: int | None) -> Iterator[None]:
    """torch's CPU threads set to `count` while any trial trains, put back when the last one ends (trials
    of a population run in threads of one process, and the setting is global)."""
    global _threads_users, _threads_before
    if not count:
        yield
        return
    with _THREADS:
        if _threads_users == 0:
            _threads_before = torch.get_num_threads()
            torch.set_num_threads(int(count))
        _threads_users += 1
    try:
        yield
    finally:
        with _THREADS:
            _threads_users -= 1
            if _threads_users == 0:
                torch.set_num_threads(_threads_before)


class _Run:
    """One candidate's training, one step at a time: what `train` loops over alone and what a population
    steps among others. Everything it touches is its own (network, momentum, schedule, data order, and on
    a GPU its stream and CUDA graph)."""

    def __init__(self, trainer: TorchTrainer, model: nn.Module, in_channels: int, reporter: Reporter,
                 trial_number: int, data: dict) -> None:
        t = trainer
        self.trainer, self.reporter, self.data, self.in_channels = t, reporter, data, in_channels
        self.train_x, self.train_y = data["train"]
        self.batches = len(self.train_y) // t.batch_size  # full batches only: a graph's shapes are fixed
        if self.batches < 1:
            raise NasutilError(f"trainer.batch_size {t.batch_size} is larger than the {len(self.train_y)} "
                               f"training images of {t.dataset}")
        if t.max_batches:
            self.batches = min(self.batches, t.max_batches)
        with CAPTURE_LOCK:  # no copy to the device while another candidate's graph is being captured
            model = model.to(t.device)
            self.model = model.to(memory_format=torch.channels_last) if t.channels_last else model
        self.total_steps = t.epochs * self.batches
        self.step_unit = TrainingStep(self.model, lambda x: t._inputs(x, in_channels), self.train_x, self.train_y,
                                      t.batch_size, cosine_rates(t.lr, self.total_steps), t.momentum,
                                      t.weight_decay, t._amp_dtype if t.amp else None, graph=t.graphs,
                                      compiled=t.compile)
        self.generator = torch.Generator(device="cpu").manual_seed(t.seed * 100_003 + trial_number)
        self.taken = 0
        self.order: torch.Tensor | None = None
        self.valid_acc = 0.0
        self.train_loss = math.nan

    @property
    def finished(self) -> bool:
        return self.taken >= self.total_steps

    def step(self) -> None:
        """One batch; after an epoch's last batch, validation accuracy goes to the reporter (which raises
        StoppedEarly when the study's pruner stops this candidate)."""
        t, epoch, b = self.trainer, self.taken // self.batches + 1, self.taken % self.batches
        with self.step_unit.on_stream():
            if b == 0:
                self.model.train()
                self.order = torch.randperm(len(self.train_y), generator=self.generator).to(t.device)
            self.step_unit.run(self.taken, self.order[b * t.batch_size:(b + 1) * t.batch_size])
            self.taken += 1
            if b < self.batches - 1:
                return
            self.train_loss = self.step_unit.take_loss(self.batches)
            if not math.isfinite(self.train_loss):
                raise NasutilError(f"training diverged (mean loss {self.train_loss}) in epoch {epoch}")
            self.valid_acc = t._accuracy(self.model, self.data["valid"], self.in_channels)
        self.reporter.report(epoch, self.valid_acc)

    def result(self) -> TrainResult:
        with self.step_unit.on_stream():
            test_acc = self.trainer._accuracy(self.model, self.data["test"], self.in_channels)
        return TrainResult(self.valid_acc, float(self.trainer.epochs),
                           {"valid_accuracy": self.valid_acc, "test_accuracy": test_acc,
                            "train_loss": self.train_loss})
