"""Where a search's arithmetic goes: training steps against validation and test, from a recorded run.

    python benchmarks/search_arithmetic.py benchmarks/results/h100/population/copies_s146/population_search_b64_s146_runs.jsonl \
        --out benchmarks/results/cpu/search_arithmetic

A candidate cut at a rung trained a fraction of an epoch, yet it was validated on the whole validation split
at every rung it reached; a candidate trained to the end was validated at each rung, at its end, and tested.
With halving, most candidates stop early, so validation weighs more in a population's work than in one at a
time's, where each candidate is validated and tested once. This script counts both from a run's `work` (each
trial's architecture and epochs trained, as `population_search.py` records it), with FLOPs from
`torch.utils.flop_counter.FlopCounterMode` on each architecture built as the trainer builds it (a training
step forward and backward in training mode; a validation or test forward in eval mode, which computes every
edge). FLOPs are the device's arithmetic, not its time: a training step at batch 64 is paced by how many
kernels it launches (BENCHMARKS.md, "Kernels a training step launches"), a validation forward of 1,024 images
mostly by its arithmetic, so validation's share of the device's time is most likely smaller than its share of
the FLOPs. No GPU is needed. Runs of one epoch only (as `population_search.py` runs them by default).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from nasutil.errors import NasutilError
from nasutil.search.halving import ParetoHalving

#: Fashion-MNIST as the trainer splits it (`trainer.valid_fraction=0.1` of the 60,000 training images held out)
TRAIN_IMAGES, VALID_IMAGES, TEST_IMAGES = 54_000, 6_000, 10_000
#: the rungs of `halving=pareto` and `halving=accuracy` with their defaults (1/9 and 1/3 of the training)
DEFAULT_RUNGS = ParetoHalving().rungs
#: a trial that trained at least this share of its epoch trained to the end (epochs are stored rounded)
WHOLE = 0.999


def evaluations(epochs: float, rungs: Sequence[float], total_epochs: float = 1.0) -> tuple[int, int]:
    """(validations, tests) of a trial that trained `epochs` of `total_epochs`: one validation at each rung it
    reached, and one validation and one test at its end where it trained to the end."""
    share = epochs / total_epochs
    whole = share >= WHOLE
    reached = sum(share >= rung - 1e-6 for rung in rungs)
    return reached + int(whole), int(whole)


class FlopCounts:
    """FLOPs an image of each architecture costs: a training step's (forward and backward) and a forward's, on
    the space's network as the trainer builds it (a grayscale image fed to its stem's channels)."""

    def __init__(self, space: str = "nb201", image_size: int = 28, num_classes: int = 10) -> None:
        from nasutil.registry import get_space

        self.space, self.image_size, self.num_classes = get_space(space), image_size, num_classes
        self._known: dict[str, tuple[float, float]] = {}

    def of(self, arch_text: str, batch: int = 8) -> tuple[float, float]:
        """(training FLOPs, forward FLOPs) an image."""
        if arch_text not in self._known:
            import torch
            from torch.utils.flop_counter import FlopCounterMode

            model = self.space.build(self.space.parse(arch_text), num_classes=self.num_classes)
            x = torch.randn(batch, self.space.in_channels, self.image_size, self.image_size)
            model.eval()
            with FlopCounterMode(display=False) as counter, torch.no_grad():
                model(x)
            forward = counter.get_total_flops() / batch
            model.train()
            with FlopCounterMode(display=False) as counter:
                model(x).sum().backward()
            self._known[arch_text] = (counter.get_total_flops() / batch, forward)
        return self._known[arch_text]


def rungs_of(run: dict) -> tuple[float, ...]:
    """The rungs a recorded run cut at: none without halving, else its reduction factor's (`-fF` names one)."""
    if run.get("halving", "none") == "none":
        return ()
    factor = run.get("reduction_factor")  # population_search.py's -fF: rungs at 1/F^2 and 1/F
    return DEFAULT_RUNGS if factor is None else ParetoHalving(factor, min_fraction=1 / factor ** 2).rungs


def arithmetic(run: dict, flops: FlopCounts) -> dict:
    """A recorded run's FLOPs in training, validation and test, and how many validations and tests it ran."""
    rungs = rungs_of(run)
    training = validation = at_rungs = test = 0.0
    validations = tests = 0
    for arch, epochs in run["work"]:
        step, forward = flops.of(arch)
        done_validations, done_tests = evaluations(float(epochs), rungs)
        training += float(epochs) * TRAIN_IMAGES * step
        validation += done_validations * VALID_IMAGES * forward
        at_rungs += (done_validations - done_tests) * VALID_IMAGES * forward  # a test comes with the end's validation
        test += done_tests * TEST_IMAGES * forward
        validations, tests = validations + done_validations, tests + done_tests
    total = training + validation + test
    return {"run": run["run"], "seed": run["seed"], "batch_size": run["batch_size"], "trials": len(run["work"]),
            "epochs": sum(float(e) for _, e in run["work"]), "validations": validations, "tests": tests,
            "training_flops": training, "validation_flops": validation, "test_flops": test,
            "evaluation_share": (validation + test) / total if total else 0.0,
            "validation_share": validation / total if total else 0.0,
            "rung_validation_share": at_rungs / total if total else 0.0,
            "validations_recorded": (run.get("population_activity") or {}).get("validate_count")}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", type=Path, nargs="+", help="population_search.py's *_runs.jsonl files")
    parser.add_argument("--out", type=Path, required=True, help="folder for search_arithmetic.json")
    args = parser.parse_args(argv)
    flops = FlopCounts()
    results = []
    for path in args.runs:
        if not path.is_file():
            parser.error(f"no such file: {path}")
        for number, line in enumerate(path.read_text().splitlines(), 1):
            try:
                run = json.loads(line)
                if not run.get("work") or run.get("eager"):  # an eager run's few trials rate the eager step alone
                    continue
                if max(float(epochs) for _, epochs in run["work"]) > 1 + 1e-6:
                    parser.error(f"{path}:{number}: a run of more than one epoch, which this count does not cover")
                counted = arithmetic(run, flops)
            except (ValueError, TypeError, AttributeError, KeyError, NasutilError) as exc:
                parser.error(f"{path}:{number}: not a run of population_search.py's *_runs.jsonl ({exc})")
            else:
                results.append({"file": path.name, **counted})
                print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in results[-1].items()
                                  if not k.endswith("_flops")}))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "search_arithmetic.json").write_text(json.dumps(
        {"train_images": TRAIN_IMAGES, "valid_images": VALID_IMAGES, "test_images": TEST_IMAGES,
         "rungs": list(DEFAULT_RUNGS), "runs": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
