"""Co-location on the CPU: strategies agree with running the networks one after another, fall back with
a reason where they cannot apply, and the `nasutil colocate` command reports the group."""

import json

import pytest
import torch

from nasutil import get_space
from nasutil.colocate import colocate, measure_group
from nasutil.colocate.strategies import Prepared, Strategy
from nasutil.errors import NasutilError
from nasutil.evaluator import Candidate, MeasureConfig

CELL = "|nor_conv_3x3~0|+|nor_conv_1x1~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|none~2|"
OTHER = "|skip_connect~0|+|nor_conv_3x3~0|none~1|+|avg_pool_3x3~0|nor_conv_1x1~1|nor_conv_3x3~2|"
CPU = MeasureConfig(device="cpu", dtype="fp32", batch_size=2, mode="eager", channels_last=False, repeats=2,
                    min_window_ms=1.0, warmup=1)


def _nb201(archs, seed=0):
    space = get_space("nb201")
    models = []
    for i, arch in enumerate(archs):
        torch.manual_seed(seed + i)
        model = space.build(space.parse(arch), num_classes=10).eval()
        with torch.no_grad():  # distinct BatchNorm statistics, so that a mix-up of weights shows
            for m in model.modules():
                if isinstance(m, torch.nn.BatchNorm2d):
                    m.running_mean.normal_()
                    m.running_var.uniform_(0.5, 2.0)
        models.append(model)
    return models


def _alone(models, x):
    with torch.inference_mode():
        return [m(x) for m in models]


def test_fused_equals_sequential_for_shape_identical_networks():
    models = _nb201([CELL] * 4)
    x = torch.randn(3, 3, 32, 32)
    group = colocate(models, x, "fused")
    assert group.strategy == "fused" and group.fallback_reason is None
    with torch.inference_mode():
        outputs = group.run()
    for out, ref in zip(outputs, _alone(models, x)):
        torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
    assert not torch.allclose(outputs[0], outputs[1])  # four different networks, not one


def test_fused_takes_one_input_per_network():
    models = _nb201([CELL] * 3)
    xs = [torch.randn(2, 3, 32, 32) for _ in models]
    with torch.inference_mode():
        outputs = colocate(models, xs, "fused").run()
        for out, model, x in zip(outputs, models, xs):
            torch.testing.assert_close(out, model(x), rtol=1e-4, atol=1e-4)


def test_fused_runs_different_nb201_cells_as_one_network():
    space = get_space("nb201")
    archs = [a.to_string() for a in space.sample_many(10, seed=3)]
    archs += ["|none~0|+|none~0|none~1|+|none~0|none~1|none~2|",  # no edge reaches the output
              "|none~0|+|none~0|none~1|+|skip_connect~0|nor_conv_3x3~1|avg_pool_3x3~2|"]  # a zero node feeds a conv
    models = _nb201(archs)
    shared = torch.randn(3, 3, 32, 32)
    separate = [torch.randn(3, 3, 32, 32) for _ in models]
    for inputs in (shared, separate):
        group = colocate(models, inputs, "fused", fallback=False)
        assert group.strategy == "fused"
        with torch.inference_mode():
            outputs = group.run()
            expected = [m(x) for m, x in zip(models, [inputs] * len(models) if inputs is shared else inputs)]
        for out, ref in zip(outputs, expected):
            torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)


def test_strategies_that_do_not_apply_say_why_and_fall_back():
    space = get_space("nb201")
    archs = [a.to_string() for a in space.sample_many(3, seed=1)]
    models = _nb201(archs)
    x = torch.randn(2, 3, 32, 32)
    unfusable = [torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, width)).eval() for width in (4, 5)]
    for group_models, strategy, reason in ((unfusable, "fused", "shape-identical"), (models, "streams", "CUDA")):
        group = colocate(group_models, x, strategy)
        assert group.strategy == "sequential" and reason in group.fallback_reason
        with torch.inference_mode():
            for out, ref in zip(group.run(), _alone(group_models, x)):
                torch.testing.assert_close(out, ref)
        with pytest.raises(NasutilError, match=reason):
            colocate(group_models, x, strategy, fallback=False)


def test_nb201_fusion_says_why_it_cannot_fuse_a_group():
    space = get_space("nb201")
    ten, hundred = (space.build(space.parse(CELL), num_classes=n).eval() for n in (10, 100))
    x = torch.randn(2, 3, 32, 32)
    with pytest.raises(NasutilError, match="one skeleton"):
        colocate([ten, hundred, space.build(space.parse(OTHER), num_classes=10).eval()], x, "fused", fallback=False)
    with pytest.raises(NasutilError, match="eval mode"):
        colocate([ten.train(), space.build(space.parse(OTHER), num_classes=10)], x, "fused", fallback=False)


def test_bad_groups_are_user_errors():
    models = _nb201([CELL])
    with pytest.raises(NasutilError, match="unknown strategy"):
        colocate(models, torch.randn(1, 3, 32, 32), "magic")
    with pytest.raises(NasutilError, match="inputs"):
        colocate(models, [torch.randn(1, 3, 32, 32)] * 2, "sequential")
    with pytest.raises(NasutilError, match="at least one"):
        colocate([], torch.randn(1, 3, 32, 32))


ONE, X = torch.nn.Linear(3, 2).eval(), torch.randn(4, 3)


@pytest.mark.parametrize("models, inputs, settings, message", [
    (ONE, X, {}, "models must be a list of networks, got one Linear (give [model])"),
    ((m for m in [ONE]), X, {}, "models must be a list of networks, got generator"),
    ("ONE", X, {}, "models must be a list of networks, got str"),
    ([3], X, {}, "models[0] must be a network (an nn.Module), got int"),
    ([ONE, "two"], X, {}, "models[1] must be a network (an nn.Module), got str"),
    ([ONE], None, {}, "inputs must be a tensor shared by every network or a list of one per network, got NoneType"),
    ([ONE], X.numpy(), {}, ("inputs must be a tensor shared by every network or a list of one per network, "
                            "got ndarray")),
    ([ONE], [3], {}, "inputs[0] must be a torch.Tensor, got int"),
    ([ONE], X, {"fallback": "no"}, "fallback must be True or False, got 'no'"),
    ([ONE], X, {"compiled": 1}, "compiled must be True or False, got 1"),
    ([ONE], X, {"progress": 3}, "progress must be a function (done, total, seconds) or None, got 3"),
])
def test_a_group_of_the_wrong_kind_is_refused_naming_the_argument(models, inputs, settings, message):
    """One network alone once failed with "object of type 'Linear' has no len()", inputs=None with "'NoneType'
    object is not iterable", an int input with AttributeError, a numpy array as "1 networks but 4 inputs";
    [3] and fallback='no' went through (the first failing only at its first run)."""
    with pytest.raises(NasutilError) as raised:
        colocate(models, inputs, "sequential", **settings)
    assert str(raised.value) == message


def test_a_module_list_is_a_group():
    group = colocate(torch.nn.ModuleList([ONE, ONE]), (X, X), "sequential")
    assert [y.shape for y in group.run()] == [(4, 2), (4, 2)]


def test_measure_group_reports_the_group_against_sequential():
    cands = [Candidate("nb201", CELL)] * 3
    m = measure_group(cands, CPU, "fused")
    assert m.ok and m.strategy == "fused" and m.requested == "fused"
    assert m.latency_ms > 0 and m.sequential_latency_ms > 0
    assert m.speedup == pytest.approx(m.sequential_latency_ms / m.latency_ms)
    assert m.throughput_per_s == pytest.approx(3 * 2 / (m.latency_ms * 1e-3))
    assert len(m.flops_per_image) == 3 and len(set(m.flops_per_image)) == 1
    assert m.achieved_tflops == pytest.approx(sum(m.flops_per_image) * 2 / (m.latency_ms * 1e-3) / 1e12)
    assert json.loads(m.to_json())["archs"] == [CELL] * 3


def test_cli_colocate_json(cli):
    r = cli("colocate", "nb201", "--sample", "3", "--device", "cpu", "--batch-size", "2", "--strategy", "fused",
            "--json")
    assert r.returncode == 0, r.stderr
    row = json.loads(r.stdout.splitlines()[0])
    assert row["status"] == "ok" and row["strategy"] == "fused" and row["fallback_reason"] is None
    assert len(row["archs"]) == 3 and row["speedup"] > 0


def test_cli_colocate_json_with_an_slo_says_which_batches_keep_within_it(cli):
    r = cli("colocate", "nb201", "--sample", "2", "--device", "cpu", "--strategy", "fused", "--no-counters",
            "--slo-ms", "20", "--in-process", "--json")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert rows and all(row["slo_ms"] == 20 for row in rows)
    assert all(row["within_slo"] == (row["latency_ms"] <= 20) for row in rows)
    assert not rows[-1]["within_slo"] and [row["batch_size"] for row in rows] == [2 ** i for i in range(len(rows))]


def test_a_group_that_ran_sequential_reports_no_speedup(cli):
    m = measure_group([Candidate("nb201", CELL)] * 2, CPU, "streams")  # streams needs CUDA: falls back
    assert m.ok and m.strategy == "sequential" and m.fallback_reason
    assert m.speedup is None and m.sequential_latency_ms == m.latency_ms
    r = cli("colocate", "nb201", CELL, CELL, "--device", "cpu", "--batch-size", "1", "--in-process", "--no-counters")
    assert r.returncode == 0, r.stderr
    assert "no speedup to report" in r.stdout, r.stdout


def test_cli_colocate_table_in_process(cli):
    r = cli("colocate", "nb201", CELL, CELL, "--device", "cpu", "--batch-size", "1", "--strategy", "fused",
            "--in-process", "--no-counters")
    assert r.returncode == 0, r.stderr
    assert "fused" in r.stdout and "speedup" in r.stdout


@pytest.mark.parametrize("args, message", [
    (("nb201", "--sample", "2", "--strategy", "magic"), "unknown strategy"),
    (("nb201",), "ARCH..., --sample N or --archs FILE"),
    (("nb201", "not-a-cell"), "error"),
    (("nb201", "--sample", "2", "--slo-ms", "5", "--batch-size", "4"), "--slo-ms"),
    (("darts", "--sample", "2", "--strategy", "fused", "--no-fallback", "--device", "cpu"), "shape-identical"),
    (("nb201", "--sample", "0"), "error"),
    (("nb201", "--sample", "4", "--pack", "2", "--memory-budget-gb", "0.00001", "--device", "cpu"),
     "too small for one candidate"),
    (("nb201", "--sample", "4", "--memory-budget-gb", "0.00001", "--device", "cpu"), "split it with --pack"),
    (("nb201", "--sample", "4", "--pack", "2", "--slo-ms", "5"), "do not combine"),
    (("nb201", "--sample", "4", "--pack", "0"), "error"),
    (("nb201", "--sample", "2", "--timeout", "3e6"), "up to 604800"),
    (("nb201", "--sample", "2", "--slo-ms", "50", "--memory-budget-gb", "0.0001", "--device", "cpu"),
     "at batch 1, over the memory budget"),
])
def test_cli_colocate_bad_input(cli, args, message):
    r = cli("colocate", *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_cli_colocate_slo_search_stops_at_the_memory_budget(cli):
    r = cli("colocate", "nb201", CELL, CELL, "--device", "cpu", "--slo-ms", "10000", "--memory-budget-gb", "0.007",
            "--in-process", "--no-counters", "--no-cache", "--strategy", "sequential", "--json")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]  # nothing but the rows
    assert [row["batch_size"] for row in rows] == [1, 2, 4, 8]  # batch 16 would need about 0.008 GiB
    assert "over the memory budget of 0.007 GiB: the search for the largest batch stops there" in r.stderr


def test_cli_colocate_in_process_fails_a_broken_group_in_one_row(cli, installed_plugin):
    """A candidate that raises as it is built (the test plugin's `raise`) fails its group's row, in process."""
    r = cli("colocate", "tiny", "w8", "raise", "--device", "cpu", "--in-process",
            "--no-counters", "--no-cache", "--strategy", "sequential", "--json")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    row = json.loads(r.stdout.splitlines()[0])
    assert row["status"] == "failed" and "RuntimeError: this candidate cannot be built" in row["error"]


def test_cli_colocate_runs_cells_at_an_odd_input_size(cli):
    """At input size 9 a reduction block halves 9 (and then 5): its pool rounds up as its convolution does, where
    the two paths once disagreed by one and the group failed."""
    r = cli("colocate", "nb201", CELL, CELL, "--device", "cpu", "--input-size", "9", "--in-process",
            "--no-counters", "--no-cache", "--strategy", "sequential", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.splitlines()[0])["status"] == "ok"


def test_measure_group_counts_networks_of_a_space_without_an_op_listing(installed_plugin):
    """The tiny plugin space lists no ops: its FLOPs are counted on the built network before it moves."""
    m = measure_group([Candidate("tiny", "w8"), Candidate("tiny", "w16")], CPU.with_(input_size=16), "sequential")
    assert m.ok and m.flops_per_image == [2 * 3 * 8 * 9 * 16 * 16 + 2 * 8 * 10, 2 * 3 * 16 * 9 * 16 * 16 + 2 * 16 * 10]


def test_packing_groups_candidates_of_similar_latency():
    from nasutil.colocate.packing import pack_by_latency, random_groups

    latency = [5.0, 1.0, 4.0, 2.0, 3.0, 6.0]
    groups = pack_by_latency(latency, 2)
    assert [g.members for g in groups] == [(1, 3), (4, 2), (0, 5)]
    assert [g.predicted_latency_ms for g in groups] == [2.0, 4.0, 6.0]
    # consecutive groups minimise the sum of the slowest members: no grouping of these does better
    assert sum(g.predicted_latency_ms for g in groups) <= min(
        sum(g.predicted_latency_ms for g in random_groups(6, 2, seed, latency)) for seed in range(20))


def test_a_memory_budget_closes_groups_early_and_must_fit_one_candidate():
    from nasutil.colocate.packing import pack_by_latency

    groups = pack_by_latency([1.0, 2.0, 3.0, 4.0], 4, memory_bytes=[3, 3, 3, 3], memory_budget_bytes=7)
    assert [g.members for g in groups] == [(0, 1), (2, 3)] and all(g.predicted_memory_bytes <= 7 for g in groups)
    with pytest.raises(NasutilError, match="too small for one candidate"):
        pack_by_latency([1.0, 2.0], 2, memory_bytes=[3, 9], memory_budget_bytes=7)
    with pytest.raises(NasutilError, match="at least one member"):
        pack_by_latency([1.0], 0)


def test_memory_estimates_grow_with_the_batch_and_with_training():
    from nasutil.colocate.packing import estimated_memory_bytes
    from nasutil.predictor.fit import ops_for

    ops = ops_for(get_space("nb201"), CELL)[0]
    one, many = estimated_memory_bytes(ops, 1), estimated_memory_bytes(ops, 64)
    assert 0 < one < many < estimated_memory_bytes(ops, 64, training=True)


def test_cli_colocate_packs_by_predicted_latency(cli):
    r = cli("colocate", "nb201", "--sample", "6", "--pack", "3", "--device", "cpu", "--batch-size", "1",
            "--in-process", "--json")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(rows) == 2 and sorted(len(row["archs"]) for row in rows) == [3, 3]


def test_group_results_are_cached_and_read_back(tmp_path):
    from nasutil.evaluator.cache import MeasurementCache

    cache = MeasurementCache(tmp_path / "cache.db")
    group = [Candidate("nb201", CELL), Candidate("nb201", OTHER)]
    first = measure_group(group, CPU, "sequential", cache=cache)
    again = measure_group(group, CPU, "sequential", cache=cache)
    assert first.ok and not first.cached and again.cached
    assert again.latency_ms == first.latency_ms and again.archs == first.archs
    other_order = measure_group(group[::-1], CPU, "sequential", cache=cache)  # another group: measured
    other_strategy = measure_group(group, CPU, "fused", cache=cache)
    assert not other_order.cached and not other_strategy.cached
    assert not measure_group(group, CPU, "sequential", cache=cache, remeasure=True).cached
    assert not measure_group(group, CPU.with_(batch_size=CPU.batch_size + 1), "sequential", cache=cache).cached
    cache.close()


def test_group_results_of_an_older_strategy_version_are_measured_again(tmp_path, monkeypatch):
    from nasutil.colocate.strategies import STRATEGIES
    from nasutil.evaluator.cache import MeasurementCache

    cache = MeasurementCache(tmp_path / "cache.db")
    group = [Candidate("nb201", CELL), Candidate("nb201", OTHER)]
    monkeypatch.setattr(type(STRATEGIES["fused"]), "version", 1)  # as results were cached before fusing cells
    assert not measure_group(group, CPU, "fused", cache=cache).cached
    assert measure_group(group, CPU, "fused", cache=cache).cached
    monkeypatch.undo()
    assert STRATEGIES["fused"].cache_name == "fused@v2"
    again = measure_group(group, CPU, "fused", cache=cache)
    assert not again.cached and again.strategy == "fused"
    cache.close()


def test_cli_colocate_reads_a_group_from_the_cache(cli, tmp_path):
    args = ("colocate", "nb201", CELL, OTHER, "--device", "cpu", "--batch-size", "1", "--strategy", "sequential",
            "--cache", str(tmp_path / "cache.db"), "--json")
    first = cli(*args)
    second = cli(*args)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    a, b = json.loads(first.stdout), json.loads(second.stdout)
    assert not a["cached"] and b["cached"] and a["latency_ms"] == b["latency_ms"]
    r = cli(*args[:-1], "--no-cache", "--json")
    assert r.returncode == 2 and "contradict" in r.stderr


def test_an_installed_strategy_runs_in_the_worker(cli, installed_plugin):
    r = cli("colocate", "nb201", CELL, CELL, "--device", "cpu", "--batch-size", "1", "--strategy", "reversed",
            "--no-counters", "--no-cache", "--json", env=installed_plugin)
    assert r.returncode == 0, r.stderr
    row = json.loads(r.stdout)
    assert row["status"] == "ok" and row["strategy"] == "reversed" and row["speedup"] > 0


class LastFirst(Strategy):
    """A strategy registered at run time: the networks one after another, last first."""

    name = "last-first"

    def prepare(self, models, inputs):
        return Prepared(lambda: [m(x) for m, x in reversed(list(zip(models, inputs)))][::-1])


def test_a_strategy_registered_at_run_time_reaches_the_worker():
    from nasutil.colocate import measure_group_isolated, register_strategy, strategies

    register_strategy(LastFirst())
    assert strategies.registered_paths() == {"last-first": f"{__name__}:LastFirst"}
    m = measure_group_isolated([Candidate("nb201", CELL)] * 2, CPU, "last-first", timeout_s=300)
    assert m.ok and m.strategy == "last-first", m.error


class NeedsAKnob(Strategy):
    name = "needs-a-knob"

    def __init__(self, knob: int) -> None:
        self.knob = knob

    def prepare(self, models, inputs):
        return Prepared(lambda: [m(x) for m, x in zip(models, inputs)])


def test_a_strategy_the_worker_cannot_rebuild_stops_only_groups_that_ask_for_it():
    from nasutil.colocate import measure_group_isolated, register_strategy

    register_strategy(NeedsAKnob(3))
    group = [Candidate("nb201", CELL)] * 2
    assert measure_group_isolated(group, CPU, "sequential", timeout_s=300).ok
    with pytest.raises(NasutilError, match="could not be rebuilt in the worker .* take no arguments"):
        measure_group_isolated(group, CPU, "needs-a-knob", timeout_s=300)


def test_a_network_and_its_input_on_two_devices_is_refused_naming_both():
    """A network on the CPU with its input elsewhere (a "meta" tensor here; a CUDA one on a GPU machine)
    failed inside the strategy with a device error from deep in torch."""
    elsewhere = torch.empty(4, 3, device="meta")
    with pytest.raises(NasutilError, match=r"^models\[1\] is on cpu but its input on meta: put both on one device$"):
        colocate([ONE, ONE], [X, elsewhere], "sequential")
