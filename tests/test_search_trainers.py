"""Trainers: the tabular fidelities read the bundled table; the torch trainer really trains."""

from __future__ import annotations

import csv
import gzip
import importlib.resources
import time
from pathlib import Path

import optuna
import pytest

from conftest import Recorder
from nasutil.errors import NasutilError
from nasutil.registry import get_space
from nasutil.search.config import shipped
from nasutil.search.controller import EarlyStopping, StoppedEarly
from nasutil.search.trainers.tabular import TabularTrainer

ARCH = "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|"


def _table_row(arch: str) -> dict[str, str]:
    resource = importlib.resources.files("nasutil.data").joinpath("nasbench201_accuracy.csv.gz")
    with resource.open("rb") as raw, gzip.open(raw, "rt") as f:
        return next(r for r in csv.DictReader(f) if r["arch"] == arch)


@pytest.mark.parametrize("dataset", ["cifar10", "cifar100", "imagenet16_120"])
def test_tabular_reports_the_cheap_fidelity_then_full_training(dataset):
    row = _table_row(ARCH)
    rec = Recorder()
    result = TabularTrainer(dataset).train(get_space("nb201"), ARCH, rec)
    assert rec.steps == [(12, float(row[f"{dataset}_valid_12ep"])), (200, float(row[f"{dataset}_test_200ep"]))]
    assert result.accuracy == float(row[f"{dataset}_test_200ep"]) and result.epochs == 200


def test_tabular_single_fidelity_and_early_stop():
    row = _table_row(ARCH)
    rec = Recorder()
    assert TabularTrainer("cifar10", [12]).train(get_space("nb201"), ARCH, rec).accuracy == float(row["cifar10_valid_12ep"])
    with pytest.raises(StoppedEarly):
        TabularTrainer("cifar10").train(get_space("nb201"), ARCH, Recorder(stop_at=12))


@pytest.mark.parametrize("kwargs, message", [({"dataset": "svhn"}, "unknown tabular dataset"),
                                             ({"fidelities": [200, 12]}, "increasing subset"),
                                             ({"fidelities": [50]}, "increasing subset")])
def test_tabular_rejects_bad_settings(kwargs, message):
    with pytest.raises(NasutilError, match=message):
        TabularTrainer(**kwargs)


def test_tabular_serves_nb201_only():
    with pytest.raises(NasutilError, match="nb201 only"):
        TabularTrainer().check("darts")


def test_optuna_pruner_stops_training_through_the_companion_study():
    """Median pruner: after five complete curves, a candidate whose 12-epoch accuracy is below their
    median is stopped at step 12, in a multi-objective search too."""
    stopper = EarlyStopping(optuna.pruners.MedianPruner(n_startup_trials=5), [])
    for acc in (80.0, 82.0, 84.0, 86.0, 88.0):
        reporter = stopper.start({})
        reporter.report(12, acc)
        reporter.finish(acc + 5)
    with pytest.raises(StoppedEarly, match="step 12"):
        stopper.start({}).report(12, 70.0)
    curve: dict[str, float] = {}
    stopper.start(curve).report(12, 90.0)  # above the median: goes on
    assert curve == {"12": 90.0}


def test_torch_trainer_trains_on_digits_and_reports_every_epoch():
    trainer = shipped("trainer", "torch", dataset="digits", epochs=2, batch_size=64, lr=0.05,
                      max_batches_per_epoch=4)
    trainer.check("nb201")
    rec = Recorder()
    result = trainer.train(get_space("nb201"), ARCH, rec, trial_number=0)
    assert [s for s, _ in rec.steps] == [1, 2]
    assert 0.0 <= result.accuracy <= 100.0 and result.accuracy == rec.steps[-1][1]
    assert 0.0 <= result.extra["test_accuracy"] <= 100.0 and result.epochs == 2


@pytest.mark.parametrize("population", [1, 2])
def test_a_diverged_training_ends_with_its_result_not_a_failure(population):
    """A loss that is no longer finite ends the training at that epoch's end; the candidate's result is what
    it scores then, alone or in a population, and says where it diverged."""
    trainer = shipped("trainer", "torch", dataset="digits", epochs=3, batch_size=64, lr=1e30,
                      max_batches_per_epoch=4, population=population, device="cpu")
    rec = Recorder()
    result = trainer.train(get_space("nb201"), ARCH, rec, trial_number=0)
    assert result.extra["diverged_in_epoch"] == 1.0 and result.epochs == 1.0
    assert rec.steps == []  # no report of the epoch that diverged: the training ends there
    assert 0.0 <= result.accuracy <= 100.0 and 0.0 <= result.extra["test_accuracy"] <= 100.0
    assert "train_loss" not in result.extra  # no NaN in what the study stores


@pytest.mark.parametrize("dataset, expected", [("cifar10", "cifar-10-batches-bin"), ("mnist", "MNIST"),
                                               ("fashion_mnist", "FashionMNIST")])
def test_missing_dataset_folder_is_a_clear_error(tmp_path, dataset, expected, monkeypatch):
    from nasutil import datasets

    monkeypatch.setattr(datasets, "SYSTEM_IDX", {"fashion_mnist": tmp_path / "no-system-copy"})
    trainer = shipped("trainer", "torch", dataset=dataset, data_dir=str(tmp_path))
    with pytest.raises(NasutilError, match=f"dataset {dataset} not found.*{expected}.*never downloads"):
        trainer.check("nb201")


def test_a_dataset_loaded_in_the_background_fails_in_check_in_one_line(tmp_path, monkeypatch):
    """`start_loading` reads the data on a thread of its own; where that fails, `check` still says why in one line."""
    from nasutil import datasets

    monkeypatch.setattr(datasets, "SYSTEM_IDX", {"fashion_mnist": tmp_path / "no-system-copy"})
    trainer = shipped("trainer", "torch", dataset="fashion_mnist", data_dir=str(tmp_path))
    trainer.start_loading()
    trainer._preloading.join(timeout=60)
    assert not trainer._preloading.is_alive() and trainer._data is None
    with pytest.raises(NasutilError, match="dataset fashion_mnist not found.*never downloads"):
        trainer.check("nb201")


def test_check_finds_the_data_the_background_load_put_on_the_device():
    trainer = shipped("trainer", "torch", dataset="digits", device="cpu")
    trainer.start_loading()
    trainer._preloading.join(timeout=60)
    loaded = trainer._data
    assert loaded is not None and loaded["train"][0].device.type == "cpu"
    trainer.check("nb201")
    assert trainer._data is loaded  # read once
    trainer.start_loading()  # nothing to load again: no second thread
    assert not trainer._preloading.is_alive()


def test_a_search_whose_trainer_cannot_load_its_data_makes_no_study(tmp_path, monkeypatch):
    """The data is checked after the anchors' short search but before the study is made: one line, no storage."""
    import sqlite3

    from nasutil import datasets
    from nasutil.search.build import build_search
    from nasutil.search.config import compose

    monkeypatch.setattr(datasets, "SYSTEM_IDX", {"fashion_mnist": tmp_path / "no-system-copy"})
    db = tmp_path / "study.db"
    with pytest.raises(NasutilError, match="dataset fashion_mnist not found"):
        build_search(compose(["trainer=torch", "trainer.dataset=fashion_mnist", f"trainer.data_dir={tmp_path}",
                              "anchors=2", "evaluator=none", "storage=url", f"storage.url=sqlite:///{db}"]), tmp_path)
    if db.exists():
        with sqlite3.connect(db) as connection:
            tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            assert "studies" not in tables or connection.execute("SELECT COUNT(*) FROM studies").fetchone()[0] == 0


def test_pickled_cifar_is_refused_with_a_hint(tmp_path):
    (tmp_path / "cifar-10-batches-py").mkdir()
    trainer = shipped("trainer", "torch", dataset="cifar10", data_dir=str(tmp_path))
    with pytest.raises(NasutilError, match="pickled Python version"):
        trainer.check("nb201")


def test_unknown_trainer_option_is_named():
    with pytest.raises(NasutilError, match="takes no option epochz"):
        shipped("trainer", "torch", epochz=3)


def _write_idx(path, values, shape):
    import gzip
    import struct

    data = bytes([0, 0, 8, len(shape)]) + b"".join(struct.pack(">i", n) for n in shape) + bytes(values)
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)


def test_idx_files_plain_or_gzipped_and_malformed(tmp_path):
    from nasutil import datasets

    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    _write_idx(raw / "train-images-idx3-ubyte.gz", range(2 * 4 * 4), (2, 4, 4))
    _write_idx(raw / "train-labels-idx1-ubyte", [3, 7], (2,))
    _write_idx(raw / "t10k-images-idx3-ubyte", [1] * 16, (1, 4, 4))
    _write_idx(raw / "t10k-labels-idx1-ubyte.gz", [5], (1,))
    data = datasets.load("mnist", tmp_path)
    assert tuple(data.train_x.shape) == (2, 1, 4, 4) and data.train_y.tolist() == [3, 7]
    assert int(data.train_x[1, 0, 0, 0]) == 16 and data.test_y.tolist() == [5]
    (raw / "t10k-labels-idx1-ubyte.gz").unlink()
    _write_idx(raw / "t10k-labels-idx1-ubyte", [5, 6], (3,))  # says 3 labels, holds 2
    with pytest.raises(NasutilError, match="holds 2 values"):
        datasets.load("mnist", tmp_path)


@pytest.mark.skipif(not Path("/usr/share/datasets/fashion-mnist").is_dir(),
                    reason="needs Debian's dataset-fashion-mnist package")
def test_fashion_mnist_is_found_where_the_system_package_put_it(tmp_path):
    from nasutil import datasets

    data = datasets.load("fashion_mnist", tmp_path)  # nothing in the data folder
    assert tuple(data.train_x.shape) == (60000, 1, 28, 28) and tuple(data.test_x.shape) == (10000, 1, 28, 28)
    assert data.train_y[:10].tolist() == [9, 0, 0, 3, 0, 2, 7, 2, 5, 5]  # the published first labels


def test_a_quiet_hold_asked_during_a_validation_waits_for_one_forward_not_the_split():
    """A population's validation queues its forwards one at a time in the gate: a measurement that asks for
    a quiet hold meanwhile gets it after the forward in flight, not after the whole split (a validation of
    6,000 images took 0.3-0.5 s of host work beside a population on an H100)."""
    import threading

    import torch

    from nasutil.colocate.population import Gate
    from nasutil.search.trainers.torch_trainer import TorchTrainer

    trainer = TorchTrainer(dataset="digits", device="cpu", eval_batch=10)
    gate = Gate()
    order: list[str] = []
    closer_waiting = threading.Event()

    class Recording(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            order.append("forward")
            if len(order) == 1:  # the first forward ends only once a closer waits at the gate
                assert closer_waiting.wait(30)
                deadline = time.monotonic() + 30
                while not gate._closed and time.monotonic() < deadline:
                    time.sleep(0.001)
            return torch.zeros(len(x), 3)

    def close_once() -> None:
        closer_waiting.set()
        with gate.closed():
            order.append("held quiet")

    x, y = torch.zeros(30, 1, 4, 4), torch.zeros(30, dtype=torch.long)
    closer = threading.Thread(target=close_once)
    validation = threading.Thread(target=lambda: order.append(
        int(trainer._correct(Recording(), (x, y), 1, gate.launching))))
    validation.start()
    while not order:
        time.sleep(0.001)
    closer.start()
    validation.join(timeout=60)
    closer.join(timeout=60)
    assert order == ["forward", "held quiet", "forward", "forward", 30]
