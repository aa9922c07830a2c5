"""Real training: SGD with Nesterov momentum, a cosine schedule, bf16 autocast on CUDA and channels_last.

The training set is split into train and validation parts (fixed seed); validation accuracy after
each epoch is reported (so Optuna pruners can stop training early) and the last one is the
objective. Test accuracy is recorded beside it, never used to choose. Epochs use full batches only.
Where the reporter asks for rungs (fractions of the training, `nasutil.search.halving`), validation
accuracy is reported there too, and the rung may cut the candidate; `rung_valid_images` lets a rung inside
an epoch read only the split's first images (a cut ranks candidates; with halving, validations at rungs
were 11-16% of a population's arithmetic, BENCHMARKS.md).

On CUDA each candidate's whole training step is captured in a CUDA graph and replayed
(`nasutil.colocate.training_step`): the step is launch-bound in eager PyTorch, and one graph launch
replaces hundreds of kernel launches. `graphs=false` runs the same arithmetic eagerly. `compile=true`
compiles each candidate's forward and backward by Inductor first (fewer, fused kernels): it pays where a
candidate trains for many steps: a population's candidates took 14-22 s each on an H200's 16-core host,
compiled side by side by child processes (`nasutil.colocate.compile_cache`); `auto` compiles only
where a candidate's training is long enough for that to pay back.

With `population=P` the search runs up to P trials at once and their candidates train together
(`nasutil.colocate.Population`): a driver thread queues one step of each per round, each candidate's
own thread prepares it (its step captured while the others train) and validates it (while the others
train), and each computes what it would alone, from the same seed. `host_turns` candidates do host work
(build, warm up, capture, validate) at once; `capture=alone` holds every other launch back while a step is
captured, as populations did before captures got a stream of their own.
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn

from nasutil.colocate.host_times import HostTimes
from nasutil.colocate.population import Gate, Member, Population
from nasutil.colocate.compiled import COMPILE_LOCK
from nasutil.colocate.training_step import TrainingStep, cosine_rates
from nasutil.colocate.transfer import move_to_device
from nasutil.errors import Interrupted, NasutilError
from nasutil.evaluator.config import chosen_device
from nasutil import datasets
from nasutil.search.trainers.base import Reporter, Trainer, TrainResult
from nasutil.space import SearchSpace


CAPTURE_CHOICES = ("beside", "alone")  # a step captured while the others train, or while nothing else launches


#: the most epochs a candidate trains (a budget of years on any dataset nasutil reads)
MAX_EPOCHS = 100_000


#: images a validation or test forward takes at once, by default (`trainer.eval_batch`): every forward is queued by
#: the host, so fewer, larger ones spare it work (16,000 images took 99 ms to queue in forwards of 1,024 and 16 ms
#: in forwards of 16,384 on an H100, the device's time alike) for more memory held meanwhile (2.2 GiB at 16,384)
EVAL_BATCH = 1024


class TorchTrainer(Trainer):
    name = "torch"
    reports_rungs = True

    def __init__(self, dataset: str = "digits", data_dir: str = "data", epochs: int = 3, batch_size: int = 128,
                 lr: float = 0.05, momentum: float = 0.9, weight_decay: float = 5e-4, valid_fraction: float = 0.1,
                 amp: bool | str = "auto", channels_last: bool = True, device: str = "auto",
                 max_batches_per_epoch: int | None = None, threads: int | None = None, seed: int = 0,
                 population: int = 1, graphs: bool | str = "auto", memory_budget_gb: float | str | None = "auto",
                 compile: bool | str = "auto", ahead: int | str = "auto", host_turns: int = 4,
                 capture: str = "beside", round_size: int | None = None, lead_rounds: int = 2,
                 warm_up_steps: int = 3, eval_batch: int = EVAL_BATCH, finish_together: bool = False,
                 rung_valid_images: int | None = None) -> None:
        if dataset not in datasets.DATASETS:
            raise NasutilError(f"unknown dataset {dataset!r} (choose from {', '.join(datasets.DATASETS)})")
        for name, value in (("epochs", epochs), ("batch_size", batch_size), ("lr", lr), ("momentum", momentum),
                            ("weight_decay", weight_decay), ("valid_fraction", valid_fraction)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise NasutilError(f"trainer.{name} must be a finite number, got {value!r}")
        if epochs < 1 or batch_size < 1 or lr <= 0:
            raise NasutilError(f"trainer: epochs and batch_size must be >= 1 and lr > 0 "
                               f"(got epochs={epochs}, batch_size={batch_size}, lr={lr})")
        if epochs > MAX_EPOCHS:  # 10**23 failed every trial inside the epoch loop, each after its set-up
            raise NasutilError(f"trainer.epochs must be at most {MAX_EPOCHS:,}, got {epochs!r}")
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
        cores = os.cpu_count() or 1
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                    or not 1 <= threads <= cores):
            raise NasutilError(f"trainer.threads must be a whole number from 1 to {cores} (this machine's cores) "
                               f"or null, got {threads!r}")
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
        if compile not in ("auto", True, False):
            raise NasutilError(f"trainer.compile must be auto, true or false, got {compile!r}")
        self.compile_choice = compile
        self.compile = compile is True  # `auto` decides once the data says how long a candidate trains
        self.compile_reason = ""
        if compile is True:
            from nasutil.colocate.compile_cache import default_workers

            default_workers()  # a bad NASUTIL_COMPILE_WORKERS stops the search here, not each trial
        if memory_budget_gb is not None and memory_budget_gb != "auto" and (
                isinstance(memory_budget_gb, bool) or not isinstance(memory_budget_gb, (int, float))
                or not math.isfinite(memory_budget_gb) or memory_budget_gb <= 0):
            raise NasutilError(f"trainer.memory_budget_gb must be a positive number, auto or null, got "
                               f"{memory_budget_gb!r}")
        self.memory_budget_choice = memory_budget_gb
        self.memory_budget = (None if memory_budget_gb in (None, "auto") else float(memory_budget_gb) * 2**30)
        if ahead != "auto" and (isinstance(ahead, bool) or not isinstance(ahead, int) or ahead < 0):
            raise NasutilError(f"trainer.ahead must be a whole number >= 0 or auto, got {ahead!r}")
        self.ahead = (max(1, population // 4) if population > 1 else 0) if ahead == "auto" else int(ahead)
        if isinstance(host_turns, bool) or not isinstance(host_turns, int) or host_turns < 1:
            raise NasutilError(f"trainer.host_turns must be a whole number >= 1, got {host_turns!r}")
        if capture not in CAPTURE_CHOICES:
            raise NasutilError(f"trainer.capture must be one of {', '.join(CAPTURE_CHOICES)}, got {capture!r}")
        if round_size is not None and (isinstance(round_size, bool) or not isinstance(round_size, int)
                                       or round_size < 1):
            raise NasutilError(f"trainer.round_size must be a whole number >= 1 or null, got {round_size!r}")
        if isinstance(lead_rounds, bool) or not isinstance(lead_rounds, int) or lead_rounds < 1:
            raise NasutilError(f"trainer.lead_rounds must be a whole number >= 1, got {lead_rounds!r}")
        if isinstance(warm_up_steps, bool) or not isinstance(warm_up_steps, int) or warm_up_steps < 1:
            raise NasutilError(f"trainer.warm_up_steps must be a whole number >= 1, got {warm_up_steps!r}")
        if isinstance(eval_batch, bool) or not isinstance(eval_batch, int) or eval_batch < 1:
            raise NasutilError(f"trainer.eval_batch must be a whole number >= 1, got {eval_batch!r}")
        if not isinstance(finish_together, bool):
            raise NasutilError(f"trainer.finish_together must be true or false, got {finish_together!r}")
        self.eval_batch, self.finish_together = eval_batch, finish_together
        if rung_valid_images is not None and (isinstance(rung_valid_images, bool) or not isinstance(rung_valid_images, int)
                                              or rung_valid_images < 1):
            raise NasutilError(f"trainer.rung_valid_images must be a whole number >= 1 or null, got {rung_valid_images!r}")
        self.rung_valid_images = rung_valid_images  # images a rung's validation reads (null: the whole split)
        self.host_turns, self.capture, self.round_size = host_turns, capture, round_size
        self.lead_rounds, self.warm_up_steps = lead_rounds, warm_up_steps
        self.max_step = self.epochs
        self.population = population  # trials trained at once
        self.concurrent_trials = population + self.ahead if population > 1 else 1  # trials the search runs at once
        self._population: Population | None = None
        self._data: dict | None = None
        self._loading = threading.Lock()
        self._preloading: threading.Thread | None = None  # `start_loading`'s thread
        self._interrupted = threading.Event()
        self.host_times = HostTimes()  # where each candidate's host work spends its time (`activity()`)
        self._trial_phases: dict[int, dict[str, float]] = {}  # each trial's times in a population (`_stamp`)
        self._stamps_lock = threading.Lock()

    @staticmethod
    def _device(spec: str) -> torch.device:
        return torch.device(chosen_device(spec, "trainer.device"))

    def start_loading(self) -> None:
        """The dataset read, split and moved to the device on a thread of its own while the search is built (the
        anchors' short search on predictions meanwhile): decompressing and copying leave the interpreter to it."""
        if self._data is None and self._preloading is None:
            self._preloading = threading.Thread(target=self._load_quietly, name="trainer-data", daemon=True)
            self._preloading.start()

    def _load_quietly(self) -> None:
        try:
            self._load()
        except Exception:  # noqa: BLE001 - `check` loads again and says why in one line
            pass

    def check(self, space_spec: str) -> None:
        data = self._load()  # waits for `start_loading`'s thread, if any: one load at a time
        images = len(data["train"][1])
        if images // self.batch_size < 1:  # else every trial would fail with this reason
            raise NasutilError(f"trainer.batch_size {self.batch_size} is larger than the {images} training images "
                               f"of {self.dataset} (after trainer.valid_fraction={self.valid_fraction:g} held out)")
        held_out = len(data["valid"][1])
        if self.rung_valid_images is not None and self.rung_valid_images > held_out:
            raise NasutilError(f"trainer.rung_valid_images={self.rung_valid_images} is more than the {held_out} "
                               f"validation images of {self.dataset} (trainer.valid_fraction={self.valid_fraction:g})")
        if self.memory_budget is not None:
            from nasutil.registry import get_space

            space = get_space(space_spec)
            smallest = min(self._memory(space, a.to_string(), data) for a in space.sample_many(16, seed=0))
            if smallest > self.memory_budget:
                raise NasutilError(f"trainer.memory_budget_gb {self.memory_budget / 2**30:g} is too small for one "
                                   f"candidate: the smallest of 16 sampled needs about {_gib(smallest)} to train "
                                   f"at batch {self.batch_size}")

    def _build(self, space: SearchSpace, arch_text: str, data: dict, trial_number: int) -> nn.Module:
        """The candidate's network, its weights drawn from the trial's seed: the same network each time."""
        with SEEDING:  # the global RNG seeds the weights: one thread at a time, and no compilation meanwhile
            # the CPU generator alone (the weights are drawn on the CPU): torch.manual_seed would also seed
            # the CUDA generators, a query on the legacy stream that breaks another member's graph capture
            torch.default_generator.manual_seed(self.seed * 100_003 + trial_number)
            return space.build(space.parse(arch_text), num_classes=data["num_classes"], input_size=data["input_size"])

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
            order = torch.randperm(len(data.train_x), generator=torch.Generator().manual_seed(0))
            n_valid = max(1, int(round(self.valid_fraction * len(data.train_x))))
            valid, train = order[:n_valid], order[n_valid:]
            # the stored images go to the device as they are (bytes: a quarter of what float32 would move) and are
            # scaled and normalised there, where a GPU does in milliseconds what took the host most of a second
            train_x = data.train_x[train].to(self.device).float() / scale
            mean = train_x.mean(dim=(0, 2, 3), keepdim=True)
            std = train_x.std(dim=(0, 2, 3), keepdim=True).clamp_min(1e-6)

            def prep(t: torch.Tensor) -> torch.Tensor:
                return (t.to(self.device).float() / scale - mean) / std

            held_out = (prep(data.train_x[valid]), data.train_y[valid].to(self.device))
            self._data = {"train": ((train_x - mean) / std, data.train_y[train].to(self.device)),
                          "valid": held_out,
                          # a rung's validation reads the split's first images, a sample drawn by the split's order
                          "valid_rung": held_out if self.rung_valid_images is None else
                          (held_out[0][:self.rung_valid_images], held_out[1][:self.rung_valid_images]),
                          "test": (prep(data.test_x), data.test_y.to(self.device)),
                          "num_classes": data.num_classes, "input_size": data.input_size,
                          "channels": int(data.train_x.shape[1])}
            del train_x
            self._decide_compile(len(train) // self.batch_size)
            if self.memory_budget_choice == "auto" and self.population > 1 and self.device.type == "cuda":
                # what the population may hold: most of what is free once the data lies on the device. Memory
                # this process's allocator caches but no tensor holds (earlier work in the same process: another
                # search, a benchmark's runs) goes back to the device first, or it reads as taken: one process's
                # successive searches on an H100 were given 61, 27, 12, 47, 28 and 4 GiB
                torch.cuda.empty_cache()
                self.memory_budget = AUTO_BUDGET_SHARE * torch.cuda.mem_get_info(self.device)[0]
            if self.population > 1:
                self._population = Population(self.population, self.memory_budget, ahead=self.ahead,
                                              device=self.device, host_turns=self.host_turns,
                                              round_size=self.round_size, lead_rounds=self.lead_rounds,
                                              finish_together=self.finish_together)
        return self._data

    def _decide_compile(self, batches: int) -> None:
        """`compile=auto`: compile only where a candidate trains long enough to pay for its compilation."""
        if self.compile_choice != "auto":
            return
        steps = self.epochs * (min(batches, self.max_batches) if self.max_batches else batches)
        if self.device.type != "cuda":
            self.compile, self.compile_reason = False, "off (auto: Inductor pays on CUDA only)"
        elif steps < COMPILE_PAYS_AFTER_STEPS:
            self.compile = False
            self.compile_reason = (f"off (auto: {steps} steps a candidate; compiling one took 15-33 s on an H200, "
                                   f"which pays back after about {COMPILE_PAYS_AFTER_STEPS} steps)")
        else:
            from nasutil.colocate.compile_cache import default_workers

            default_workers()
            self.compile, self.compile_reason = True, f"on (auto: {steps} steps a candidate)"

    def _inputs(self, x: torch.Tensor, in_channels: int) -> torch.Tensor:
        if x.shape[1] != in_channels:  # grayscale into a 3-channel stem
            x = x.expand(-1, in_channels, -1, -1)
        return x.contiguous(memory_format=torch.channels_last) if self.channels_last else x

    @torch.no_grad()
    def _correct(self, model: nn.Module, split: tuple[torch.Tensor, torch.Tensor], in_channels: int,
                 launching: Callable[[], contextlib.AbstractContextManager] | None = None) -> torch.Tensor:
        """Correct predictions on a split, counted on the device: queued, never waited for. `launching`: the
        block each forward is queued in (a population's `Gate.launching`), one at a time, so that a quiet hold
        asked meanwhile waits for one forward, not the whole split."""
        launching = launching or contextlib.nullcontext
        model.eval()
        x, y = split
        with launching():
            correct = torch.zeros((), dtype=torch.long, device=self.device)
        size = self.eval_batch
        for start in range(0, len(y), size):
            with launching(), torch.autocast(self.device.type, enabled=self.amp, dtype=self._amp_dtype):
                logits = model(self._inputs(x[start:start + size], in_channels))
                correct += (logits.argmax(1) == y[start:start + size]).sum()
        model.train()
        return correct

    @property
    def _amp_dtype(self) -> torch.dtype:
        """bfloat16: fp32's range, so no loss scaling (whose overflow checks wait for the host)."""
        return torch.bfloat16

    def train(self, space: SearchSpace, arch_text: str, reporter: Reporter, trial_number: int = 0) -> TrainResult:
        self._stop_if_interrupted()
        asked = time.perf_counter()
        data = self._load()
        with self.host_turn(), self.host_times.phase("build"):
            memory = self._memory(space, arch_text, data) if self.memory_budget is not None else 0.0
            if self.memory_budget is not None and memory > self.memory_budget:
                raise NasutilError(f"needs about {_gib(memory)} to train, over trainer.memory_budget_gb "
                                   f"{self.memory_budget / 2**30:g}")
            model = self._build(space, arch_text, data, trial_number)
        with _threads(self.threads):
            population = self._population
            if population is None:
                self._collect_if_memory_is_short()
                with self.host_times.phase("to_device"):
                    run = _Run(self, model, space.in_channels, reporter, trial_number, data)
                try:
                    run.prepare()
                    while not run.finished:
                        self._stop_if_interrupted()
                        run.step()
                    return run.result()
                except _Diverged:
                    return run.result()
                finally:
                    run.step_unit.release()
            run, member = None, None
            stamps = {"asked": asked, "built": time.perf_counter()}  # where this trial's time went (`trial_phases`)
            try:
                while True:  # again in a new place, rebuilt from its seed, where preparing ran out of memory
                    with population.place(memory) as place:
                        stamps["reserved"] = time.perf_counter()
                        try:
                            # moved to the device, warmed up and captured while the others train
                            with population.host_turn():
                                with self.host_times.phase("to_device"):
                                    run = _Run(self, model, space.in_channels, reporter, trial_number, data,
                                               stream=place.stream, gate=population.gate,
                                               waiting=population.waiting_for_device)
                                run.prepare()
                        except Exception as exc:
                            if not ran_out_of_memory(exc) or not population.out_of_memory(place):
                                raise
                            if run is not None:
                                with population.gate.launching():
                                    run.step_unit.release()
                            run, model = None, None
                            model = self._build(space, arch_text, data, trial_number)
                            continue
                        stamps["prepared"] = time.perf_counter()
                        member = Member(run.launch, run.total_steps, memory, stream=run.step_unit.stream)
                        try:
                            population.train(place, member)
                        except _Diverged:  # scored in its place: the test forward runs on its own stream
                            return run.result()
                    return run.result()
            finally:
                if run is not None:
                    with population.gate.launching():
                        run.step_unit.release()
                self._stamp(trial_number, stamps, member)

    def activity(self) -> dict[str, Any]:
        """The population's activity (where candidates train together), the host work's phases (`HostTimes`):
        what paced the candidates' training, and with a population each trial's `trial_phases`."""
        together = self._population.activity() if self._population is not None else {}
        with self._stamps_lock:
            phases = {str(n): dict(p) for n, p in sorted(self._trial_phases.items())}
        return {**together, **self.host_times.means_ms(), **({"trial_phases": phases} if phases else {})}

    def _stamp(self, trial_number: int, stamps: dict[str, float], member: Member | None) -> None:
        """A trial's times in the population, in seconds since its first reservation (`Population.membership`'s
        clock; negative before it): asked (train called), built (its network built), reserved (a place granted),
        prepared (on the device, warmed up, captured), joined and left (training among the others), returned; a
        phase it never reached is left out. Where a trial waited while the population was short of members
        shows here."""
        population = self._population
        if population is None:
            return
        times = dict(stamps)
        if member is not None and member.joined_at is not None:
            times["joined"] = member.joined_at
        if member is not None and member.left_at is not None:
            times["left"] = member.left_at
        times["returned"] = time.perf_counter()
        origin = population.origin()
        origin = times["asked"] if origin is None else origin
        with self._stamps_lock:
            self._trial_phases[trial_number] = {k: round(v - origin, 4) for k, v in times.items()}

    def _collect_if_memory_is_short(self) -> None:
        """Free what earlier candidates left in reference cycles where over half the device's memory is in
        use: the garbage collector knows nothing of device memory, and a search at batch 256 ran out of an
        H200's after 94 candidates trained one at a time, with the earlier ones' graph memory still held.
        Only where candidates train one at a time: a population's graphs are released by their threads."""
        if self.device.type != "cuda":
            return
        total = torch.cuda.get_device_properties(self.device).total_memory
        if torch.cuda.memory_allocated(self.device) > MEMORY_SHORT_SHARE * total:
            gc.collect()

    def interrupt(self) -> None:
        """Ctrl-C: a candidate training alone stops before its next step, a population stops every member
        after the step or validation in flight, and no training starts."""
        self._interrupted.set()
        if self._population is not None:
            self._population.stop(Interrupted(INTERRUPTED))

    def closing(self) -> None:
        """The search asks no more trials: the population hears it (`Population.closing`), and acts on it
        where `finish_together` is set."""
        if self._population is not None:
            self._population.closing()

    def _stop_if_interrupted(self) -> None:
        if self._interrupted.is_set():
            raise Interrupted(INTERRUPTED)

    def host_turn(self) -> contextlib.AbstractContextManager:
        """A turn of the population's host work (`Population.host_turn`), where candidates train together."""
        return self._population.host_turn() if self._population is not None else contextlib.nullcontext()

    def quiet(self, device: str) -> contextlib.AbstractContextManager:
        """The population held quiet while something is measured on the device it trains on."""
        if self._population is None or not same_device(device, self.device):
            return contextlib.nullcontext()
        return self._population.quiet()

    def idle(self, device: str) -> bool:
        """No member of the population trains, prepares or waits for a place on `device` (a population on another
        device, or none yet, counts as idle): the end of a search, where its last survivors would otherwise wait
        out the measurement queue's `max_wait_s` with nothing left to train."""
        return self._population is None or not same_device(device, self.device) or self._population.idle()

    def describe(self) -> str:
        amp = ", bf16 autocast" if self.amp else ""
        amp += ", CUDA-graph steps" if self.graphs else ""
        if self.compile_reason:
            amp += f", compile {self.compile_reason}"
        elif self.compile:
            amp += ", compiled by Inductor"
        together = ""
        if self.population > 1:
            budget = f" within {_gib(self.memory_budget)}" if self.memory_budget is not None else ""
            together = f", {self.population} candidates at once{budget} ({self.ahead} prepared ahead)"
            done = self.activity()
            if done.get("rounds"):
                together += (f"; trained {done['mean_together']:.1f} at once on average (most "
                             f"{done['most_together']}; {done['mean_paused']:.1f} paused for host work, "
                             f"{done['mean_unjoined']:.1f} reserved but not yet training), waiting for the device "
                             f"{done['device_bound']:.0%} of the time")
                if done.get("quiets"):
                    together += f"; held quiet for measurements {done['quiet_s']:.1f} s ({done['quiets']} times)"
                phases = [f"{label} {done[f'mean_{key}_ms']:.0f} ms" for key, label in HOST_PHASES
                          if f"mean_{key}_ms" in done]
                if phases:
                    together += f"; host work a candidate: {', '.join(phases)}"
        rungs = f", rungs validated on {self.rung_valid_images} images" if self.rung_valid_images is not None else ""
        return f"torch, {self.dataset}, {self.epochs} epochs on {self.device}{amp}{rungs}{together}"


#: host phases the summary names, as (`HostTimes` phase, label), in the order a candidate meets them
HOST_PHASES = (("build", "build"), ("to_device", "to the device"), ("data_order", "data order"),
               ("warm_up", "warm-up"), ("capture_wait", "wait to capture"), ("capture", "capture"),
               ("restore", "restore"), ("validate", "validation"), ("validation_wait", "its wait"),
               ("report", "report"))

#: the share of the device's free memory (once the data lies there) that `memory_budget_gb=auto` gives a
#: population: the rest is headroom for what the estimate leaves out (cuDNN's workspaces, validation)
AUTO_BUDGET_SHARE = 0.8
#: where tensors take more than this share of the device's memory, a candidate trained alone first collects garbage
MEMORY_SHORT_SHARE = 0.5
#: why a trial whose training a Ctrl-C stopped failed
INTERRUPTED = "interrupted (Ctrl-C or SIGTERM) before its training ended"
#: `compile=auto` compiles where a candidate takes at least this many steps: compiling a candidate's step
#: took 15-33 s on an H200's 16-core host, and saved 0.8 ms (batch 64) to 3.1 ms (batch 256) a
#: candidate-step in a population (BENCHMARKS.md, cotrain_speed), so it pays back after 5,000-40,000 steps
COMPILE_PAYS_AFTER_STEPS = 20_000


def ran_out_of_memory(exc: BaseException) -> bool:
    """Whether `exc` is, or was raised while handling, a CUDA out-of-memory error: one raised inside a graph
    capture may surface as the capture's failure to end, with the out-of-memory error as its context."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, torch.cuda.OutOfMemoryError):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def same_device(a: str | torch.device, b: str | torch.device) -> bool:
    """Whether two device names are one device: `cuda` is the current CUDA device, so `cuda` and `cuda:0` are one
    (compared as torch.device objects they differ, and a measurement on `cuda` then would not hold a population
    training on `cuda:0` quiet)."""
    a, b = torch.device(a), torch.device(b)
    if a.type != b.type:
        return False
    if a.type != "cuda":
        return True
    current = torch.cuda.current_device() if torch.cuda.is_available() else 0
    return (current if a.index is None else a.index) == (current if b.index is None else b.index)


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


class _Diverged(Exception):
    """An epoch's mean loss was not finite: the candidate's training ends there, and its result is what it
    scores then (a diverged network, whose logits are NaN, predicts one class). A result, not a failure:
    the search learns that the architecture trains badly under this recipe, as it does for one that
    merely trains slowly, and a population, which cuts such a member at a rung before its epoch ends,
    records it the same way."""


class _Run:
    """One candidate's training, one step at a time: what `train` loops over alone and what a population
    steps among others. Everything it touches is its own (network, momentum, schedule, data order, and on
    a GPU its stream and CUDA graph). `launch()` queues a step and never waits; the host work it hands
    back after an epoch's last step or at a rung (`checkpoint`) validates, reports and may raise."""

    def __init__(self, trainer: TorchTrainer, model: nn.Module, in_channels: int, reporter: Reporter,
                 trial_number: int, data: dict, stream: torch.cuda.Stream | None = None,
                 gate: Gate | None = None,
                 waiting: Callable[[], contextlib.AbstractContextManager] | None = None) -> None:
        t = trainer
        self.trainer, self.reporter, self.data, self.in_channels = t, reporter, data, in_channels
        self.gate = gate
        self.waiting = waiting or contextlib.nullcontext  # a block that only waits for the device
        self.train_x, self.train_y = data["train"]
        self.batches = len(self.train_y) // t.batch_size  # full batches only: a graph's shapes are fixed
        if self.batches < 1:
            raise NasutilError(f"trainer.batch_size {t.batch_size} is larger than the {len(self.train_y)} "
                               f"training images of {t.dataset}")
        if t.max_batches:
            self.batches = min(self.batches, t.max_batches)
        with self._launching():  # no copy to the device while the population is held quiet (or a capture alone)
            self.model = move_to_device(model, t.device, channels_last=t.channels_last)  # one copy, not hundreds
        self.total_steps = t.epochs * self.batches
        with self._launching():  # its buffers are allocated on the device: not while the population is quiet
            self.step_unit = TrainingStep(self.model, lambda x: t._inputs(x, in_channels), self.train_x,
                                          self.train_y, t.batch_size, cosine_rates(t.lr, self.total_steps),
                                          t.momentum, t.weight_decay, t._amp_dtype if t.amp else None,
                                          graph=t.graphs, compiled=t.compile, stream=stream,
                                          epoch_batches=self.batches,
                                          capture_alone=(gate.closed if gate is not None and t.capture == "alone"
                                                         else None),
                                          launching=gate.launching if gate is not None else None,
                                          warm_up_steps=t.warm_up_steps)
        self.generator = torch.Generator(device="cpu").manual_seed(t.seed * 100_003 + trial_number)
        fractions = [float(f) for f in getattr(reporter, "rungs", ()) or () if 0 < float(f) < 1]
        self.rungs = {max(1, math.ceil(f * self.total_steps)): f for f in sorted(fractions, reverse=True)}
        self.taken = 0
        self.prepared = False
        self.valid_acc = 0.0
        self.test_acc: float | None = None
        self.train_loss = math.nan
        self.diverged_in: int | None = None  # the epoch whose mean loss was not finite, where training ended

    @property
    def finished(self) -> bool:
        return self.taken >= self.total_steps

    def prepare(self) -> None:
        """The first epoch's data order on the device, and the step captured (where graphs are on): warmed
        up and captured beside the others' steps (captured alone where `capture=alone`)."""
        times = self.trainer.host_times
        with self._launching(), times.phase("data_order"):
            self._start_epoch()
        self.step_unit.capture()
        for name, seconds in self.step_unit.capture_phases.items():
            times.add(name, seconds)
        self.prepared = True

    def step(self) -> None:
        """One batch, and whatever host work follows it (alone: nothing else trains meanwhile)."""
        if not self.prepared:
            self.prepare()
        work = self.launch()
        if work is not None:
            work()

    def launch(self) -> Callable[[], None] | None:
        """Queue the next step; the host work due after it, if any (an epoch's end, a rung)."""
        self.step_unit.advance()
        self.taken += 1
        if self.taken % self.batches == 0 or self.taken in self.rungs:
            return self.checkpoint
        return None

    def checkpoint(self) -> None:
        """Validation after a step (test too after the last), read once, then the reports, which may
        raise (StoppedEarly); at an epoch's end the next epoch's data order."""
        t, taken = self.trainer, self.taken
        epoch_end, last = taken % self.batches == 0, taken >= self.total_steps
        # a rung inside an epoch reads `trainer.rung_valid_images` of the split; an epoch's end reads it whole
        split = self.data["valid"] if epoch_end else self.data.get("valid_rung", self.data["valid"])
        with self.step_unit.on_stream(), t.host_times.phase("validate"):  # a forward at a time in the gate
            valid = t._correct(self.model, split, self.in_channels, self._launching)
            test = t._correct(self.model, self.data["test"], self.in_channels, self._launching) if last else None
            with self._launching():
                loss = self.step_unit.queue_loss() if epoch_end else None
                done = self.step_unit.mark()
        with self.waiting(), t.host_times.phase("validation_wait"):  # the host turn is another's meanwhile
            if done is not None:
                done.synchronize()
        with self.step_unit.on_stream():
            if loss is not None:
                self.train_loss = float(loss) / self.batches
            self.valid_acc = 100.0 * int(valid) / len(split[1])
            if test is not None:
                self.test_acc = 100.0 * int(test) / len(self.data["test"][1])
        epoch = (taken - 1) // self.batches + 1
        if epoch_end and not math.isfinite(self.train_loss):
            self.diverged_in = epoch
            raise _Diverged(epoch)
        with t.host_times.phase("report"):  # the search's bookkeeping: a rung's cut, the study's records
            if taken in self.rungs:
                self.reporter.report_rung(self.rungs[taken], self.valid_acc)  # type: ignore[attr-defined]
            if epoch_end:
                self.reporter.report(epoch, self.valid_acc)
        if epoch_end and not last:
            with self._launching(), t.host_times.phase("data_order"):
                self._start_epoch()

    def result(self) -> TrainResult:
        if self.test_acc is None:  # trained without its last checkpoint (none happens without steps)
            with self._launching(), self.step_unit.on_stream():
                correct = self.trainer._correct(self.model, self.data["test"], self.in_channels)
                self.test_acc = 100.0 * int(correct) / len(self.data["test"][1])
        if self.diverged_in is not None:  # what it scores once its loss is not finite: a diverged network's guess
            return TrainResult(self.valid_acc, float(self.diverged_in),
                               {"valid_accuracy": self.valid_acc, "test_accuracy": self.test_acc,
                                "diverged_in_epoch": float(self.diverged_in)})
        return TrainResult(self.valid_acc, float(self.trainer.epochs),
                           {"valid_accuracy": self.valid_acc, "test_accuracy": self.test_acc,
                            "train_loss": self.train_loss})

    def _start_epoch(self) -> None:
        order = torch.randperm(len(self.train_y), generator=self.generator)
        with self.step_unit.on_stream():  # callers hold the launching gate: nothing runs while the population is quiet
            self.step_unit.start_epoch(order.to(self.trainer.device))

    def _launching(self) -> contextlib.AbstractContextManager:
        return self.gate.launching() if self.gate is not None else contextlib.nullcontext()
