"""The evaluator on a CUDA device (skipped without one)."""

import statistics

import numpy as np
import pytest
import torch

from nasutil.devices import datasheet_peak_tflops
from nasutil.evaluator import Candidate, Evaluator, MeasureConfig
from nasutil.evaluator.config import MAX_BATCH_SIZE
from nasutil.evaluator.peak import measured_peak_tflops

pytestmark = pytest.mark.gpu

CELL = "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|"
GPU = MeasureConfig(device="cuda", dtype="fp16", batch_size=64, mode="cudagraph")


def test_cudagraph_beats_eager_on_a_launch_bound_cell():
    with Evaluator(GPU, isolate=False) as ev:
        graph = ev.measure(Candidate("nb201", CELL))
        eager = ev.measure(Candidate("nb201", CELL), GPU.with_(mode="eager"))
    for m in (graph, eager):
        assert m.ok, m.error
        assert m.device == "cuda" and m.peak_source == "datasheet"
        assert 0 < m.utilization < 1 and m.sm_clock_mhz and m.sm_clock_mhz > 0
        assert set(m.counters) >= {"sm_activity", "sm_occupancy", "tensor_activity", "dram_bw_util", "nvml_gpu_util"}
    assert graph.latency_ms < eager.latency_ms


def test_gpm_counters_on_hopper():
    _hopper()
    with Evaluator(GPU.with_(batch_size=256), isolate=False) as ev:
        m = ev.measure(Candidate("nb201", CELL))
    assert m.counters["sm_activity"] is not None and 0 < m.counters["sm_activity"] <= 100
    assert m.counters["tensor_activity"] is not None


def _hopper() -> None:
    name = torch.cuda.get_device_name()
    if not any(k in name for k in ("H100", "H200", "B200", "GH200")):
        pytest.skip(f"GPM needs Hopper or newer, this is {name}")


@pytest.mark.parametrize("model", ["torchvision:resnet18", "torchvision:squeezenet1_1"])
def test_gpm_counters_converge_to_a_long_plain_window(model):
    """The evaluator's counters agree with an independent reading: the model's CUDA graph replayed back to
    back for 2 s between two GPM samples, after a 0.5 s lead-in (over 0.12 s windows they read low)."""
    from nasutil.evaluator.reference import graph_replay_counters

    _hopper()
    config = GPU.with_(batch_size=256)
    with Evaluator(config, isolate=False) as ev:
        m = ev.measure(Candidate.model(model))
    assert m.ok and m.counters_converged is True and m.counter_window_ms == config.counter_window_ms

    net = torchvision_model(model.split(":")[1])
    x = torch.randn(256, 3, 224, 224, device="cuda", dtype=torch.float16).contiguous(memory_format=torch.channels_last)
    reference = graph_replay_counters(net, x)
    for key in ("sm_activity", "tensor_activity"):
        assert m.counters[key] == pytest.approx(reference[key], abs=4.0), (key, m.counters, reference)


def torchvision_model(name: str) -> torch.nn.Module:
    import torchvision

    net = getattr(torchvision.models, name)(num_classes=1000).eval()
    return net.to("cuda", torch.float16).to(memory_format=torch.channels_last)


def test_measured_gemm_peak_is_below_the_datasheet():
    measured = measured_peak_tflops("cuda", "fp16")
    datasheet = datasheet_peak_tflops(torch.cuda.get_device_name(), "fp16")
    assert measured > 0
    if datasheet:
        assert 0.3 * datasheet < measured < 1.1 * datasheet


def test_out_of_memory_fails_one_candidate_and_the_run_goes_on():
    # VGG-16 at the largest batch a config takes: its first activation alone is over 400 GB in fp16
    huge = GPU.with_(batch_size=MAX_BATCH_SIZE, mode="eager", counters=False)
    with Evaluator(huge, isolate=True, timeout_s=300) as ev:
        first = ev.measure(Candidate("nb201", CELL), GPU)
        oom = ev.measure(Candidate.model("torchvision:vgg16"))
        after = ev.measure(Candidate("nb201", CELL), GPU)
    assert first.ok and after.ok
    assert not oom.ok and "out of memory" in oom.error


def test_per_layer_breakdown_on_gpu():
    with Evaluator(GPU.with_(per_layer=True, mode="eager"), isolate=False) as ev:
        m = ev.measure(Candidate.model("torchvision:resnet18"))
    assert m.ok, m.error
    timed = [l for l in m.layers if l["time_ms"]]
    convs = [l for l in timed if l["kind"].startswith("conv")]
    assert len(convs) >= 20 and all(0 < l["utilization"] < 1 for l in convs)
    leaf_sum = sum(l["time_ms"] for l in timed)
    assert 0.5 * m.timing["kernel_time_ms"] <= leaf_sum <= 1.01 * m.timing["kernel_time_ms"]


_ALTERNATE = """
import json, sys
from nasutil.evaluator import Candidate, Evaluator, MeasureConfig
config = MeasureConfig(device="cuda", dtype="fp16", batch_size=1, mode="eager", counters=False, repeats=7,
                       min_window_ms=20.0)
cell = Candidate("nb201", sys.argv[1])
rounds = int(sys.argv[2])
fastest = lambda m: min(m.timing["windows_ms"])
rows = []
with Evaluator(config, isolate=False) as here, Evaluator(config) as isolated:
    here.measure(cell), isolated.measure(cell)  # each process pays its one-off library work first
    for _ in range(rounds):
        before = here.measure(cell)
        worker = isolated.measure(cell)
        after = here.measure(cell)
        rows.append([fastest(before), fastest(worker), fastest(after)])
print(json.dumps(rows))
"""


def test_isolated_worker_has_no_systematic_cost_at_eager_batch_1():
    """Eager at batch 1 is paced by the thread that launches kernels: anything in the worker process
    competing with it (threads waking, polling, priority) would make the worker slower than its parent.

    On an H200 host the same loop in one process moves by up to 1.5x between windows a second apart
    (BENCHMARKS.md, "Isolated worker against its parent"), so a fixed 5% bound between two processes
    fails on host noise alone. This test fails on a cost of the worker instead: over 15 rounds of
    parent, worker, parent, each timed by its fastest window (host interference only adds time), the
    worker must not be the slowest of the three more often than chance allows (exchangeable readings
    make it the slowest in a third of rounds; 11 or more of 15 has probability 0.2%), and its median
    excess over the mean of its two neighbours must stay within 5% or the parent's own median drift
    between them, whichever is larger. The parent is a plain Python process, as a user's script is."""
    import json
    import subprocess
    import sys

    rounds = 15
    proc = subprocess.run([sys.executable, "-c", _ALTERNATE, CELL, str(rounds)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(rows) == rounds
    slowest = sum(worker > max(before, after) for before, worker, after in rows)
    excess = statistics.median(worker / ((before + after) / 2) for before, worker, after in rows) - 1
    drift = statistics.median(abs(after / before - 1) for before, _, after in rows)
    assert slowest <= 10, rows
    assert excess <= max(0.05, drift), (excess, drift, rows)


def test_fast_settings_agree_with_the_default_and_a_plain_loop():
    """Graphs captured without eager warm-up, one copy per model and shorter windows must not move the
    timings: 24 cells by the fast path with 4 workers, by the default path, and by a plain replay loop."""
    from nasutil import get_space
    from nasutil.evaluator.reference import graph_replay_ms

    space = get_space("nb201")
    rng = np.random.default_rng(3)
    cells = list(dict.fromkeys(space.sample(rng).to_string() for _ in range(24)))
    default = GPU.with_(batch_size=256, counters=False)
    with Evaluator(default.fast(), workers=4) as ev:
        fast = list(ev.measure_many([Candidate("nb201", c) for c in cells]))
    with Evaluator(default, workers=4) as ev:
        slow = list(ev.measure_many([Candidate("nb201", c) for c in cells]))
    assert all(m.ok for m in fast + slow)
    assert statistics.median(abs(f.latency_ms / s.latency_ms - 1) for f, s in zip(fast, slow)) <= 0.01
    with torch.inference_mode():
        ratios = []
        for m in fast[:6]:
            model = space.build(space.parse(m.arch), num_classes=10).eval()
            model = model.to("cuda", torch.float16, memory_format=torch.channels_last)
            x = torch.randn(256, 3, 32, 32, device="cuda", dtype=torch.float16).contiguous(
                memory_format=torch.channels_last)
            ratios.append(m.latency_ms / graph_replay_ms(model, x))
    # A plain loop reads nb201 cells 2-10% slower than the evaluator, with the default settings as with
    # these (median 4.4% over 40 cells, BENCHMARKS.md); the cause is not established.
    assert abs(statistics.median(ratios) - 1) <= 0.06, ratios


def test_weights_made_on_the_device_read_as_weights_copied_from_the_host():
    """`weights="device"` gives a network its memory and values on the device instead of copying each tensor:
    the timings must not move. 16 cells, fast settings either way, the order alternated."""
    from nasutil import get_space

    space = get_space("nb201")
    rng = np.random.default_rng(11)
    cells = list(dict.fromkeys(space.sample(rng).to_string() for _ in range(16)))
    fast = GPU.with_(batch_size=256, counters=False).fast()
    readings: dict[str, list[list[float]]] = {"device": [], "host": []}
    for weights in ("device", "host", "host", "device"):
        with Evaluator(fast.with_(weights=weights), workers=2) as ev:
            results = list(ev.measure_many([Candidate("nb201", c) for c in cells]))
        assert all(m.ok for m in results), [m.error for m in results if not m.ok]
        made_on_device = sum("allocate_s" in m.timing for m in results)
        # each worker's first network, captured after an eager warm-up, is copied with either setting
        assert made_on_device >= len(results) - 2 if weights == "device" else made_on_device == 0
        readings[weights].append([m.latency_ms for m in results])
    device = [min(pair) for pair in zip(*readings["device"])]
    host = [min(pair) for pair in zip(*readings["host"])]
    differences = [abs(d / h - 1) for d, h in zip(device, host)]
    assert statistics.median(differences) <= 0.01 and max(differences) <= 0.05, differences


def test_a_workers_first_network_is_copied_even_with_weights_made_on_the_device():
    """A worker's first capture follows an eager warm-up; its network is copied (made on the device, those first
    cells read up to 10% slow on an H100), and the ones after it are made on the device."""
    from nasutil import get_space

    cells = list(dict.fromkeys(get_space("nb201").sample(np.random.default_rng(12)).to_string() for _ in range(3)))
    fast = GPU.with_(batch_size=256, counters=False).fast().with_(weights="device")
    with Evaluator(fast, workers=1) as ev:
        results = [ev.measure(Candidate("nb201", c)) for c in cells]
    assert all(m.ok for m in results), [m.error for m in results if not m.ok]
    assert ["allocate_s" in m.timing for m in results] == [False] + [True] * (len(results) - 1)


def test_weights_wait_for_the_turn_where_the_cache_cannot_serve_them():
    """Device memory the caching allocator must map from the driver is taken inside the turn, not while another
    worker times; once the allocator holds it, the allocation runs outside the turn."""
    from nasutil.evaluator.weights import _cache_serves, allocate, built_without_storage, without_storage

    device = torch.device("cuda")
    torch.cuda.synchronize()
    stats = torch.cuda.memory_stats(device)
    free = stats.get("reserved_bytes.large_pool.current", 0) - stats.get("allocated_bytes.large_pool.current", 0)
    wanted = {torch.float16: (free + (64 << 20)) // 2}
    assert not _cache_serves(wanted, device)
    held = torch.empty(wanted[torch.float16], dtype=torch.float16, device=device)
    del held
    assert _cache_serves(wanted, device)
    with without_storage():  # a block over 1 MB comes from the large pool, which now holds enough
        net = torch.nn.Sequential(torch.nn.Conv2d(256, 256, 3), torch.nn.GroupNorm(8, 256)).half()  # one 1.2 MB block
    fill = allocate(net, device)
    assert not built_without_storage(net)
    fill()
    assert net[1].weight.eq(1).all() and net[0].weight.abs().max() <= 1 / (256 * 9) ** 0.5
    torch.cuda.empty_cache()


def test_a_warmed_workers_first_reading_is_within_the_known_gap_of_a_plain_loop():
    """An evaluator's worker loads its CUDA libraries as it starts (`warm`, the default). Its first reading stays
    within the evaluator's known gap to a plain loop of graph replays in this process, 6% (BENCHMARKS.md: the
    workers read 0.95-0.96 of the plain loop over 200 cells, warmed or cold; on one H100 a cold worker's first
    reading read up to 6.3% below it and a warmed one's within 1.5%, on another a warmed one's 3.7% below)."""
    from nasutil.evaluator.reference import graph_replay_ms
    from nasutil.registry import get_space

    space = get_space("nb201")
    readings: dict[str, list[float]] = {"warm": [], "plain": []}
    for way in ("warm", "plain", "warm", "plain"):
        if way == "plain":
            with torch.inference_mode():
                model = space.build(space.parse(CELL), num_classes=10).eval()
                model = model.to("cuda", torch.float16, memory_format=torch.channels_last)
                x = torch.randn(64, 3, 32, 32, device="cuda", dtype=torch.float16).contiguous(
                    memory_format=torch.channels_last)
                readings[way].append(graph_replay_ms(model, x, replays=20, windows=7))
            continue
        with Evaluator(GPU.with_(counters=False)) as ev:
            m = ev.measure(Candidate("nb201", CELL))
        assert m.ok, m.error
        readings[way].append(m.latency_ms)
    assert min(readings["warm"]) == pytest.approx(min(readings["plain"]), rel=0.06), readings


def test_a_timing_turn_holds_the_timing_alone_once_a_capture_needs_no_warm_up(monkeypatch):
    """`device_turn="timing"` (for workers sharing one context through MPS): once this process has captured a
    graph, a fast measurement enters the turn with the network already on the device and captured, and reads
    what the whole turn reads; the first capture, which warms up eagerly, and the default stay inside it. The
    first measurement of a process is left out of the comparison: on an H100 it read its cell 6% below the ones
    after it (1.1562 ms against 1.2290-1.2815, `h100/rate/mps_s111/gpu_tests.log`), as the evaluator's
    first reading of a cell in a process did before (BENCHMARKS.md, "The task's graph is not it either")."""
    import contextlib

    from nasutil.evaluator import run_model
    from nasutil.evaluator.run_model import measure_model
    from nasutil.registry import get_space

    monkeypatch.setattr(run_model, "_captured_before", False)  # as in a fresh worker
    space = get_space("nb201")
    fast = GPU.with_(counters=False).fast().with_(device_turn="whole")
    timing = fast.with_(device_turn="timing")
    readings, on_device = {}, {}
    for name, config in (("first", timing), ("timing", timing), ("whole", fast),
                         ("timing again", timing), ("whole again", fast)):
        model = space.build(space.parse(CELL), num_classes=10)

        @contextlib.contextmanager
        def exclusive(name=name, model=model):
            on_device[name] = next(model.parameters()).is_cuda
            yield

        m = measure_model(model, config, input_size=32, exclusive=exclusive())
        assert m.ok
        readings[name] = m.latency_ms
    assert on_device == {"first": False, "timing": True, "whole": False, "timing again": True, "whole again": False}
    assert min(readings["timing"], readings["timing again"]) == pytest.approx(
        min(readings["whole"], readings["whole again"]), rel=0.02), readings


def test_a_split_turn_copies_in_one_turn_and_times_in_another_with_the_capture_between(monkeypatch):
    """`device_turn="split"` (the fast settings' turn): once this process has captured a graph, a fast
    measurement takes the turn twice, first with the network still on the host (the copy), then with it on
    the device and captured (the timing), and reads what the whole turn reads. Batch 256,
    three of each, alternated: single readings of one process at batch 64 moved 3.4% on an H100."""
    from nasutil.evaluator import run_model
    from nasutil.evaluator.run_model import measure_model
    from nasutil.registry import get_space

    monkeypatch.setattr(run_model, "_captured_before", False)  # as in a fresh worker
    space = get_space("nb201")
    split = GPU.with_(counters=False, batch_size=256).fast()
    fast = split.with_(device_turn="whole")

    class Exclusive:
        def __init__(self, model):
            self.model, self.entries = model, []

        def __enter__(self):
            self.entries.append(next(self.model.parameters()).is_cuda)

        def __exit__(self, *exc_info):
            return None

    readings, entries = {"whole": [], "split": []}, {"whole": [], "split": []}
    for name, config in [("first", fast)] + [("split", split), ("whole", fast)] * 3:
        model = space.build(space.parse(CELL), num_classes=10)
        exclusive = Exclusive(model)
        m = measure_model(model, config, input_size=32, exclusive=exclusive)
        assert m.ok
        if name != "first":
            readings[name].append(m.latency_ms)
            entries[name].append(exclusive.entries)
    assert entries == {"whole": [[False]] * 3, "split": [[False, True]] * 3}
    assert statistics.median(readings["split"]) == pytest.approx(statistics.median(readings["whole"]), rel=0.02), \
        readings


def test_measure_with_mps_reaches_a_server_and_reads_above_a_plain_loop_without_it():
    """`nasutil measure --fast --mps` as a user runs it: the daemon starts, the workers reach its server and every
    cell is measured with the turn holding the timing alone. Its readings lie above a plain loop of graph replays
    in this process, which runs without MPS, where workers without MPS read below such a loop: on H100s the
    median ratio was 1.051-1.058 here, and every pass under MPS read 1.047-1.053 of it in `nb201_rate.py`
    (BENCHMARKS.md, "Readings under MPS against a plain loop without it"). The bound leaves room on both sides."""
    import json
    import subprocess
    import sys

    from nasutil.errors import NasutilError
    from nasutil.evaluator.mps import control_program
    from nasutil.evaluator.reference import graph_replay_ms
    from nasutil.registry import get_space

    try:
        control_program()
    except NasutilError as exc:
        pytest.skip(str(exc))
    proc = subprocess.run([sys.executable, "-m", "nasutil", "measure", "nb201", "--sample", "24", "--seed", "11",
                           "--fast", "--workers", "4", "--mps", "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == 24 and all(r["status"] == "ok" for r in rows), proc.stderr[-2000:]
    space = get_space("nb201")
    ratios = []
    with torch.inference_mode():
        for r in rows[:8]:
            model = space.build(space.parse(r["arch"]), num_classes=10).eval()
            model = model.to("cuda", torch.float16, memory_format=torch.channels_last)
            x = torch.randn(256, 3, 32, 32, device="cuda", dtype=torch.float16).contiguous(
                memory_format=torch.channels_last)
            ratios.append(r["latency_ms"] / graph_replay_ms(model, x, replays=20, windows=7))
    print("under MPS / plain loop without it:", [round(x, 4) for x in ratios])
    assert 1.0 < statistics.median(ratios) < 1.12, ratios


def test_a_settled_reading_is_the_same_after_other_work_on_the_device_and_after_another_reading():
    """A reading right after another process's work on the device read about 10% faster than one after the
    worker's own reading (BENCHMARKS.md, "Where a survivor's reading sits in its measurement"). Settled first
    (`Evaluator.settle`), the cell reads the same after this process's burst of matrix products as after the
    worker read another cell, within 1%; the worker knows the device's top clock, and the first settling sets
    the steady clock later readings are retried against."""
    import time

    fast = "|skip_connect~0|+|skip_connect~0|skip_connect~1|+|skip_connect~0|skip_connect~1|skip_connect~2|"
    config = GPU.with_(counters=False, batch_size=256)
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)

    def burst() -> None:  # 200 ms of another process's work on the device, as training before a survivor
        end = time.perf_counter() + 0.2
        while time.perf_counter() < end:
            a @ a
            torch.cuda.synchronize()

    readings: dict[str, list[float]] = {"after a burst": [], "after a reading": []}
    with Evaluator(config) as ev:
        assert ev.info["max_sm_clock_mhz"] and ev.info["max_sm_clock_mhz"] > 0
        for _ in range(3):
            burst()
            ev.settle(Candidate("nb201", fast))
            assert ev._steady_clock > 0
            readings["after a burst"].append(ev.measure(Candidate("nb201", fast)).latency_ms)
            ev.measure(Candidate("nb201", CELL))
            ev.settle(Candidate("nb201", fast))
            readings["after a reading"].append(ev.measure(Candidate("nb201", fast)).latency_ms)
    print(readings)
    assert min(readings["after a burst"]) == pytest.approx(min(readings["after a reading"]), rel=0.01), readings
