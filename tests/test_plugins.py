"""One registry behind every plugin kind: a broken plugin of any kind is skipped with a warning and is a
one-line error only where it is asked for; run-time registrations of every kind reach the evaluator's
worker processes; the worker runs a group task as it runs a candidate, with one failure shape."""

from __future__ import annotations

import pytest
from test_registry import NamelessSpace  # a space with every method and no name

from nasutil.cell_ops import CellOp
from nasutil.colocate.strategies import Prepared, Strategy
from nasutil.errors import NasutilError
from nasutil.evaluator import Candidate, MeasureConfig
from nasutil.plugins import PluginWarning
from nasutil.predictor.registry import Candidates, Predictor, PredictTarget

CPU = MeasureConfig(device="cpu", dtype="fp32", batch_size=2, mode="eager", channels_last=False, repeats=2,
                    min_window_ms=1.0, warmup=1, input_size=16)

BROKEN_ENTRY_POINTS = """\
[nasutil.search_spaces]
broken_space = no_such_module_for_nasutil_tests:Thing
wrong_space = os:sep

[nasutil.predictors]
broken_kind = no_such_module_for_nasutil_tests:Thing
wrong_kind = os:sep

[nasutil.colocate_strategies]
broken_strategy = no_such_module_for_nasutil_tests:Thing
wrong_strategy = os:sep

[nasutil.cell_ops]
broken_op = no_such_module_for_nasutil_tests:Thing
wrong_op = os:sep
"""


@pytest.fixture
def broken_plugins(tmp_path, monkeypatch):
    """A package whose entry points of every kind are broken, installed on the path as pip would."""
    info = tmp_path / "broken_plugins-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugins\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(BROKEN_ENTRY_POINTS)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def _kinds():
    from nasutil.cell_ops import cell_op, cell_op_names
    from nasutil.colocate.engine import check_strategy
    from nasutil.colocate.strategies import available
    from nasutil.predictor.registry import predictor_class, predictor_names
    from nasutil.registry import list_spaces, space_class

    return {  # kind: (its word in messages, names listing, lookup, a built-in name, broken name, wrong-type name)
        "space": ("search space", list_spaces, space_class, "nb201", "broken_space", "wrong_space"),
        "predictor": ("predictor", predictor_names, predictor_class, "learned", "broken_kind", "wrong_kind"),
        "strategy": ("strategy", lambda: list(available()), check_strategy, "streams", "broken_strategy",
                     "wrong_strategy"),
        "cell op": ("cell op", cell_op_names, cell_op, "nor_conv_3x3", "broken_op", "wrong_op"),
    }


@pytest.mark.parametrize("kind", ["space", "predictor", "strategy", "cell op"])
def test_a_broken_plugin_of_any_kind_is_skipped_with_a_warning_and_named_where_asked_for(broken_plugins, kind):
    word, names, lookup, builtin, broken, wrong = _kinds()[kind]
    with pytest.warns(PluginWarning) as warned:
        listed = names()
    messages = [str(w.message) for w in warned]
    assert any(f"{word} {broken!r} (no_such_module_for_nasutil_tests:Thing) could not be loaded: No module named"
               in m and m.endswith("skipped") for m in messages), messages
    assert any(f"{word} {wrong!r} (os:sep) could not be loaded" in m for m in messages), messages
    assert builtin in listed and broken not in listed and wrong not in listed
    lookup(builtin)  # the others are untouched
    with pytest.raises(NasutilError) as error:
        lookup(broken)
    assert str(error.value).startswith(f"{word} {broken!r} (no_such_module_for_nasutil_tests:Thing) could not be "
                                       "loaded: No module named") and "\n" not in str(error.value)
    with pytest.raises(NasutilError, match=f"{word} {wrong!r} \\(os:sep\\) could not be loaded: it is"):
        lookup(wrong)
    with pytest.raises(NasutilError, match=f"unknown {word} 'no_such_name' .*{builtin}"):
        lookup("no_such_name")


def test_a_broken_space_is_a_one_line_error_on_the_command_line_and_the_others_work(cli, broken_plugins):
    env = {"PYTHONPATH": str(broken_plugins)}
    asked = cli("sample", "broken_space", "-n", "1", env=env)
    assert asked.returncode == 2 and len(asked.stderr.strip().splitlines()) == 1, asked.stderr
    assert "'broken_space' (no_such_module_for_nasutil_tests:Thing) could not be loaded" in asked.stderr
    other = cli("sample", "nb201", "-n", "1", env=env)
    assert other.returncode == 0 and other.stdout.startswith("|"), other.stderr


def test_a_plugin_named_like_one_of_nasutils_own_is_skipped_with_a_warning(tmp_path, monkeypatch):
    """A plugin's `nb201` replaced the built-in space without a word (which package won depended on the
    path's order), and searches then failed on the profile."""
    from nasutil_search_spaces.nb201 import NasBench201Space

    from nasutil.registry import get_space, list_spaces, space_class

    info = tmp_path / "clashing_plugins-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: clashing-plugins\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[nasutil.search_spaces]\nnb201 = test_registry:NamelessSpace\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.warns(PluginWarning, match="search space 'nb201' of package 'clashing-plugins' "
                                           r"\(test_registry:NamelessSpace\) has the name of nasutil's own"):
        assert "nb201" in list_spaces()
    assert space_class("nb201") is NasBench201Space and isinstance(get_space("nb201"), NasBench201Space)


def test_registering_a_value_of_the_wrong_kind_is_refused():
    from nasutil.cell_ops import register_cell_op
    from nasutil.predictor.registry import register_predictor
    from nasutil.registry import register

    for call, value in ((register, str), (register_predictor, int), (register_cell_op, "conv")):
        with pytest.raises(TypeError, match="it is"):
            call(value)
        with pytest.raises(NasutilError):
            call(value)


# ---- run-time registrations reach the worker


def _build_identity(channels):
    import torch.nn as nn

    return nn.Identity()


PROBE_OP = CellOp("probe_identity", _build_identity, lambda c, size: [])


class ProbeSpace(NamelessSpace):
    name = "probe_space"


class ProbeKind(Predictor):
    name = "probe_kind"

    @property
    def device_name(self) -> str:
        return "nowhere"

    def latencies_ms(self, candidates: Candidates, target: PredictTarget) -> list[float]:
        return [1.0] * len(candidates.archs)


class ProbeStrategy(Strategy):
    name = "probe_strategy"

    def prepare(self, models, inputs):
        return Prepared(lambda: [m(x) for m, x in zip(models, inputs)])


class Found:
    def __init__(self, found: dict[str, str]) -> None:
        self.found = found

    def to_dict(self) -> dict[str, str]:
        return self.found


def look_up_in_the_worker(payload, exclusive) -> Found:
    """A task's runner: what each registry of this (worker) process answers for the names asked."""
    from nasutil.cell_ops import cell_op
    from nasutil.colocate.strategies import strategy_named
    from nasutil.predictor.registry import predictor_class
    from nasutil.registry import space_class

    lookups = {"space": lambda n: space_class(n).__name__, "predictor": lambda n: predictor_class(n).__name__,
               "strategy": lambda n: type(strategy_named(n)).__name__, "cell op": lambda n: cell_op(n).name}
    found = {}
    for kind, name in payload.items():
        try:
            found[kind] = lookups[kind](name)
        except NasutilError as exc:
            found[kind] = f"error: {exc}"
    return Found(found)


def test_a_test_registers_one_of_every_kind():
    """The test after this one finds none of these: a test's registrations do not outlive it."""
    from nasutil.cell_ops import register_cell_op
    from nasutil.colocate.strategies import register_strategy
    from nasutil.plugins import runtime_registrations
    from nasutil.predictor.registry import register_predictor
    from nasutil.registry import register

    register(ProbeSpace)
    register_predictor(ProbeKind)
    register_strategy(ProbeStrategy())
    register_cell_op(PROBE_OP)
    assert len(runtime_registrations()) == 4


def test_no_run_time_registration_outlives_the_test_that_made_it():
    """A predictor kind registered by a test of test_predictor_kinds.py stayed registered, and the worker test
    below, run after that file, found it among the registrations workers are sent (run alone, it passed)."""
    from nasutil.plugins import runtime_registrations

    assert runtime_registrations() == {}


def test_run_time_registrations_of_every_kind_reach_the_worker():
    from nasutil.cell_ops import register_cell_op
    from nasutil.colocate.strategies import register_strategy
    from nasutil.evaluator.task import Task
    from nasutil.evaluator.worker import IsolatedWorker
    from nasutil.plugins import runtime_registrations
    from nasutil.predictor.registry import register_predictor
    from nasutil.registry import register

    class Local(ProbeStrategy):
        name = "local_strategy"

    register(ProbeSpace)
    register_predictor(ProbeKind)
    register_strategy(ProbeStrategy())
    register_strategy(Local())
    register_cell_op(PROBE_OP)
    sent = runtime_registrations()
    assert sent["nasutil.cell_ops"] == {"owner": "nasutil.cell_ops",
                                        "entries": {"probe_identity": f"{__name__}:PROBE_OP"}}
    assert sent["nasutil.predictors"]["entries"] == {"probe_kind": f"{__name__}:ProbeKind"}  # not the built-in kinds
    assert sent["nasutil.colocate_strategies"]["entries"] == {"local_strategy": "",
                                                               "probe_strategy": f"{__name__}:ProbeStrategy"}
    asked = {"space": "probe_space", "predictor": "probe_kind", "strategy": "probe_strategy",
             "cell op": "probe_identity"}
    worker = IsolatedWorker("cpu", timeout_s=120)
    try:
        found = worker.run(Task(f"{__name__}:look_up_in_the_worker", asked, dict, lambda why, _: {"failed": why}))
        local = worker.run(Task(f"{__name__}:look_up_in_the_worker", {"strategy": "local_strategy"}, dict,
                                lambda why, _: {"failed": why}))
    finally:
        worker.stop()
    assert found == {"space": "ProbeSpace", "predictor": "ProbeKind", "strategy": "ProbeStrategy",
                     "cell op": "probe_identity"}
    assert local["strategy"].startswith("error: strategy 'local_strategy' was registered at run time where a "
                                        "worker cannot import it"), local


CELL_CONFIG = """\
nodes: 2
ops: [nor_conv_1x1, probe_identity]
channels: 8
stages: 1
cells_per_stage: 1
input_size: 16
in_channels: 1
"""


def test_a_cell_op_registered_at_run_time_is_measured_in_an_isolated_worker(tmp_path):
    from nasutil.cell_ops import register_cell_op
    from nasutil.evaluator import Evaluator

    register_cell_op(PROBE_OP)
    config = tmp_path / "probe_cells.yaml"
    config.write_text(CELL_CONFIG)
    arch = "|probe_identity~0|+|nor_conv_1x1~0|probe_identity~1|"
    with Evaluator(CPU, isolate=True, timeout_s=120) as ev:
        m = ev.measure(Candidate(f"cell:{config}", arch))
    assert m.ok, m.error
    assert m.arch == arch and m.params > 0


# ---- groups as tasks of the evaluator's worker


def test_a_group_task_runs_in_the_evaluators_worker_with_one_failure_shape(installed_plugin):
    from nasutil.colocate import GroupMeasurement
    from nasutil.colocate.measure import group_task
    from nasutil.evaluator.worker import IsolatedWorker

    worker = IsolatedWorker("cpu", timeout_s=120)
    try:
        ok = worker.run(group_task([Candidate("tiny", "w8"), Candidate("tiny", "w16")], CPU, "sequential"))
        assert isinstance(ok, GroupMeasurement) and ok.ok, ok.error
        assert ok.strategy == "sequential" and ok.archs == ["w8", "w16"] and ok.speedup is None  # nothing to divide
        with pytest.raises(NasutilError, match="unknown strategy 'magic'"):  # the user's mistake, raised here
            worker.run(group_task([Candidate("tiny", "w8")], CPU, "magic"))
        crashed = worker.run(group_task([Candidate("tiny", "w8"), Candidate("tiny", "crash")], CPU, "sequential"))
        broken = worker.run(group_task([Candidate("tiny", "raise")], CPU, "sequential"))
        worker.timeout_s = 5
        hung = worker.run(group_task([Candidate("tiny", "hang")], CPU, "streams"))
    finally:
        worker.stop()
    for failed in (crashed, broken, hung):
        assert isinstance(failed, GroupMeasurement) and failed.status == "failed" and failed.latency_ms is None
        assert failed.device == "cpu" and failed.batch_size == CPU.batch_size
    assert crashed.error == "worker process died (exit code 3)" and crashed.archs == ["w8", "crash"]
    assert broken.error == "RuntimeError: this candidate cannot be built"
    assert hung.error == "timed out after 5 s" and hung.requested == "streams"
