"""Learned coded computation on CPU: codes that learn, decoders that are exact where they should be,
checkpoints that round-trip and resume, and bad input refused in one line."""

from __future__ import annotations

import json
import pickle

import pytest
import torch
import torch.nn as nn

from nasutil.codes import CodeSpec, RunSettings, evaluate_run, train_run
from nasutil.codes.code import Code, every_single_erasure
from nasutil.codes.decoders import SubtractionDecoder
from nasutil.codes.encoders import ConcatEncoder, SumEncoder
from nasutil.errors import NasutilError

QUICK = dict(base="mlp", dataset="digits", base_epochs=10, batch_size=32)


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # bit-for-bit repeatable runs, and no contention with other tests
    yield
    torch.set_num_threads(before)


def test_a_learned_code_rebuilds_unavailable_digits_far_above_chance(tmp_path):
    scores = train_run(RunSettings(**QUICK, code=CodeSpec(k=2), epochs=15), tmp_path / "run", device="cpu")
    assert scores.normal_accuracy > 0.9
    assert scores.reconstruction_accuracy > 3 * scores.chance, scores  # 10% would be a guess
    assert scores.rebuilt == 360  # 360 test images: 180 groups of 2, each output unavailable once


def test_a_parity_model_behind_sum_and_subtraction_learns_too(tmp_path):
    spec = CodeSpec(k=2, encoder="sum", decoder="subtract", parity="copy")
    scores = train_run(RunSettings(**QUICK, code=spec, epochs=10), tmp_path / "run", device="cpu")
    assert scores.reconstruction_accuracy > 0.5, scores


def test_subtraction_is_exact_for_a_linear_base_and_its_own_copy():
    """F(X1 + X2) = F(X1) + F(X2) for a bias-free linear F: the parity-models decoder then rebuilds exactly."""
    torch.manual_seed(0)
    base = nn.Sequential(nn.Flatten(), nn.Linear(64, 10, bias=False))
    groups = torch.rand(5, 3, 1, 8, 8)
    outputs = base(groups.flatten(0, 1)).view(5, 3, 10)
    parity = base(SumEncoder()(groups).flatten(0, 1)).view(5, 1, 10)
    outputs_k, parity_k, erased = every_single_erasure(outputs, parity)
    rebuilt = SubtractionDecoder()(outputs_k.masked_fill(erased.unsqueeze(-1), 1e6), parity_k, erased)
    assert torch.allclose(rebuilt[erased], outputs_k[erased], atol=1e-5)  # the erased value is never read


def test_the_concat_encoder_tiles_k_images_into_one():
    images = torch.arange(4 * 16, dtype=torch.float32).view(1, 4, 1, 4, 4).expand(2, -1, -1, -1, -1)
    parity = ConcatEncoder(4)(images)
    assert parity.shape == (2, 1, 1, 4, 4)
    assert parity[0, 0, 0, 0, 0] < parity[0, 0, 0, 0, 3] < parity[0, 0, 0, 3, 0] < parity[0, 0, 0, 3, 3]  # quadrants
    with pytest.raises(NasutilError, match="k = 2 or 4"):
        Code(CodeSpec(k=3, encoder="concat", decoder="subtract", parity="copy"), "mlp", (1, 8, 8), 10)


def test_checkpoints_round_trip_and_an_interrupted_run_continues_where_it_stopped(tmp_path):
    straight = train_run(RunSettings(**QUICK, code=CodeSpec(k=2), epochs=4), tmp_path / "straight", device="cpu")
    train_run(RunSettings(**QUICK, code=CodeSpec(k=2), epochs=2), tmp_path / "resumed", device="cpu")
    resumed = train_run(RunSettings(**QUICK, code=CodeSpec(k=2), epochs=4), tmp_path / "resumed", device="cpu")
    assert resumed == straight  # same group draws, optimizer state restored: the same code
    assert evaluate_run(tmp_path / "resumed", device="cpu") == resumed
    history = [json.loads(line) for line in (tmp_path / "resumed" / "history.jsonl").read_text().splitlines()]
    assert [h["epoch"] for h in history] == [1, 2, 3, 4]


class _StopAfter(Exception):
    pass


def test_a_base_stopped_part_way_continues_from_its_last_finished_epoch(tmp_path):
    """A base is stored after every epoch: a stop in its training loses at most the epoch under way,
    and the continued base is the one an uninterrupted run trains."""
    settings = RunSettings(**{**QUICK, "base_epochs": 4}, code=CodeSpec(k=2), epochs=1)
    straight = train_run(settings, tmp_path / "straight", device="cpu")
    seen: list[tuple[str, int]] = []

    def stop_in_third_base_epoch(stage, epoch, total, line):
        seen.append((stage, epoch))
        if (stage, epoch) == ("base", 2):
            raise _StopAfter  # as a Ctrl-C between the base's second and third epochs

    with pytest.raises(_StopAfter):
        train_run(settings, tmp_path / "resumed", device="cpu", progress=stop_in_third_base_epoch)
    assert (tmp_path / "resumed" / "base.partial.safetensors").is_file()
    assert not (tmp_path / "resumed" / "base.safetensors").exists()
    seen.clear()
    resumed = train_run(settings, tmp_path / "resumed", device="cpu", progress=lambda s, e, t, line: seen.append((s, e)))
    assert seen == [("base", 3), ("base", 4), ("code", 1)]  # epochs 1 and 2 are not trained again
    assert resumed == straight
    assert not (tmp_path / "resumed" / "base.partial.safetensors").exists()


def test_a_partial_base_of_another_plan_is_trained_again_from_the_start(tmp_path):
    """A partial base left by other settings (here another seed) is never continued as this one."""
    from nasutil.codes.data import load_code_data
    from nasutil.codes.run import partial_base_path, trained_base

    data = load_code_data("digits", "data")
    path = tmp_path / "base.safetensors"
    with pytest.raises(_StopAfter):
        trained_base("mlp", data, path, 3, 32, torch.device("cpu"), seed=1,
                     on_epoch=lambda epoch, loss: (_ for _ in ()).throw(_StopAfter()))
    assert partial_base_path(path).is_file()
    epochs: list[int] = []
    base = trained_base("mlp", data, path, 3, 32, torch.device("cpu"), seed=0,
                        on_epoch=lambda epoch, loss: epochs.append(epoch))
    assert epochs == [1, 2, 3]
    fresh = trained_base("mlp", data, tmp_path / "fresh.safetensors", 3, 32, torch.device("cpu"), seed=0)
    assert all(torch.equal(a, b) for a, b in zip(base.state_dict().values(), fresh.state_dict().values()))


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("codes")
    for name, seed in (("a", 0), ("b", 1)):
        train_run(RunSettings(**{**QUICK, "base_epochs": 1}, code=CodeSpec(k=2), epochs=1, seed=seed), folder / name,
                  device="cpu")
    return folder


@pytest.mark.parametrize("args, message", [
    (["codes", "train", "--out", "{tmp}/x", "--dataset", "digits", "--k", "1"], "k must be a whole number from 2"),
    (["codes", "train", "--out", "{tmp}/x", "--dataset", "imagenet"], "unknown dataset 'imagenet'"),
    (["codes", "train", "--out", "{tmp}/x", "--dataset", "mnist", "--data-dir", "{tmp}/no-such-folder"], "MNIST"),
    (["codes", "train", "--out", "{tmp}/x", "--dataset", "digits", "--encoder", "fft"], "unknown encoder 'fft'"),
    (["codes", "train", "--out", "{tmp}/x", "--dataset", "digits", "--r", "2", "--encoder", "sum"], "r > 1 needs"),
    (["codes", "train", "--out", "{tmp}/x", "--dataset", "digits", "--base", "vgg99"], "unknown base 'vgg99'"),
    (["codes", "train", "--out", "{tmp}/x", "--dataset", "digits", "--base-epochs", "0"],
     "--base-epochs: expected a positive integer, got '0'"),
    (["codes", "eval", "{runs}/a", "--code", "{runs}/b/code.safetensors"], "belongs to another base"),
    (["codes", "eval", "{runs}/a", "--code", "{tmp}/model.pkl"], "cannot read checkpoint"),
    (["codes", "eval", "{tmp}"], "not a codes run"),
    (["codes", "train", "--out", "{runs}/a", "--dataset", "digits", "--k", "3"], "code.k: 2 -> 3"),
])
def test_bad_input_is_one_line_with_exit_code_2(cli, tmp_path, two_runs, args, message):
    (tmp_path / "model.pkl").write_bytes(pickle.dumps({"weights": [1, 2, 3]}))
    before = sorted(p.name for p in (two_runs / "a").iterdir())
    result = cli(*[a.format(tmp=tmp_path, runs=two_runs) for a in args], "--device", "cpu")
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
    assert sorted(p.name for p in (two_runs / "a").iterdir()) == before  # nothing stored was touched


def test_a_search_over_parity_models_trains_each_candidate_as_a_parity_model(tmp_path, monkeypatch):
    """`nasutil-search trainer=codes`: the candidate is the parity network; its accuracy is degraded-mode. The
    base is kept in the cache folder, not in the folder the search was launched from."""
    import optuna

    from nasutil.cli.search_command import main

    launch = tmp_path / "launch"
    launch.mkdir()
    monkeypatch.chdir(launch)
    monkeypatch.setenv("NASUTIL_CACHE_DIR", str(tmp_path / "cache"))
    args = [f"hydra.run.dir={tmp_path}/run", "n_trials=2", "trainer=codes", "trainer.dataset=digits",
            "trainer.epochs=1", "trainer.base_epochs=2", "trainer.train_images=300", "trainer.batch_size=32",
            "prune=none", "plots=false", "progress=false", "study_name=parity-search"]
    assert main(args) == 0
    trials = optuna.load_study(study_name="parity-search", storage=f"sqlite:///{tmp_path}/run/study.db").trials
    assert len(trials) == 2 and all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    for t in trials:
        assert 0 <= t.user_attrs["accuracy"] <= 100 and "test_degraded_accuracy" in str(t.user_attrs)
    bases = list((tmp_path / "cache" / "codes-base").glob("*.safetensors"))
    assert len(bases) == 1 and "-e2-b32-n300-" in bases[0].name  # the base, trained once for all trials
    assert list(launch.iterdir()) == []


def test_a_base_trained_with_other_settings_is_not_taken_for_this_one(tmp_path):
    """The kept base's file is named by every setting that shapes it: a search with fewer base epochs or
    another training set must not reuse a base trained for another search."""
    from nasutil.search.trainers.codes_trainer import CodesTrainer

    names = {CodesTrainer(base_dir=str(tmp_path), device="cpu", **change).base_file_name()
             for change in ({}, {"base_epochs": 2}, {"batch_size": 32}, {"train_images": 300}, {"seed": 1},
                            {"dataset": "mnist"}, {"base": "lenet5"})}
    assert len(names) == 7
    assert CodesTrainer(base_dir=str(tmp_path), device="cpu").base_dir == tmp_path



@pytest.mark.parametrize("setting", ["base_epochs", "epochs", "batch_size"])
@pytest.mark.parametrize("value", [0, None, 2.5])
def test_a_search_over_parity_models_needs_a_trained_base(tmp_path, setting, value):
    """base_epochs=0 once trained every parity model against an untrained base (its outputs noise, its accuracy
    chance); None failed with "'<' not supported between instances of 'NoneType' and 'int'"."""
    from nasutil.search.trainers.codes_trainer import CodesTrainer

    with pytest.raises(NasutilError, match=f"^trainer.{setting} must be a whole number >= 1, got {value}$"):
        CodesTrainer(base_dir=str(tmp_path), device="cpu", **{setting: value})


def test_what_a_code_costs_against_replication():
    """Replication runs every query twice (overhead 1); a parity model behind the sum encoder runs one base-sized
    inference per k queries (1/k); a learned MLP encoder on 784-pixel images costs more than the small base."""
    from nasutil.codes.bases import build_base
    from nasutil.codes.cost import code_cost

    base = build_base("mlp", 1, 28, 10)
    parity = code_cost(Code(CodeSpec(k=4, encoder="sum", decoder="subtract", parity="copy"), "mlp", (1, 28, 28), 10),
                       base, (1, 28, 28), 10)
    assert parity.base_flops == 2 * (784 * 200 + 200 * 100 + 100 * 10)
    assert parity.overhead == pytest.approx(1 / 4) and parity.encoder_flops == parity.decoder_flops == 0
    learned = code_cost(Code(CodeSpec(k=2), "mlp", (1, 28, 28), 10), base, (1, 28, 28), 10)
    assert learned.encoder_flops == 2 * (1568 * 1568 + 1568 * 784) and learned.overhead > 1


def test_serving_rebuilds_one_output_per_group_and_serves_what_the_base_would():
    """A bias-free linear base with its own weights as parity model: subtraction rebuilds exactly, so the
    coded server answers every query as the base does, one output per group rebuilt; the unprotected and
    replicated servers answer as the base does too (on the CPU the group runs sequentially)."""
    from nasutil.codes.serving import serve

    torch.manual_seed(0)
    code = Code(CodeSpec(k=2, encoder="sum", decoder="subtract", parity="copy"), "mlp", (1, 8, 8), 10)
    base = nn.Sequential(nn.Flatten(), nn.Linear(64, 10, bias=False))
    code.parity_model = nn.Sequential(nn.Flatten(), nn.Linear(64, 10, bias=False))
    code.parity_model.load_state_dict(base.state_dict())
    images = torch.rand(120, 1, 8, 8)
    labels = base(images).argmax(-1)
    for way in ("unprotected", "replicated", "coded"):
        r = serve(way, base, code, images, labels, groups=3, dtype=torch.float32)
        assert r.requests == 20 and r.accuracy == 1.0 and r.queries_per_s > 0 and r.p50_ms <= r.p99_ms <= r.max_ms
        assert r.strategy == "sequential"
    assert r.rebuilt_accuracy == 1.0 and r.reconstruction_accuracy == 1.0
    with pytest.raises(NasutilError, match="fewer than two requests"):
        serve("coded", base, code, images[:6], labels[:6], groups=3)
    with pytest.raises(NasutilError, match="unknown way"):
        serve("mirrored", base, code, images, labels, groups=3)


@pytest.mark.parametrize("call, message", [
    (lambda tmp: train_run(None, tmp), "takes a RunSettings, got NoneType"),
    (lambda tmp: train_run(RunSettings(), 3), "folder is a path, got int"),
    (lambda tmp: train_run(RunSettings(), tmp, device=None), "unknown device None"),
    (lambda tmp: train_run(RunSettings(), tmp, device=3), "unknown device 3"),
])
def test_train_run_of_the_wrong_kind_is_one_line(tmp_path, call, message):
    """Settings that are not a RunSettings, a folder that is not a path and a device that is not text failed
    with an AttributeError or a TypeError from deep inside; nothing is written before the refusal."""
    with pytest.raises(NasutilError, match=message):
        call(tmp_path / "run")
    assert not (tmp_path / "run").exists()
