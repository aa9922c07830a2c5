"""A search for parity models: each candidate architecture is trained as the parity model of a code.

The deployed base is trained once (and kept in `base_dir`, by default the nasutil cache folder, so resumed
searches, other workers and searches started from other folders reuse it; its file is named by every
setting that shapes it, so a changed setting trains a new one); each trial trains the candidate as the
parity network behind a fixed encoder and decoder (the parity-models design: `sum` or `concat`, then
`subtract`), reporting degraded-mode accuracy on the validation split after every epoch. With the
search's throughput objective (predicted for the candidate's architecture) the front is degraded-mode
accuracy against parity cost, and prune-before-train skips candidates the predictor already rules out.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from nasutil.codes.code import Code, CodeSpec
from nasutil.codes.data import CodeData, load_code_data
from nasutil.codes.metrics import score_code
from nasutil.codes.run import resolve_device, trained_base
from nasutil.codes.settings import MAX_BATCH, MAX_EPOCHS
from nasutil.codes.training import base_outputs, make_optimizer, train_code_epoch
from nasutil.errors import NasutilError
from nasutil.search.trainers.base import Reporter, Trainer, TrainResult
from nasutil.space import SearchSpace

VALID_IMAGES = 2000


def default_base_dir() -> Path:
    """Where trained bases are kept unless `base_dir` says otherwise: beside the measurement cache
    ($NASUTIL_CACHE_DIR, else ~/.cache/nasutil), not in whatever folder the search was launched from."""
    from nasutil.evaluator.cache import default_cache_path

    return default_cache_path().parent / "codes-base"


class CodesTrainer(Trainer):
    name = "codes"

    def __init__(self, base: str = "mlp", dataset: str = "fashion_mnist", data_dir: str = "data", k: int = 2,
                 encoder: str = "sum", decoder: str = "subtract", loss: str = "mse", base_epochs: int = 10,
                 epochs: int = 5, batch_size: int = 64, train_images: int | None = None,
                 base_dir: str | None = None, device: str = "auto", seed: int = 0) -> None:
        self.spec = CodeSpec(k=int(k), encoder=encoder, decoder=decoder, parity="copy", loss=loss).check()
        for name, value, most in (("base_epochs", base_epochs, MAX_EPOCHS), ("epochs", epochs, MAX_EPOCHS),
                                  ("batch_size", batch_size, MAX_BATCH)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:  # 0 base epochs: an untrained base
                raise NasutilError(f"trainer.{name} must be a whole number >= 1, got {value!r}")
            if value > most:  # as a codes run's own settings: 10**20 overflowed inside torch
                raise NasutilError(f"trainer.{name} must be at most {most:,}, got {value!r}")
        self.base_spec, self.dataset, self.data_dir = base, dataset, str(data_dir)
        self.base_epochs, self.epochs, self.batch_size = int(base_epochs), int(epochs), int(batch_size)
        self.train_images, self.seed = train_images, int(seed)
        self.base_dir = Path(base_dir) if base_dir else default_base_dir()
        self.device = resolve_device(device, "trainer.device")
        self.max_step = self.epochs
        self._ready: tuple[CodeData, torch.nn.Module, torch.Tensor] | None = None
        self._space_spec = ""

    def check(self, space_spec: str) -> None:
        self._space_spec = space_spec
        self._prepare()

    def _prepare(self) -> tuple[CodeData, torch.nn.Module, torch.Tensor]:
        """The data, the frozen base (trained on first use, then read back) and its outputs on the train split."""
        if self._ready is None:
            data = load_code_data(self.dataset, self.data_dir).limited(self.train_images, None)
            path = self.base_dir / self.base_file_name()
            if not path.is_file():  # minutes on a CPU, before the first trial: say what is happening
                print(f"training the code's base once ({self.base_spec}, {self.base_epochs} epochs on {self.dataset}); "
                      f"later searches with these settings reuse it from {path}", file=sys.stderr, flush=True)
            base = trained_base(self.base_spec, data, path, self.base_epochs, self.batch_size, self.device, self.seed)
            self._ready = (data, base, base_outputs(base, data.train[0], self.device))
        return self._ready

    def base_file_name(self) -> str:
        """Every setting the trained base depends on, so that a search with other settings trains its own."""
        images = "all" if self.train_images is None else int(self.train_images)
        return (f"{self.dataset}-{self.base_spec.replace('/', '_')[:80]}-e{self.base_epochs}-b{self.batch_size}"
                f"-n{images}-s{self.seed}.safetensors")

    def train(self, space: SearchSpace, arch_text: str, reporter: Reporter, trial_number: int = 0) -> TrainResult:
        data, base, targets = self._prepare()
        spec = CodeSpec(**{**self.spec.to_dict(), "parity": f"{self._space_spec or space.name}:{arch_text}"})
        torch.manual_seed(self.seed + trial_number)
        code = Code(spec, self.base_spec, data.shape, data.num_classes).to(self.device)
        optimizer = make_optimizer(code)
        generator = torch.Generator().manual_seed(self.seed + trial_number)
        valid = (data.valid[0][:VALID_IMAGES], data.valid[1][:VALID_IMAGES])
        scores = None
        for epoch in range(1, self.epochs + 1):
            train_code_epoch(code, base, data.train[0], targets, optimizer, self.batch_size, self.device, generator)
            scores = score_code(code, base, valid, self.device)
            reporter.report(epoch, 100 * scores.degraded_accuracy)
        test = score_code(code, base, data.test, self.device)
        return TrainResult(accuracy=100 * scores.degraded_accuracy, epochs=self.epochs,
                           extra={"reconstruction_accuracy": 100 * scores.reconstruction_accuracy,
                                  "test_degraded_accuracy": 100 * test.degraded_accuracy,
                                  "test_reconstruction_accuracy": 100 * test.reconstruction_accuracy})

    def describe(self) -> str:
        return (f"codes: parity models for base {self.base_spec} on {self.dataset}, k={self.spec.k}, "
                f"{self.spec.encoder} encoder, {self.spec.decoder} decoder, {self.epochs} epochs; base kept in "
                f"{self.base_dir}")
