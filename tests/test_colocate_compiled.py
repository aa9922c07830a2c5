"""Networks compiled by Inductor before they are co-located or trained: the same outputs and the same
training as the networks uncompiled (on the CPU, where Inductor generates C++)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from nasutil.colocate import colocate, measure_group
from nasutil.colocate.training_step import TrainingStep, cosine_rates
from nasutil.errors import NasutilError
from nasutil.evaluator import Candidate, MeasureConfig
from nasutil.registry import get_space
from nasutil_search_spaces.nb201_network import NB201Network

A = "|nor_conv_3x3~0|+|nor_conv_1x1~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|none~2|"
B = "|avg_pool_3x3~0|+|nor_conv_3x3~0|skip_connect~1|+|nor_conv_1x1~0|none~1|nor_conv_3x3~2|"


def small(arch: str, seed: int) -> NB201Network:
    """A small network of the space (4 channels, one cell a stage): the same ops, cheap to compile."""
    torch.manual_seed(seed)
    return NB201Network(get_space("nb201").parse(arch), channels=4, cells_per_stage=1)


def test_compiled_networks_compute_what_each_computes_uncompiled():
    # two networks of one architecture with different weights share compiled code, and must not share weights
    models = [small(A, 0).eval(), small(A, 1).eval(), small(B, 2).eval()]
    inputs = [torch.randn(2, 3, 16, 16) for _ in models]
    seen = []
    group = colocate(models, inputs, "streams", compiled=True, progress=lambda done, total, s: seen.append(done))
    assert group.compiled and group.strategy == "sequential"  # streams needs CUDA: fell back, compiled still
    assert seen == [1, 2, 3]
    with torch.inference_mode():
        outputs = [o.clone() for o in group.run()]
        plain = [m(x) for m, x in zip(models, inputs)]
    assert not torch.allclose(plain[0], plain[1])
    for out, ref in zip(outputs, plain):
        torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)


def test_fused_does_not_take_compiled_networks():
    models = [small(A, 0).eval(), small(B, 1).eval()]
    x = torch.randn(2, 3, 16, 16)
    with pytest.raises(NasutilError, match="does not run compiled ones"):
        colocate(models, x, "fused", fallback=False, compiled=True)
    assert colocate(models, x, "fused").strategy == "fused"  # uncompiled, it applies


def test_a_compiled_group_is_measured_against_the_uncompiled_networks_too(tmp_path):
    from nasutil.evaluator.cache import MeasurementCache

    config = MeasureConfig(device="cpu", dtype="fp32", batch_size=2, mode="compile", counters=False, input_size=16,
                           warmup=1, repeats=2, min_window_ms=1.0)
    group = [Candidate("nb201", A), Candidate("nb201", A)]
    cache = MeasurementCache(tmp_path / "cache.db")
    m = measure_group(group, config, "sequential", cache=cache)
    assert m.ok and m.compiled and m.compile_s > 0 and not m.cached
    assert m.plain_sequential_latency_ms > 0 and m.sequential_latency_ms > 0
    assert m.speedup_over_plain == pytest.approx(m.plain_sequential_latency_ms / m.latency_ms)
    # compiled and plain results of one group are cached apart
    plain = measure_group(group, config.with_(mode="eager"), "sequential", cache=cache)
    assert plain.ok and not plain.cached and not plain.compiled and plain.plain_sequential_latency_ms is None
    again = measure_group(group, config, "sequential", cache=cache)
    assert again.cached and again.compiled and again.latency_ms == m.latency_ms
    # compiled with the weights frozen: another way, kept apart from the default one (weights as inputs)
    assert m.compiled_frozen is False
    frozen = measure_group(group, config, "sequential", cache=cache, freezing=True)
    assert frozen.ok and not frozen.cached and frozen.compiled and frozen.compiled_frozen is True
    cache.close()


def test_a_compiled_training_step_trains_as_the_uncompiled_one():
    torch.manual_seed(0)
    x, y = torch.randn(64, 3, 16, 16), torch.randint(0, 10, (64,))
    rows = [torch.randperm(64)[:16] for _ in range(4)]
    trained = {}
    for compiled in (False, True):
        model = small(A, 3).train()
        unit = TrainingStep(model, lambda t: t, x, y, 16, cosine_rates(0.05, 4), 0.9, 5e-4, None, graph=False,
                            compiled=compiled)
        for step, r in enumerate(rows):
            unit.run(step, r)
        with torch.no_grad():
            logits = model.eval()(x)
        trained[compiled] = (unit.take_loss(4), F.cross_entropy(logits, y).item(), model)
    assert trained[True][0] == pytest.approx(trained[False][0], rel=1e-4)
    assert trained[True][1] == pytest.approx(trained[False][1], rel=1e-4)
    for p, q in zip(trained[True][2].parameters(), trained[False][2].parameters()):
        torch.testing.assert_close(p, q, rtol=1e-3, atol=1e-5)


def test_trainer_compile_must_be_a_boolean():
    from nasutil.search.config import shipped

    with pytest.raises(NasutilError, match="trainer.compile"):
        shipped("trainer", "torch", dataset="digits", device="cpu", compile="yes")
    trainer = shipped("trainer", "torch", dataset="digits", device="cpu", compile=True)
    assert "compiled by Inductor" in trainer.describe()


def test_cli_colocate_compile(cli):
    r = cli("colocate", "nb201", A, A, "--device", "cpu", "--batch-size", "1", "--strategy", "sequential",
            "--compile", "--no-counters", "--no-cache")
    assert r.returncode == 0, r.stderr
    assert "compiled in" in r.stdout and "faster than the uncompiled networks" in r.stdout, r.stdout


def test_cli_colocate_compile_with_freezing_reaches_the_worker(cli):
    import json

    r = cli("colocate", "nb201", A, "--device", "cpu", "--batch-size", "1", "--strategy", "sequential",
            "--compile", "--freezing", "--no-counters", "--no-cache", "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["compiled"] is True and result["compiled_frozen"] is True, result
    assert result["speedup_over_plain"] > 0


@pytest.mark.parametrize("flag", ["--freezing", "--no-freezing"])
def test_cli_freezing_without_compile_is_one_line(cli, flag):
    r = cli("colocate", "nb201", A, "--device", "cpu", flag, "--no-cache")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "nasutil: error: --freezing and --no-freezing apply to compiled networks: add --compile"]


def test_cli_colocate_compile_with_a_bad_worker_count_is_one_line(cli):
    r = cli("colocate", "nb201", A, A, "--device", "cpu", "--batch-size", "1", "--compile", "--no-cache",
            env={"NASUTIL_COMPILE_WORKERS": "all"})
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "nasutil: error: NASUTIL_COMPILE_WORKERS must be a whole number >= 0 (0: no child processes), got 'all'"]


def _unique_batch() -> int:
    """A batch size no earlier run compiled for, so that a cache hit can only come from this test's children."""
    import secrets

    return 3 + secrets.randbelow(4000)


def _cache_hits() -> int:
    from torch._dynamo.utils import counters

    return counters["inductor"]["fxgraph_cache_hit"]


def test_child_processes_compile_what_this_process_then_finds_in_the_cache(monkeypatch, tmp_path):
    # a cache of its own: a test process beside this one compiling into the shared default could pull a
    # compiled library away under the children's feet
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    from nasutil.colocate.compile_cache import CompileCacheWarmer, wait_quietly
    from nasutil.colocate.compiled import compile_for_inference, inference_options

    batch = _unique_batch()
    models = [small(A, 0).eval(), small(A, 1).eval(), small(B, 2).eval(), small(B, 3).eval()]
    inputs = [torch.randn(batch + (n == 3), 3, 8, 8) for n in range(len(models))]  # the last: another shape
    with CompileCacheWarmer(workers=2) as warmer, torch.inference_mode():
        futures = [warmer.submit(m, x, options=inference_options()) for m, x in zip(models, inputs)]
        assert futures[0] is futures[1]  # one architecture and shape, one job
        seconds = [wait_quietly(f) for f in futures]
        assert len(warmer._children) == 2  # three jobs, two children: one compiled two networks
    assert all(s is not None and s > 0 for s in seconds)
    before = _cache_hits()
    with torch.inference_mode():
        compiled = compile_for_inference(models, inputs, workers=0)  # no children of its own: the cache only
        for fast, model, x in zip(compiled, models, inputs):
            torch.testing.assert_close(fast(x), model(x), rtol=1e-4, atol=1e-5)
    assert _cache_hits() - before >= 3  # all three graphs came from the children


def test_networks_compiled_here_before_are_not_sent_to_children_again(monkeypatch):
    from nasutil.colocate import compile_cache
    from nasutil.colocate.compiled import compile_for_inference

    models = [small(A, 4).eval(), small(B, 5).eval()]
    inputs = [torch.randn(2, 3, 8, 8) for _ in models]
    with torch.inference_mode():
        first = compile_for_inference(models, inputs, workers=0)

        def no_children(*args, **kwargs):
            raise AssertionError("a second compilation of the same networks started compile children")

        monkeypatch.setattr(compile_cache, "CompileCacheWarmer", no_children)
        again = compile_for_inference(models, inputs, workers=2)  # as measure_group's second strategy does
        for a, b, x in zip(first, again, inputs):
            torch.testing.assert_close(a(x), b(x))


def test_a_network_no_child_can_take_compiles_here():
    from nasutil.colocate.compile_cache import CompileCacheWarmer
    from nasutil.colocate.compiled import compile_for_inference

    class Local(torch.nn.Module):  # defined in a function: it cannot be serialised for a child
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(4, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.linear(x).relu()

    with CompileCacheWarmer(workers=2) as warmer:
        assert warmer.submit(Local(), torch.randn(2, 4)) is None
    models = [Local().eval(), Local().eval()]
    x = torch.randn(_unique_batch(), 4)
    with torch.inference_mode():
        for fast, model in zip(compile_for_inference(models, [x, x], workers=2), models):
            torch.testing.assert_close(fast(x), model(x))


def test_a_compiled_training_step_compiles_from_a_child_s_cache(monkeypatch):
    from nasutil.colocate import compile_cache

    monkeypatch.setenv(compile_cache.WORKERS_VARIABLE, "2")
    monkeypatch.setattr(compile_cache, "_shared", None)
    batch = _unique_batch() % 64 + 3
    torch.manual_seed(0)
    x, y = torch.randn(batch * 2, 3, 8, 8), torch.randint(0, 10, (batch * 2,))
    rates = cosine_rates(0.05, 4)
    losses = []
    try:
        for compiled in (False, True):
            model = small(B, 3).train()
            step = TrainingStep(model, lambda t: t, x, y, batch, rates, 0.9, 5e-4, None, graph=False,
                                compiled=compiled)
            assert (step._warm_cache is not None) == compiled
            before = _cache_hits()
            step.run(0, torch.arange(batch))
            hits = _cache_hits() - before
            losses.append(step.take_loss(1))
        assert hits >= 2  # the forward and the backward graph, both compiled by the child first
        assert losses[1] == pytest.approx(losses[0], rel=1e-4)
        children = list(compile_cache._shared._children)
        assert children and all(child.alive for child in children)  # it lives on for the next candidates
        compile_cache.close_shared_warmer()
        assert compile_cache._shared is None and not any(child.alive for child in children)
    finally:
        compile_cache.close_shared_warmer()


def test_compile_workers_must_be_a_number(monkeypatch):
    from nasutil.colocate import compile_cache

    for given in ("many", "-1"):
        monkeypatch.setenv(compile_cache.WORKERS_VARIABLE, given)
        with pytest.raises(NasutilError, match="NASUTIL_COMPILE_WORKERS must be a whole number >= 0"):
            compile_cache.default_workers()
    monkeypatch.setenv(compile_cache.WORKERS_VARIABLE, "0")
    assert compile_cache.default_workers() == 0
    monkeypatch.setenv(compile_cache.WORKERS_VARIABLE, "many")
    from nasutil.search.trainers.torch_trainer import TorchTrainer

    with pytest.raises(NasutilError, match="NASUTIL_COMPILE_WORKERS must be a whole number"):
        TorchTrainer(dataset="digits", device="cpu", compile=True)  # before any trial starts
    TorchTrainer(dataset="digits", device="cpu", compile=False)  # the variable matters only when compiling


def test_networks_compiled_with_their_weights_as_inputs_compute_the_same():
    from nasutil.colocate.compiled import compile_for_inference

    models = [small(A, 0).eval(), small(B, 1).eval()]
    inputs = [torch.randn(3, 3, 8, 8) for _ in models]
    with torch.inference_mode():
        compiled = compile_for_inference(models, inputs, workers=0, freezing=False)
        for fast, model, x in zip(compiled, models, inputs):
            torch.testing.assert_close(fast(x), model(x), rtol=1e-4, atol=1e-5)
    with torch.no_grad():  # a weight changed after compiling: the compiled network follows it
        models[0].stem[0].weight.mul_(-2.0)
    with torch.inference_mode():
        torch.testing.assert_close(compiled[0](inputs[0]), models[0](inputs[0]), rtol=1e-4, atol=1e-5)


def test_no_compile_children_where_the_variable_says_none(monkeypatch):
    from nasutil.colocate import compile_cache

    monkeypatch.setattr(compile_cache, "_shared", None)
    for none in ("0", "1"):
        monkeypatch.setenv(compile_cache.WORKERS_VARIABLE, none)
        assert compile_cache.shared_warmer() is None
    monkeypatch.setenv(compile_cache.WORKERS_VARIABLE, "3")
    assert compile_cache.default_workers() == 3


_QUEUED = """
import sys, torch, torch.nn as nn
import nasutil.colocate.compile_cache as cc
run = cc._Child.run
def reported(self, path):
    seconds = run(self, path)
    print("finished", path.name, flush=True)
    return seconds
cc._Child.run = reported
warmer = cc.shared_warmer()
for k in range(3, 9):
    warmer.submit(nn.Sequential(nn.Linear(k, 4), nn.ReLU()), torch.randn(2, k))
print("folder", warmer._folder, flush=True)
"""


def test_networks_still_queued_are_dropped_when_the_process_ends(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "queued.py"
    script.write_text(_QUEUED)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NASUTIL_COMPILE_WORKERS": "2"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert sum(line.startswith("finished") for line in lines) <= 2  # at most the two under way, not all 6
    folder = Path(next(line for line in lines if line.startswith("folder"))[len("folder "):])
    assert not folder.exists()


_ORPHAN = """
import time, torch
import nasutil.colocate.compile_cache as cc
from nasutil_search_spaces.nb201_network import NB201Network
from nasutil.registry import get_space
warmer = cc.CompileCacheWarmer(workers=2)
net = NB201Network(get_space("nb201").parse("|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|nor_conv_3x3~0|nor_conv_3x3~1|nor_conv_3x3~2|"))
warmer.submit(net, torch.randn(2, 3, 32, 32))
while not warmer._children:
    time.sleep(0.1)
print(warmer._children[0].proc.pid, warmer._folder, flush=True)
time.sleep(600)
"""


def test_a_child_whose_parent_is_killed_ends_and_removes_the_jobs_folder(tmp_path):
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    script = tmp_path / "orphan.py"
    script.write_text(_ORPHAN)
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        pid, folder = parent.stdout.readline().split()
        assert Path(folder).exists()
    finally:
        parent.send_signal(signal.SIGKILL)  # as a group's time limit kills its worker: no clean-up runs
        parent.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _alive(int(pid)):
        time.sleep(0.2)
    assert not _alive(int(pid)), "the compile child outlived its parent"
    assert not Path(folder).exists()


def _alive(pid: int) -> bool:
    """Running, and not a zombie waiting for its new parent to reap it."""
    from pathlib import Path

    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def test_no_candidate_is_seeded_and_built_while_another_compiles():
    """Dynamo puts the global RNG state back after compiling; a build under way in another thread would
    have its weights drawn from a rewound RNG, so a compiling thread holds the builders off."""
    import threading

    from nasutil.colocate.compiled import COMPILE_LOCK
    from nasutil.search.trainers import torch_trainer

    built = threading.Event()

    def build() -> None:
        with torch_trainer.SEEDING:
            torch.manual_seed(0)
            small(A, 0)
        built.set()

    with COMPILE_LOCK:  # as TrainingStep holds it while its first step compiles
        builder = threading.Thread(target=build)
        builder.start()
        assert not built.wait(1.0)
    assert built.wait(30.0)
    builder.join()


class Sleeper(torch.nn.Module):
    """A network whose compilation never ends in a child (its forward sleeps)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        import time

        time.sleep(3600)
        return self.linear(x)


def test_a_hung_child_is_given_up_on_and_ended(monkeypatch):
    import threading

    from nasutil.colocate import compile_cache

    monkeypatch.setattr(compile_cache, "WAIT_S", 3.0)
    monkeypatch.setattr(compile_cache, "CLOSE_WAIT_S", 2.0)
    warmer = compile_cache.CompileCacheWarmer(workers=2)
    assert compile_cache.wait_quietly(warmer.submit(Sleeper(), torch.randn(2, 3))) is None
    closed = threading.Event()
    threading.Thread(target=lambda: (warmer.close(), closed.set()), daemon=True).start()
    try:
        assert closed.wait(60), "close() waited on the hung child"
        assert not any(child.alive for child in warmer._children)
    finally:
        for child in warmer._children:
            child.proc.kill()
