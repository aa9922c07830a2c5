"""Real training: SGD with Nesterov momentum, a cosine schedule, AMP on CUDA and channels_last.

The training set is split into train and validation parts (fixed seed); validation accuracy after
each epoch is reported (so Optuna pruners can stop training early) and the last one is the
objective. Test accuracy is recorded beside it, never used to choose.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from nasutil.errors import NasutilError
from nasutil.search.trainers import datasets
from nasutil.search.trainers.base import Reporter, Trainer, TrainResult
from nasutil.space import SearchSpace


class TorchTrainer(Trainer):
    name = "torch"

    def __init__(self, dataset: str = "digits", data_dir: str = "data", epochs: int = 3, batch_size: int = 128,
                 lr: float = 0.05, momentum: float = 0.9, weight_decay: float = 5e-4, valid_fraction: float = 0.1,
                 amp: bool | str = "auto", channels_last: bool = True, device: str = "auto",
                 max_batches_per_epoch: int | None = None, threads: int | None = None, seed: int = 0) -> None:
        if dataset not in datasets.DATASETS:
            raise NasutilError(f"unknown dataset {dataset!r} (choose from {', '.join(datasets.DATASETS)})")
        if epochs < 1 or batch_size < 1 or lr <= 0:
            raise NasutilError("trainer: epochs and batch_size must be >= 1 and lr > 0")
        if not 0 < valid_fraction < 1:
            raise NasutilError(f"trainer.valid_fraction must be in (0, 1), got {valid_fraction}")
        if max_batches_per_epoch is not None and max_batches_per_epoch < 1:
            raise NasutilError("trainer.max_batches_per_epoch must be >= 1 or null")
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
        self.max_step = self.epochs
        self._data: dict | None = None

    @staticmethod
    def _device(spec: str) -> torch.device:
        if spec == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        try:
            device = torch.device(spec)
        except RuntimeError:
            raise NasutilError(f"unknown trainer.device {spec!r} (auto, cpu, cuda or cuda:N)") from None
        if device.type == "cuda" and not torch.cuda.is_available():
            raise NasutilError(f"trainer.device={spec} but CUDA is not available (use auto or cpu)")
        return device

    def check(self, space_spec: str) -> None:
        self._load()

    def _load(self) -> dict:
        """Tensors on the training device, normalised with the train split's statistics."""
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
        return torch.float16 if self.device.type == "cuda" else torch.bfloat16

    def train(self, space: SearchSpace, arch_text: str, reporter: Reporter, trial_number: int = 0) -> TrainResult:
        data = self._load()
        threads = torch.get_num_threads()
        if self.threads:
            torch.set_num_threads(int(self.threads))
        try:
            return self._train(space, arch_text, reporter, trial_number, data)
        finally:
            torch.set_num_threads(threads)

    def _train(self, space: SearchSpace, arch_text: str, reporter: Reporter, trial_number: int,
               data: dict) -> TrainResult:
        torch.manual_seed(self.seed * 100_003 + trial_number)
        model = space.build(space.parse(arch_text), num_classes=data["num_classes"], input_size=data["input_size"])
        model = model.to(self.device)
        if self.channels_last:
            model = model.to(memory_format=torch.channels_last)
        train_x, train_y = data["train"]
        batches = math.ceil(len(train_y) / self.batch_size)
        if self.max_batches:
            batches = min(batches, self.max_batches)
        optimizer = torch.optim.SGD(model.parameters(), lr=self.lr, momentum=self.momentum, nesterov=True,
                                    weight_decay=self.weight_decay)
        schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=self.epochs * batches)
        scaler = torch.amp.GradScaler(self.device.type, enabled=self.amp and self.device.type == "cuda")
        generator = torch.Generator(device="cpu").manual_seed(self.seed * 100_003 + trial_number)
        in_channels = space.in_channels
        valid_acc = 0.0
        for epoch in range(1, self.epochs + 1):
            model.train()
            order = torch.randperm(len(train_y), generator=generator).to(self.device)
            for b in range(batches):
                idx = order[b * self.batch_size:(b + 1) * self.batch_size]
                with torch.autocast(self.device.type, enabled=self.amp, dtype=self._amp_dtype):
                    loss = F.cross_entropy(model(self._inputs(train_x[idx], in_channels)), train_y[idx])
                if not torch.isfinite(loss):
                    raise NasutilError(f"training diverged (loss {float(loss)}) at epoch {epoch}")
                optimizer.zero_grad(set_to_none=True)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
                schedule.step()
            valid_acc = self._accuracy(model, data["valid"], in_channels)
            reporter.report(epoch, valid_acc)
        test_acc = self._accuracy(model, data["test"], in_channels)
        return TrainResult(valid_acc, float(self.epochs), {"valid_accuracy": valid_acc, "test_accuracy": test_acc})

    def describe(self) -> str:
        amp = ", AMP" if self.amp else ""
        return f"torch, {self.dataset}, {self.epochs} epochs on {self.device}{amp}"
