"""The evaluator on CPU: the same API as on GPU, isolation, cache, CLI. Real timings, small models."""

import json

import pytest
import torch

from nasutil.evaluator.cache import MeasurementCache
from nasutil.evaluator.candidate import Candidate
from nasutil.evaluator.config import MeasureConfig
from nasutil.evaluator.evaluator import Evaluator
from nasutil.evaluator.sweep import sweep_batch
from nasutil.errors import NasutilError

CPU = MeasureConfig(device="cpu", dtype="fp32", batch_size=2, mode="eager", channels_last=False, repeats=3,
                    min_window_ms=1.0, input_size=16)


def test_measure_on_cpu_reports_every_field(installed_plugin):
    with Evaluator(CPU, isolate=False) as ev:
        m = ev.measure(Candidate("tiny", "w16"))
    assert m.ok, m.error
    assert m.device == "cpu" and m.device_name
    assert m.flops_per_image == 2 * 3 * 16 * 9 * 16 * 16 + 2 * 16 * 10
    assert m.latency_ms > 0 and m.latency_cv >= 0 and m.latency_iqr_ms >= 0
    assert m.throughput_per_s == pytest.approx(2 / (m.latency_ms / 1e3))
    assert m.achieved_tflops == pytest.approx(m.flops_per_image * 2 / (m.latency_ms / 1e3) / 1e12)
    assert m.peak_source == "measured_gemm" and m.peak_tflops == m.measured_peak_tflops > 0
    assert m.utilization == pytest.approx(m.achieved_tflops / m.peak_tflops)
    assert m.sm_clock_mhz is None and m.counters and all(v is None for v in m.counters.values())
    assert len(m.timing["windows_ms"]) >= 3
    assert json.loads(m.to_json())["arch"] == "w16"


def test_nb201_on_cpu_with_per_layer_breakdown():
    cell = "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|"
    config = CPU.with_(batch_size=1, input_size=None, per_layer=True, repeats=2)
    with Evaluator(config, isolate=False) as ev:
        m = ev.measure(Candidate("nb201", cell))
    assert m.ok, m.error
    assert m.input_size == 32 and m.params == 802426
    convs = [l for l in m.layers if l["kind"] == "conv3x3"]
    assert convs and all(l["time_ms"] > 0 and 0 < l["utilization"] for l in convs)
    assert sum(l["flops_per_batch"] for l in m.layers) == m.flops_per_image


@pytest.mark.parametrize("space, arch", [
    ("nb201", "|nor_conv_1x1~0|+|skip_connect~0|avg_pool_3x3~1|+|none~0|nor_conv_3x3~1|nor_conv_1x1~2|"),
    ("mbconv", None)])
def test_counts_from_the_op_listing_equal_counting_the_network(space, arch):
    """Spaces that list their ops give FLOPs and params without counting the built network (53 ms a cell)."""
    from nasutil import get_space
    from nasutil.counting import count_model
    from nasutil.evaluator.candidate import build

    if arch is None:
        import numpy as np

        arch = get_space(space).sample(np.random.default_rng(0)).to_string()
    built = build(Candidate(space, arch), input_size=None, num_classes=7)
    counted = count_model(built.model, built.input_size, built.in_channels, per_layer=False)
    assert built.counts is not None
    assert (built.counts.flops_per_image, built.counts.params) == (counted.flops_per_image, counted.params)


def test_spaces_without_a_listing_are_counted(installed_plugin):
    from nasutil.evaluator.candidate import build

    assert build(Candidate("tiny", "w16"), input_size=16, num_classes=10).counts is None


def test_fast_settings_time_and_count_on_cpu():
    cell = "|nor_conv_3x3~0|+|none~0|skip_connect~1|+|avg_pool_3x3~0|none~1|nor_conv_1x1~2|"
    config = CPU.with_(batch_size=1, input_size=None).fast()
    assert not config.counters and not config.eager_warm_up and config.repeats == 4
    assert config.device_turn == "split"  # the capture outside the turn; MPS's "timing" turn is kept
    assert CPU.with_(device_turn="timing").fast().device_turn == "timing"
    with Evaluator(config, isolate=False) as ev:
        m = ev.measure(Candidate("nb201", cell))
    with Evaluator(CPU.with_(batch_size=1, input_size=None, repeats=2), isolate=False) as ev:
        counted = ev.measure(Candidate("nb201", cell))
    assert m.ok and counted.ok
    assert (m.flops_per_image, m.params) == (counted.flops_per_image, counted.params)
    # four windows, or eight longer ones where the four spread over 1% (on a CPU they mostly do, not always)
    assert len(m.timing["windows_ms"]) == (8 if m.timing["remeasured"] else 4)


def test_cli_measure_fast(cli):
    cell = "|nor_conv_3x3~0|+|none~0|skip_connect~1|+|avg_pool_3x3~0|none~1|nor_conv_1x1~2|"
    r = cli("measure", "nb201", cell, "--device", "cpu", "--batch-size", "1", "--fast", "--json", "--no-cache")
    assert r.returncode == 0, r.stderr
    row = json.loads(r.stdout.splitlines()[0])
    assert row["status"] == "ok" and row["counter_window_ms"] is None
    assert len(row["timing"]["windows_ms"]) == (8 if row["timing"]["remeasured"] else 4)


def test_cli_measure_spreads_workers_over_devices(cli, installed_plugin, tmp_path):
    archs = tmp_path / "archs.txt"
    archs.write_text("w8\nw16\nw32\nw8\n")
    r = cli("measure", "tiny", "--archs", str(archs), "--device", "cpu", "--devices", "cpu,cpu", "--batch-size", "2",
            "--input-size", "16", "--repeats", "2", "--json", "--no-cache", env=installed_plugin)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert [row["arch"] for row in rows] == ["w8", "w16", "w32", "w8"] and all(row["status"] == "ok" for row in rows)
    assert {row["device"] for row in rows} == {"cpu"}


def test_bad_clock_settings_are_user_errors():
    for bad in (dict(clock_floor=1.5), dict(clock_retries=-1)):
        with pytest.raises(NasutilError, match="clock"):
            Evaluator(CPU, isolate=False, **bad)


def test_the_first_readings_are_retaken_until_the_clock_reaches_the_device_top(monkeypatch):
    """The clock policy on scripted SM clocks (a CPU has none): until a reading reaches clock_floor of the
    device's top clock, a reading under it (settling or kept) is taken again, at most clock_retries times; once one
    has, a settling reading is taken once; on a device capped under its top, three readings end the holding."""
    import nasutil.evaluator.evaluator as evaluator_module

    clocks = iter([1350.0, 1410.0, 1980.0, 1335.0])
    taken: list[float] = []

    def reading(candidate, config):
        clock = next(clocks)
        taken.append(clock)
        return evaluator_module.Measurement(space=candidate.space, arch=candidate.arch, device="cuda",
                                            device_name="scripted", dtype=config.dtype, batch_size=config.batch_size,
                                            mode=config.mode, latency_ms=1.0, sm_clock_mhz=clock)

    monkeypatch.setattr(evaluator_module, "measure_task", reading)
    ev = Evaluator(CPU, isolate=False, clock_floor=0.95, clock_retries=2)
    ev._info = {"device_name": "scripted", "torch_version": torch.__version__, "max_sm_clock_mhz": 1980.0}
    cell = Candidate("nb201", "|skip_connect~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|")
    assert ev.settle(cell).sm_clock_mhz == 1980.0 and taken == [1350.0, 1410.0, 1980.0]
    assert ev._steady_clock == 1980.0
    assert ev.settle(cell).sm_clock_mhz == 1335.0 and len(taken) == 4  # a steady clock is known: taken once

    clocks, taken[:] = iter([1350.0, 1410.0, 1450.0, 1395.0, 1980.0, 1900.0]), []
    dipped = Evaluator(CPU, isolate=False, clock_floor=0.95, clock_retries=2)
    dipped._info = {"device_name": "scripted", "torch_version": torch.__version__, "max_sm_clock_mhz": 1980.0}
    assert dipped.settle(cell).sm_clock_mhz == 1450.0 and len(taken) == 3  # the dip outlasts the settling reading
    # the next reading is held to the top clock too, not to the dip the settling reading set as the steady clock
    assert dipped.measure(cell).sm_clock_mhz == 1980.0 and taken[3:] == [1395.0, 1980.0]
    assert dipped.measure(cell).sm_clock_mhz == 1900.0 and len(taken) == 6  # within 95% of the top: taken once

    clocks, taken[:] = iter([1350.0] * 10), []
    capped = Evaluator(CPU, isolate=False, clock_floor=0.95, clock_retries=2)
    capped._info = {"device_name": "scripted", "torch_version": torch.__version__, "max_sm_clock_mhz": 1980.0}
    assert capped.settle(cell).sm_clock_mhz == 1350.0 and len(taken) == 3  # a capped device: retries run out
    assert capped._steady_clock == 1350.0
    for _ in range(2):
        capped.measure(cell)
    assert len(taken) == 9  # three readings held to the top clock, each with its two retries, ended under it
    assert capped.measure(cell).sm_clock_mhz == 1350.0 and len(taken) == 10  # then the device's own clock holds


def test_isolation_survives_hang_crash_and_errors(installed_plugin):
    with Evaluator(CPU, isolate=True, timeout_s=20) as ev:
        results = list(ev.measure_many([Candidate("tiny", a) for a in ("w8", "hang", "crash", "raise", "w32")]))
    status = [(m.arch, m.status) for m in results]
    assert status == [("w8", "ok"), ("hang", "failed"), ("crash", "failed"), ("raise", "failed"), ("w32", "ok")]
    assert "timed out" in results[1].error
    assert "died" in results[2].error and "3" in results[2].error
    assert "cannot be built" in results[3].error


def test_cache_skips_remeasuring(installed_plugin, tmp_path):
    cache = MeasurementCache(tmp_path / "m.db")
    with Evaluator(CPU, cache=cache, isolate=False) as ev:
        first = ev.measure(Candidate("tiny", "w8"))
        again = ev.measure(Candidate("tiny", "w8"))
        other = ev.measure(Candidate("tiny", "w8"), CPU.with_(batch_size=4))
    assert ev.cache_hits == 1 and again.latency_ms == first.latency_ms and other.batch_size == 4
    assert len(cache) == 2
    with Evaluator(CPU, cache=cache, isolate=False, remeasure=True) as ev:
        fresh = ev.measure(Candidate("tiny", "w8"))
    assert ev.cache_hits == 0 and fresh.timestamp >= first.timestamp


def test_batch_sweep_finds_a_saturation_point(installed_plugin):
    seen = []  # each batch as it is measured: `measure --sweep --out` appends them so, and a stopped sweep keeps them
    with Evaluator(CPU.with_(repeats=2), isolate=False) as ev:
        result = sweep_batch(ev, Candidate("tiny", "w8"), max_batch=16, slo_ms=1e6, on_point=seen.append)
    sizes = [p.batch_size for p in result.points]
    assert sizes[:3] == [1, 2, 4]
    assert result.saturation_batch in sizes and result.slo_batch == sizes[-1]
    assert seen == result.points


def test_the_tables_footer_gives_the_peak_each_row_divided_by(installed_plugin):
    """On a CPU each worker measures its own GEMM peak: a footer that quoted the first row's peak did not
    explain the others' utilization."""
    import dataclasses

    from nasutil.cli.measure_command import _peaks

    with Evaluator(CPU.with_(repeats=2), isolate=False) as ev:
        one = ev.measure(Candidate("tiny", "w8"))
    assert _peaks([one, one]) == f"measured gemm peak {one.peak_tflops:.3g} TFLOP/s (measured GEMM peak " \
                                 f"{one.measured_peak_tflops:.3g})"
    other = dataclasses.replace(one, peak_tflops=one.peak_tflops * 3, measured_peak_tflops=one.peak_tflops * 3)
    assert _peaks([one, other]).startswith(f"each row's own measured gemm peak, {one.peak_tflops:.3g} to "
                                           f"{3 * one.peak_tflops:.3g} TFLOP/s")


def test_bad_configs_are_user_errors():
    for bad in (dict(dtype="fp8"), dict(mode="jit"), dict(batch_size=0), dict(device="tpu"), dict(repeats=1)):
        with pytest.raises(NasutilError):
            MeasureConfig(**bad)


@pytest.mark.parametrize("spec", [None, 3, ["torchvision:resnet18"], "", "resnet18", "torchvision:"])
def test_a_zoo_model_is_named_by_text(spec):
    """None and 3 once failed with "AttributeError: 'NoneType' object has no attribute 'partition'"."""
    with pytest.raises(NasutilError) as raised:
        Candidate.model(spec)
    assert str(raised.value) == f"model must be torchvision:NAME or timm:NAME, got {spec!r}"


def test_cudagraph_on_cpu_is_refused_up_front():
    with pytest.raises(NasutilError, match="needs a CUDA device"):
        CPU.with_(mode="cudagraph")


@pytest.mark.parametrize("damage", ["not json {", '{"status": "ok"}', "[1, 2]",
                                    '{"space": "tiny", "arch": "w8", "device": "cpu", "device_name": "x", '
                                    '"dtype": "fp32", "batch_size": 2, "mode": "eager", "latency_ms": "abc"}'])
def test_a_damaged_cache_row_is_measured_again_and_replaced(installed_plugin, tmp_path, damage):
    import sqlite3

    path = tmp_path / "m.db"
    cache = MeasurementCache(path)
    with Evaluator(CPU, cache=cache, isolate=False) as ev:
        first = ev.measure(Candidate("tiny", "w8"))
    with sqlite3.connect(path) as db:
        assert db.execute("UPDATE measurements_v2 SET json = ?", (damage,)).rowcount == 1
    with Evaluator(CPU, cache=cache, isolate=False) as ev:
        again = ev.measure(Candidate("tiny", "w8"))
        assert ev.cache_hits == 0 and again.ok and again.timestamp is not None
    with sqlite3.connect(path) as db:
        stored = json.loads(db.execute("SELECT json FROM measurements_v2").fetchone()[0])
    assert stored["latency_ms"] == again.latency_ms and first.ok
    cache.close()


def test_cache_survives_a_read_only_database(installed_plugin, tmp_path):
    path = tmp_path / "m.db"
    MeasurementCache(path).close()
    path.chmod(0o444)
    import os

    if os.access(path, os.W_OK):  # root ignores file modes
        pytest.skip("file modes are not enforced for this user")
    with pytest.raises(NasutilError, match="cannot use measurement cache"):
        MeasurementCache(path)


def test_parallel_workers_keep_order_and_survive_a_crash(installed_plugin):
    archs = ["w8", "crash", "w16", "hang", "w32", "w8"]
    with Evaluator(CPU, isolate=True, timeout_s=20, workers=2) as ev:
        results = list(ev.measure_many([Candidate("tiny", a) for a in archs]))
    assert [m.arch for m in results] == archs
    assert [m.ok for m in results] == [True, False, True, False, True, True]


def test_measure_configs_keeps_one_candidate_on_one_worker(installed_plugin, tmp_path):
    configs = [CPU.with_(batch_size=b) for b in (1, 2, 4)]
    cache = MeasurementCache(tmp_path / "m.db")
    with Evaluator(CPU, cache=cache, isolate=True, timeout_s=60, workers=2) as ev:
        results = ev.measure_configs(Candidate("tiny", "w8"), configs)
        busy = [w for w in ev._workers if w._proc is not None and w._proc.is_alive()]
        again = ev.measure_configs(Candidate("tiny", "w8"), configs[::-1])
    assert [m.batch_size for m in results] == [1, 2, 4] and all(m.ok for m in results)
    assert len(busy) == 1  # the other worker was never needed
    assert ev.cache_hits == 3 and [m.batch_size for m in again] == [4, 2, 1]


def test_cli_measure_json_and_out(cli, installed_plugin, tmp_path):
    out = tmp_path / "results.jsonl"
    archs = tmp_path / "archs.txt"
    archs.write_text("w8\n# a comment\nw16\n")
    common = ("--device", "cpu", "--batch-size", "2", "--input-size", "16", "--repeats", "2", "--no-cache")
    r = cli("measure", "tiny", "--archs", str(archs), "--json", "--out", str(out), *common, env=installed_plugin)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert [row["arch"] for row in rows] == ["w8", "w16"]
    required = {"space", "arch", "device", "dtype", "batch_size", "mode", "flops_per_image", "latency_ms",
                "latency_cv", "throughput_per_s", "achieved_tflops", "peak_tflops", "utilization", "sm_clock_mhz",
                "counters"}
    assert required <= set(rows[0])
    r2 = cli("measure", "tiny", "w32", "--out", str(out), *common, env=installed_plugin)
    assert r2.returncode == 0 and "utilization" in r2.stdout
    assert [json.loads(line)["arch"] for line in out.read_text().splitlines()] == ["w8", "w16", "w32"]


def test_cli_measure_torchvision_model(cli):
    pytest.importorskip("torchvision")
    r = cli("measure", "--model", "torchvision:resnet18", "--device", "cpu", "--batch-size", "1", "--input-size", "64",
            "--repeats", "2", "--no-cache", "--json", "--in-process")
    assert r.returncode == 0, r.stderr
    row = json.loads(r.stdout)
    assert row["space"] == "torchvision" and row["arch"] == "resnet18" and row["params"] == 11689512


@pytest.mark.parametrize("args", [
    ("measure", "nb201", "|bad~0|", "--device", "cpu"),
    ("measure", "--model", "torchvision:no_such_net", "--device", "cpu"),
    ("measure", "--model", "keras:resnet50"),
    ("measure", "nb201", "--archs", "/no/such/file"),
    ("measure", "nb201", "--sample", "2", "--dtype", "fp8"),
    ("measure", "nb201", "--sample", "2", "--mode", "xla"),
    ("measure", "nb201", "--sample", "2", "--batch-size", "0"),
    ("measure", "nb201", "--sample", "2", "--slo-ms", "5"),
    ("measure", "nb201", "--sample", "2", "--sweep", "--batch-size", "4"),
    ("measure", "nb201", "--sample", "2", "--device", "cpu", "--mode", "cudagraph"),
    ("measure", "nb201", "--sample", "2", "--seed", "-1"),
    ("measure", "nb201", "--sample", "2", "--timeout", "inf"),
    ("measure", "nb201", "--sample", "2", "--device", "cudaX"),
    ("measure", "nb201", "--sample", "2", "--repeats", "1"),
    ("measure", "nb201", "--sample", "2", "--device", "cpu", "--devices", "cuda:5"),
    ("measure", "nb201", "--sample", "1", "--device", "cpu", "--input-size", "2"),
    ("measure", "nb201", "--sample", "1", "--device", "cpu", "--input-size", "50000"),
    ("measure", "nb201", "--sample", "2", "--device", "cpu", "--devices", "tpu:0"),
    ("measure", "nb201", "--sample", "2", "--device", "cpu", "--devices", "cpu", "--in-process"),
    ("measure",),
] + ([] if torch.cuda.is_available() else [("measure", "nb201", "--sample", "1", "--device", "cuda")]),
    ids=lambda a: " ".join(a[1:])[:50] or "nothing")
def test_cli_measure_bad_input(cli, args):
    r = cli(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr


def test_cli_measure_bad_line_in_archs_file(cli, tmp_path):
    archs = tmp_path / "archs.txt"
    good = "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|"
    archs.write_text(f"{good}\n|nor_conv_3x3~0|+oops\n")
    r = cli("measure", "nb201", "--archs", str(archs), "--device", "cpu")
    assert r.returncode == 2 and "entry 2" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def _hold_turn_forever(turns):
    import time

    with turns.turn():
        time.sleep(3600)


def test_a_killed_worker_does_not_keep_the_device():
    import multiprocessing as mp
    import time

    from nasutil.evaluator.worker import DeviceTurns

    ctx = mp.get_context("spawn")
    turns = DeviceTurns(ctx)
    holder = ctx.Process(target=_hold_turn_forever, args=(turns,))
    holder.start()
    deadline = time.monotonic() + 60
    while turns._holder.value != holder.pid and time.monotonic() < deadline:
        time.sleep(0.05)
    assert turns._holder.value == holder.pid
    holder.kill()
    holder.join()
    turns.release_if_held_by(holder.pid)
    assert turns._lock.acquire(timeout=5)
    turns._lock.release()


class _Marked:
    def to_dict(self) -> dict:
        return {"pid": __import__("os").getpid()}


def mark_at_interpreter_exit(payload: dict, exclusive) -> _Marked:
    """A task that asks the worker's interpreter to write a file as it shuts down."""
    import atexit
    from pathlib import Path

    atexit.register(Path(payload["marker"]).write_text, "the interpreter's teardown ran")
    return _Marked()


def test_a_stopped_worker_leaves_without_the_interpreters_teardown(tmp_path):
    """Asked to stop, the worker ends at once with status 0: Python's shutdown (torch's modules, the device
    context) is skipped, so its atexit handlers do not run. That shutdown held every search's end back."""
    from nasutil.evaluator.task import Task
    from nasutil.evaluator.worker import IsolatedWorker

    marker = tmp_path / "teardown.txt"
    worker = IsolatedWorker("cpu", timeout_s=120, warm=False)
    try:
        answer = worker.run(Task(f"{__name__}:mark_at_interpreter_exit", {"marker": str(marker)}, dict,
                                 lambda why, _: {"failed": why}))
        process = worker._proc
    finally:
        worker.stop()
    assert "pid" in answer, answer
    assert process.exitcode == 0 and not process.is_alive()
    assert not marker.exists()


def test_a_turn_may_be_taken_again_and_says_when_it_waits_each_time():
    """A split measurement enters its task's turn twice (the copy, then the timing): each entry waits for the
    lock, tells the parent "waiting" then "running", and lets the lock go on leaving."""
    import multiprocessing as mp
    import os

    from nasutil.evaluator.worker import DeviceTurns

    turns = DeviceTurns(mp.get_context("spawn"))
    states: list[str] = []
    turn = turns.turn(states.append)
    for _ in range(2):
        with turn:
            assert turns._holder.value == os.getpid() and not turns._lock.acquire(block=False)
        assert turns._holder.value == 0
    assert states == ["waiting", "running"] * 2
    assert turns._lock.acquire(timeout=1)
    turns._lock.release()

    def parent_gone(state: str) -> None:
        if state == "running":
            raise BrokenPipeError("the parent let its end go")

    with pytest.raises(BrokenPipeError):
        with turns.turn(parent_gone):
            pass
    assert turns._holder.value == 0 and turns._lock.acquire(timeout=1)  # not left held for the siblings
    turns._lock.release()


def test_a_lead_in_runs_untimed_calls_before_the_windows():
    from nasutil.evaluator.timing import time_windows

    calls = []
    plain = time_windows(lambda: calls.append(1), torch.device("cpu"), warmup=1, repeats=2, min_window_ms=1e-6,
                         max_iters=1)
    without = len(calls)
    calls.clear()
    led = time_windows(lambda: calls.append(1), torch.device("cpu"), warmup=1, repeats=2, min_window_ms=1e-6,
                       max_iters=1, lead_in_ms=1.0)
    assert without == 3 and len(calls) > without  # the warm-up, two windows, and the lead-in's calls between
    assert plain.iters_per_window == led.iters_per_window == 1 and len(led.window_ms) == 2
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(NasutilError, match="lead_in_ms"):
            MeasureConfig(device="cpu", lead_in_ms=bad)


def test_a_device_turn_covers_the_whole_measurement_unless_only_the_timing_is_asked_on_a_gpu():
    """`device_turn` is checked up front; on a CPU (nothing to share) the turn is entered
    once, before the network is moved, whichever is asked, and no wait for it is reported."""
    import contextlib

    from nasutil.evaluator.run_model import measure_model

    for bad in ("all", "", None, 1):
        with pytest.raises(NasutilError, match="device_turn must be one of whole, timing, split"):
            MeasureConfig(device="cpu", device_turn=bad)
    for turn in ("whole", "timing", "split"):
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU())
        entered: list[str] = []

        @contextlib.contextmanager
        def exclusive():
            entered.append(turn)
            yield

        config = MeasureConfig(device="cpu", dtype="fp32", batch_size=2, mode="eager", channels_last=False,
                               repeats=2, min_window_ms=0.1, counters=False, device_turn=turn)
        m = measure_model(model, config, input_size=8, exclusive=exclusive())
        assert m.ok and entered == [turn] and "turn_wait_s" not in m.timing
        assert m.timing["turn_s"] >= m.timing["time_s"] + m.timing["to_device_s"]  # held from the copy on


def test_a_result_stored_between_the_look_and_the_claim_is_taken_not_measured_again(installed_plugin, tmp_path):
    """Another process stores its result and lets its claim go just after this one looked in the cache and
    before it claims: it must take that result (two processes on one PostgreSQL cache measured a cell twice)."""
    config = MeasureConfig(device="cpu", dtype="fp32", batch_size=2, mode="eager", channels_last=False, repeats=2,
                           min_window_ms=1.0, input_size=16)
    candidate = Candidate("nb201", "|nor_conv_3x3~0|+|none~0|skip_connect~1|+|skip_connect~0|none~1|none~2|")
    with Evaluator(config, isolate=False) as plain:
        theirs = plain.measure(candidate)
    other = MeasurementCache(tmp_path / "m.db")

    class LateClaim(MeasurementCache):
        def claim(self, key, ttl_s):
            other.put(theirs, config)  # the other process finishes right now
            other.release(key)
            return super().claim(key, ttl_s)

    cache = LateClaim(tmp_path / "m.db")
    with Evaluator(config, cache=cache, isolate=False) as ev:
        mine = ev.measure(candidate)
    assert mine.timestamp == theirs.timestamp and mine.timing["windows_ms"] == theirs.timing["windows_ms"]
    assert ev.cache_hits == 1
    cache.close()
    other.close()


def test_workers_start_warm_by_default_and_cold_on_request():
    """A worker process warms itself as it starts (on a CPU there is nothing to load, and it says so in its
    hello); `warm=False` starts it as before, and both measure."""
    config = MeasureConfig(device="cpu", dtype="fp32", batch_size=2, mode="eager", repeats=2, counters=False)
    arch = "|skip_connect~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|"
    with Evaluator(config) as warm, Evaluator(config, warm=False) as cold:
        assert warm.start()["warm_s"] is not None and "warm_s" not in cold.start()
        assert warm.measure(Candidate("nb201", arch)).ok and cold.measure(Candidate("nb201", arch)).ok
    with Evaluator(config, isolate=False) as here:
        assert here.info["warm_s"] is not None


@pytest.mark.parametrize("isolate", [True, False])
def test_staged_networks_serve_one_measurement_each_and_measure_as_built_ones(isolate):
    """Networks staged ahead (a search's batch of survivors, built while its population still trains) are taken
    by the measurements that follow, one each, and measure what a network built in the measurement measures;
    a candidate staged once and measured twice is built the second time, and a new stage lets the old go."""
    a = "|nor_conv_1x1~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|"
    b = "|skip_connect~0|+|none~0|none~1|+|avg_pool_3x3~0|none~1|none~2|"
    config = MeasureConfig(device="cpu", dtype="fp32", batch_size=2, mode="eager", repeats=2, min_window_ms=0.5)
    with Evaluator(config, isolate=isolate) as evaluator:
        staged = evaluator.stage([Candidate("nb201", a), Candidate("nb201", a), Candidate("nb201", b)])
        assert (staged.built, staged.error) == (3, "") and staged.seconds > 0
        readings = [evaluator.measure(Candidate("nb201", arch)) for arch in (a, a, b, a)]
        assert all(r.ok for r in readings)
        assert [r.timing["staged"] for r in readings] == [1.0, 1.0, 1.0, 0.0]
        built_in_turn = readings[3]
        for r in readings[:2]:
            assert (r.arch, r.flops_per_image, r.params) == (built_in_turn.arch, built_in_turn.flops_per_image,
                                                             built_in_turn.params)
        evaluator.stage([Candidate("nb201", a)])
        evaluator.stage([Candidate("nb201", b)])  # the first call's network is let go
        assert [evaluator.measure(Candidate("nb201", arch)).timing["staged"] for arch in (a, b)] == [0.0, 1.0]


def test_staging_is_skipped_where_several_workers_share_the_candidates():
    config = MeasureConfig(device="cpu", dtype="fp32", batch_size=2, mode="eager")
    with Evaluator(config, workers=2) as evaluator:
        staged = evaluator.stage([Candidate("nb201", "|nor_conv_1x1~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|")])
    assert staged.built == 0 and "several workers" in staged.error
