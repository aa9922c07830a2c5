"""Co-training on the CPU: a candidate trained in a population computes exactly what it computes alone,
a stopped candidate leaves and frees its place, and a search trains a population of trials at once."""

from __future__ import annotations

import threading

import optuna
import pytest

from conftest import Recorder, kill_search_after, train_in_threads
from nasutil.colocate import Member, Population
from nasutil.errors import NasutilError
from nasutil.registry import get_space
from nasutil.search.config import shipped
from nasutil.search.controller import StoppedEarly

ARCHS = ["|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|",
         "|nor_conv_1x1~0|+|skip_connect~0|avg_pool_3x3~1|+|none~0|nor_conv_3x3~1|nor_conv_1x1~2|",
         "|avg_pool_3x3~0|+|nor_conv_3x3~0|nor_conv_1x1~1|+|nor_conv_3x3~0|skip_connect~1|nor_conv_1x1~2|"]
SETTINGS = dict(dataset="digits", epochs=2, batch_size=32, lr=0.05, max_batches_per_epoch=6, threads=1)


def test_a_population_trains_each_candidate_exactly_as_alone():
    alone = shipped("trainer", "torch", **SETTINGS)
    solo = {n: (alone.train(get_space("nb201"), a, rec := Recorder(), trial_number=n), rec.steps)
            for n, a in enumerate(ARCHS)}
    together = shipped("trainer", "torch", **SETTINGS, population=3)
    recorders = [Recorder() for _ in ARCHS]
    results = train_in_threads(together, [(a, recorders[n], n) for n, a in enumerate(ARCHS)])
    assert together._population.most_together >= 2  # they did train side by side
    assert 1 <= together._population.most_in_turn <= together._population.host_turns  # host work took turns
    for n in range(len(ARCHS)):
        result, steps = solo[n]
        assert recorders[n].steps == steps  # every epoch's validation accuracy, bit for bit
        assert results[n].accuracy == result.accuracy and results[n].extra == result.extra
    # where the host work went: each candidate built once, validated and reported at each epoch's end
    activity = together.activity()
    assert activity["build_count"] == len(ARCHS) and activity["to_device_count"] == len(ARCHS)
    assert activity["validate_count"] == activity["report_count"] == SETTINGS["epochs"] * len(ARCHS)
    assert activity["data_order_count"] == SETTINGS["epochs"] * len(ARCHS)  # each epoch's order, the first included
    assert all(activity[f"mean_{k}_ms"] > 0 for k in ("build", "to_device", "validate", "report"))
    assert "host work a candidate: build" in together.describe()


def test_building_a_candidate_seeds_the_cpu_generator_alone(monkeypatch):
    """Weights are drawn on the CPU; seeding the CUDA generators too queries the legacy stream, which on a GPU
    breaks the graph capture another member's thread runs at that moment (a failed trial, then a poisoned
    device). The same seed still gives the same weights."""
    import torch

    def refuse(seed: int) -> None:
        raise AssertionError("a trial seeded the CUDA generators")

    monkeypatch.setattr(torch.cuda, "manual_seed_all", refuse)
    monkeypatch.setattr(torch.cuda, "manual_seed", refuse)
    trainer = shipped("trainer", "torch", **SETTINGS)
    first = trainer.train(get_space("nb201"), ARCHS[0], Recorder(), trial_number=3)
    again = trainer.train(get_space("nb201"), ARCHS[0], Recorder(), trial_number=3)
    assert first.accuracy == again.accuracy and first.extra == again.extra


def test_a_stopped_candidate_leaves_and_its_place_is_taken():
    trainer = shipped("trainer", "torch", **SETTINGS, population=2)
    recorders = [Recorder(stop_at=1), Recorder(), Recorder()]
    results = train_in_threads(trainer, [(ARCHS[n], recorders[n], n) for n in range(3)])
    stopped = [n for n, r in results.items() if isinstance(r, StoppedEarly)]
    assert stopped == [0] and [s for s, _ in recorders[0].steps] == [1]
    assert all(not isinstance(results[n], BaseException) for n in (1, 2))
    assert [s for s, _ in recorders[2].steps] == [1, 2]
    assert trainer._population.most_together <= 2


def test_population_members_leave_with_their_own_errors():
    population = Population(2)
    calls = []

    def failing():
        raise ValueError("boom")

    def fine():
        calls.append(1)

    errors = {}

    def run(name, member):
        try:
            population.run(member)
        except ValueError as exc:
            errors[name] = str(exc)

    threads = [threading.Thread(target=run, args=("bad", Member(failing, 3))),
               threading.Thread(target=run, args=("good", Member(fine, 5)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert errors == {"bad": "boom"} and len(calls) == 5


@pytest.mark.parametrize("population", [0, -2, 1.5, "4"])
def test_bad_population_is_a_user_error(population):
    with pytest.raises(NasutilError, match="population"):
        shipped("trainer", "torch", dataset="digits", population=population)


def test_search_with_a_population_runs_its_budget(tmp_path, capsys):
    import json
    import re

    from nasutil.cli.search_command import main

    run_dir = tmp_path / "run"
    args = ["study_name=together", f"hydra.run.dir={run_dir}", "n_trials=6", "predictor=analytical", "plots=false",
            "prune=none", "trainer=torch", "trainer.dataset=digits", "trainer.epochs=1", "trainer.batch_size=64",
            "trainer.max_batches_per_epoch=3", "trainer.population=3", "trainer.threads=1", "progress=false"]
    assert main(args) == 0
    study = optuna.load_study(study_name="together", storage=f"sqlite:///{run_dir / 'study.db'}")
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(done) == 6 and all("accuracy" in t.user_attrs for t in done)
    starts = sorted(t.datetime_start for t in study.trials)
    ends = sorted(t.datetime_complete for t in study.trials)
    assert starts[1] < ends[0]  # a second trial started before the first finished: trials ran at once
    # the closing report says how the population trained, from the activity summary.json keeps
    activity = json.loads((run_dir / "summary.json").read_text())["trainer_activity"]
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("population: "))
    shown = re.match(r"population: ([\d.]+) candidates trained at once on average \(at most (\d+)\) over ([\d.]+) s", line)
    assert shown is not None, line
    assert float(shown[1]) == round(activity["members_time_mean"], 1) and 1 <= float(shown[1]) <= 3
    assert int(shown[2]) == activity["most_together"] <= 3
    assert float(shown[3]) == round(activity["membership_span_s"], 1) > 0


def test_a_killed_population_search_resumes(tmp_path):
    import time

    from nasutil.cli.search_command import main

    run_dir = tmp_path / "run"
    db = run_dir / "study.db"
    args = ["study_name=together-resume", f"hydra.run.dir={run_dir}", "n_trials=12", "predictor=analytical",
            "plots=false", "prune=none", "trainer=torch", "trainer.dataset=digits", "trainer.epochs=2",
            "trainer.batch_size=64", "trainer.max_batches_per_epoch=4", "trainer.population=3", "trainer.threads=1",
            "storage.heartbeat_interval=1", "storage.grace_period=1", "progress=false"]
    before = kill_search_after(args, db, completed=2)
    assert 2 <= len(before) < 12
    time.sleep(1.5)  # past the grace period: the trials the kill interrupted are stale
    assert main(args) == 0
    study = optuna.load_study(study_name="together-resume", storage=f"sqlite:///{db}")
    after = {t.number: (t.values, t.user_attrs.get("arch")) for t in study.trials}
    assert all(after[n] == before[n] for n in before)
    states = [t.state for t in study.trials]
    assert states.count(optuna.trial.TrialState.COMPLETE) == 12
    # trials killed before their first heartbeat cannot be told from live ones: at most one per place
    assert states.count(optuna.trial.TrialState.RUNNING) <= 3


def test_the_training_step_computes_torch_sgd_with_a_cosine_schedule():
    """The hand-written update (a learning rate that a CUDA graph can read from the device) against
    torch.optim.SGD(nesterov) with CosineAnnealingLR, fp32, no autocast. Each step starts torch from the
    step's own state (weights, statistics, momentum): over several steps a one-ulp difference in the
    order of the same arithmetic grows chaotically in this small network, which says nothing about the
    update rule."""
    import copy

    import torch
    import torch.nn.functional as F

    from nasutil.colocate.training_step import TrainingStep, cosine_rates

    torch.manual_seed(0)
    model = get_space("nb201").build(get_space("nb201").parse(ARCHS[0]), num_classes=10, input_size=8)
    reference = copy.deepcopy(model)
    x, y = torch.randn(64, 3, 8, 8), torch.randint(0, 10, (64,))
    steps, lr = 6, 0.1
    unit = TrainingStep(model, lambda t: t, x, y, 16, cosine_rates(lr, steps), 0.9, 5e-4, None, graph=False)
    optimizer = torch.optim.SGD(reference.parameters(), lr=lr, momentum=0.9, nesterov=True, weight_decay=5e-4)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
    losses = []
    for step in range(steps):
        missing, _ = reference.load_state_dict(model.state_dict(), strict=False)
        assert missing and all(key.endswith("num_batches_tracked") for key in missing)  # left out while training
        if step:  # torch's buffer is the unit's from the second step on (both start as the first gradient)
            for p, buffer in zip(reference.parameters(), unit.buffers):
                optimizer.state[p]["momentum_buffer"] = buffer.clone()
        rows = torch.arange(16) + 16 * (step % 4)
        unit.run(step, rows)
        optimizer.zero_grad()
        loss = F.cross_entropy(reference(x[rows]), y[rows])
        loss.backward()
        optimizer.step()
        schedule.step()
        losses.append(float(loss.detach()))
        ours = model.state_dict()
        for name, b in reference.state_dict().items():
            if name in ours:
                assert torch.allclose(ours[name].float(), b.float(), rtol=1e-5, atol=1e-7), (step, name)
    assert unit.take_loss(steps) == pytest.approx(sum(losses) / steps, rel=1e-6)


def test_batch_counters_are_left_out_while_training_and_given_back_counted():
    """A BatchNorm with a momentum never reads its batch counter, so a training step leaves the counter out
    (one kernel less a layer a step) and gives it back on release, as far along as plain training takes it;
    a layer with momentum=None averages by its counter, and keeps it."""
    import copy

    import torch

    from nasutil.colocate.training_step import TrainingStep, cosine_rates

    torch.manual_seed(0)
    model = get_space("nb201").build(get_space("nb201").parse(ARCHS[1]), num_classes=10, input_size=8)
    model.head[0].momentum = None  # a cumulative average: it reads its counter
    reference = copy.deepcopy(model)
    layers = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    x, y = torch.randn(64, 3, 8, 8), torch.randint(0, 10, (64,))
    unit = TrainingStep(model, lambda t: t, x, y, 16, cosine_rates(0.05, 5), 0.9, 5e-4, None, graph=False)
    assert [m.num_batches_tracked is None for m in layers] == [m is not model.head[0] for m in layers]
    for step in range(5):
        unit.run(step, torch.arange(16) + 16 * (step % 4))
        reference(x[torch.arange(16) + 16 * (step % 4)])
    assert int(model.head[0].num_batches_tracked) == 5
    unit.release()
    for ours, theirs in zip(layers, (m for m in reference.modules() if isinstance(m, torch.nn.BatchNorm2d))):
        assert int(ours.num_batches_tracked) == int(theirs.num_batches_tracked) == 5
    assert set(model.state_dict()) == set(reference.state_dict())
    model.eval()(x)  # and the network still runs


def test_a_training_set_smaller_than_a_batch_is_a_user_error():
    trainer = shipped("trainer", "torch", dataset="digits", batch_size=100_000, epochs=1)
    with pytest.raises(NasutilError, match="larger than the"):
        trainer.train(get_space("nb201"), ARCHS[0], Recorder())


def test_graphs_need_a_cuda_device():
    with pytest.raises(NasutilError, match="graphs"):
        shipped("trainer", "torch", dataset="digits", device="cpu", graphs=True)
    with pytest.raises(NasutilError, match="graphs"):
        shipped("trainer", "torch", dataset="digits", device="cpu", graphs="yes")


def test_a_memory_budget_limits_who_trains_together():
    """Members of 3 units under a budget of 7: two at a time, though the population has room for three."""
    import time

    population = Population(3, memory_budget_bytes=7)
    together = []

    def step():
        together.append(len(population._members))
        time.sleep(0.05)  # long enough for the other threads to ask for a place

    def member():
        return Member(step, 4, memory_bytes=3)

    threads = [threading.Thread(target=population.run, args=(member(),)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert population.most_together == 2 and max(together) == 2 and len(together) == 12


def test_a_memory_budget_too_small_for_one_candidate_is_a_user_error(tmp_path, capsys):
    from nasutil.cli.search_command import main

    args = [f"hydra.run.dir={tmp_path}", "trainer=torch", "trainer.dataset=digits", "trainer.population=2",
            "plots=false", "progress=false", "n_trials=2"]
    assert main([*args, "trainer.memory_budget_gb=0.000001"]) == 2
    err = capsys.readouterr().err.strip()
    assert "too small for one candidate" in err and "\n" not in err
    with pytest.raises(NasutilError, match="memory_budget_gb"):
        shipped("trainer", "torch", dataset="digits", memory_budget_gb=-1)


def test_a_population_search_draws_its_members_over_time(tmp_path, capsys):
    """With plots on, a real CPU population search leaves population.png (a PNG, listed in the closing report)
    drawn from the timeline summary.json keeps; the plot is not drawn without a timeline."""
    import json

    from nasutil.cli.search_command import main
    from nasutil.search.plots import population_png

    run_dir = tmp_path / "run"
    args = ["study_name=drawn", f"hydra.run.dir={run_dir}", "n_trials=4", "predictor=analytical", "prune=none",
            "trainer=torch", "trainer.dataset=digits", "trainer.epochs=1", "trainer.batch_size=64",
            "trainer.max_batches_per_epoch=3", "trainer.population=2", "trainer.threads=1", "progress=false"]
    assert main(args) == 0
    picture = run_dir / "population.png"
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "  population.png" in capsys.readouterr().out.splitlines()
    activity = json.loads((run_dir / "summary.json").read_text())["trainer_activity"]
    timeline = activity["membership_timeline"]
    assert [n for _, n in timeline][-1] == 0 and max(n for _, n in timeline) <= activity["places"] == 2
    assert population_png({}, tmp_path / "none.png") is None and not (tmp_path / "none.png").exists()
    assert population_png({"membership_timeline": [[0.0, 1]]}, tmp_path / "one.png") is None


def test_a_population_search_says_where_each_trials_time_went(tmp_path):
    """Each trained trial's times in the population, in order: asked, built, reserved, prepared, joined, left,
    returned; on the clock of the population's membership timeline."""
    import json

    from nasutil.cli.search_command import main

    run_dir = tmp_path / "run"
    args = ["study_name=phases", f"hydra.run.dir={run_dir}", "n_trials=5", "predictor=analytical", "prune=none",
            "plots=false", "trainer=torch", "trainer.dataset=digits", "trainer.epochs=1", "trainer.batch_size=64",
            "trainer.max_batches_per_epoch=3", "trainer.population=2", "trainer.threads=1", "progress=false"]
    assert main(args) == 0
    activity = json.loads((run_dir / "summary.json").read_text())["trainer_activity"]
    phases = activity["trial_phases"]
    study = optuna.load_study(study_name="phases", storage=f"sqlite:///{run_dir / 'study.db'}")
    trained = {str(t.number) for t in study.trials if "accuracy" in t.user_attrs and "duplicate_of" not in t.user_attrs}
    assert trained and trained <= set(phases)
    order = ["asked", "built", "reserved", "prepared", "joined", "left", "returned"]
    for number in trained:
        times = phases[number]
        assert list(times) == order and [times[k] for k in order] == sorted(times.values()), (number, times)
    first_join = min(t["joined"] for t in phases.values())
    assert first_join == pytest.approx(activity["membership_timeline"][0][0], abs=1e-3)


def test_a_member_that_runs_out_of_memory_while_preparing_tries_again_once_there_is_room(monkeypatch):
    """A CPU has no device memory to run out of, so the fault is injected: the second candidate's first
    preparation raises CUDA's out-of-memory error (as a capture that cannot allocate does) while the others
    hold places. It is not failed: the budget shrinks to what the others' estimates hold, and it is rebuilt
    from its seed and prepared again in a place granted under that budget, training exactly what it trains
    alone. A candidate that runs out of memory alone, with nothing to wait for, fails as before."""
    import time

    import torch

    from nasutil.search.trainers import torch_trainer

    solo = shipped("trainer", "torch", **SETTINGS).train(get_space("nb201"), ARCHS[1], alone := Recorder(),
                                                         trial_number=1)
    trainer = shipped("trainer", "torch", **SETTINGS, population=3, memory_budget_gb=1)
    recorders = [Recorder() for _ in ARCHS]
    prepare, short, current = torch_trainer._Run.prepare, [], {"trainer": trainer, "others": 2}

    def short_of_memory_once(run) -> None:
        if run.reporter is recorders[1] and not short:
            reserved = current["trainer"]._population._reserved
            deadline = time.monotonic() + 30
            while len(reserved) < current["others"] and time.monotonic() < deadline:
                time.sleep(0.01)
            short.append(len(reserved))
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 MiB")
        return prepare(run)

    monkeypatch.setattr(torch_trainer._Run, "prepare", short_of_memory_once)
    results = train_in_threads(trainer, [(a, recorders[n], n) for n, a in enumerate(ARCHS)])
    assert short and short[0] >= 2
    assert not any(isinstance(r, BaseException) for r in results.values()), results
    assert results[1].accuracy == solo.accuracy and recorders[1].steps == alone.steps
    population = trainer._population
    assert population.memory_shortfalls == 1 and trainer.activity()["memory_shortfalls"] == 1
    assert population.memory_budget_bytes < 2**30  # what the other reservations held when it ran short

    lone = shipped("trainer", "torch", **SETTINGS, population=3, memory_budget_gb=1)
    recorders, short[:] = [Recorder(), Recorder(), Recorder()], []
    current.update(trainer=lone, others=1)
    results = train_in_threads(lone, [(ARCHS[1], recorders[1], 1)])
    assert isinstance(results[1], torch.cuda.OutOfMemoryError) and lone._population.memory_shortfalls == 0


def test_an_out_of_memory_error_is_told_through_the_error_a_capture_ends_with():
    import torch

    from nasutil.search.trainers.torch_trainer import ran_out_of_memory

    try:
        try:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory")
        except torch.cuda.OutOfMemoryError:
            raise RuntimeError("operation failed due to a previous error during capture")
    except RuntimeError as ended:
        assert ran_out_of_memory(ended)
    assert not ran_out_of_memory(RuntimeError("CUDA error: an illegal memory access was encountered"))


def test_without_estimates_running_out_of_memory_caps_how_many_reserve():
    from nasutil.colocate.population import Place

    population = Population(4)
    with population.place(), population.place(), population.place() as third:
        assert population.out_of_memory(third) and population.reservations_that_fit == 2
        assert not population._room_for(Place(99, 0.0))  # three hold places where two fit: none more until one leaves
    with population.place() as alone:
        assert not population.out_of_memory(alone)  # nothing to wait for
    with population.place(), population.place():
        assert not population._room_for(Place(100, 0.0)) and population.memory_shortfalls == 1
