"""Kill a search mid-run and start it again: it resumes and nothing completed is lost."""

from __future__ import annotations

import time

import optuna

from conftest import kill_search_after
from nasutil.cli.search_command import main


def test_killed_search_resumes_without_losing_completed_trials(tmp_path):
    run_dir = tmp_path / "run"
    db = run_dir / "study.db"
    args = ["study_name=resume-me", f"hydra.run.dir={run_dir}", "n_trials=60", "predictor=analytical", "plots=false",
            "prune=none", "storage.heartbeat_interval=1", "storage.grace_period=1"]
    before = kill_search_after([*args, "progress=false"], db, completed=3)
    storage = f"sqlite:///{db}"
    assert 3 <= len(before) < 60

    time.sleep(1.5)  # past the grace period: a trial the kill interrupted is now stale
    assert main([*args, "progress=false"]) == 0
    study = optuna.load_study(study_name="resume-me", storage=storage)
    after = {t.number: (t.values, t.user_attrs.get("arch")) for t in study.trials}
    assert all(after[n] == before[n] for n in before)  # completed trials kept, unchanged
    states = [t.state for t in study.trials]
    assert sum(s in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED) for s in states) == 60
    # The trial the kill interrupted is failed and retried once its heartbeat is stale; Optuna cannot
    # tell a trial killed before its first heartbeat from a live one, so that one stays RUNNING.
    assert states.count(optuna.trial.TrialState.RUNNING) <= 1
    # A trial killed while running was failed and retried with the parameters it had. (One asked for while
    # the killed trial still held its place is recorded as not run, "surplus", and needs no retry.)
    for t in study.trials:
        if t.state == optuna.trial.TrialState.FAIL and not t.user_attrs.get("surplus"):
            retry = [r for r in study.trials if r.system_attrs.get("failed_trial") == t.number]
            assert retry and t.params.items() <= retry[0].params.items()


def _study_name(*overrides: str) -> str:
    from nasutil.search.config import compose

    return str(compose(overrides).study_name)


def test_default_study_name_follows_the_settings_that_change_the_search():
    base = _study_name()
    assert base.startswith("nb201-tpe-dominated_throughput-s0-") and base == _study_name()
    # Budget and display options leave it alone: re-running with more trials resumes the same study.
    assert _study_name("n_trials=500", "timeout_s=60", "progress=false", "plots=false", "verbose=true") == base
    changed = {_study_name(o) for o in ("seed=1", "prune.band=0.1", "sampler.n_startup_trials=5",
                                        "pruned_as=pruned", "objectives=accuracy_latency", "trainer.dataset=cifar100",
                                        "target.batch_size=1", "anchors=4", "anchors=8")}
    assert len(changed) == 9 and base not in changed  # anchors go first in a new study, so another count is one
    assert _study_name("anchors=0") == base
    assert _study_name("study_name=mine") == "mine"


def test_rerunning_the_same_command_resumes_under_the_default_name(tmp_path, capsys):
    import json

    args = [f"hydra.run.dir={tmp_path}", "predictor=analytical", "plots=false", "progress=false"]
    assert main([*args, "n_trials=5"]) == 0
    first = json.loads((tmp_path / "summary.json").read_text())
    assert main([*args, "n_trials=9"]) == 0
    second = json.loads((tmp_path / "summary.json").read_text())
    assert not first["resumed"] and second["resumed"] and second["study_name"] == first["study_name"]
    assert f"resumed study {first['study_name']!r}: it held 5 finished trials" in capsys.readouterr().out
    study = optuna.load_study(study_name=first["study_name"], storage=f"sqlite:///{tmp_path / 'study.db'}")
    assert len(study.trials) == 9


def _archs(run_dir, name: str) -> list[str]:
    study = optuna.load_study(study_name=name, storage=f"sqlite:///{run_dir}/study.db")
    return [t.user_attrs.get("arch") for t in sorted(study.trials, key=lambda t: t.number)]


def test_a_resumed_search_draws_new_candidates_and_is_still_reproducible(tmp_path):
    """The sampler's seed is varied by the trials the study holds: a resumed random (or TPE start-up) search
    once drew the first run's candidates again, each a repeat. The same commands give the same trials."""
    runs = []
    for copy in ("a", "b"):
        args = [f"hydra.run.dir={tmp_path / copy}", "study_name=grow", "sampler=random", "prune=none",
                "predictor=analytical", "plots=false", "progress=false"]
        assert main([*args, "n_trials=5"]) == 0
        assert main([*args, "n_trials=10"]) == 0
        runs.append(_archs(tmp_path / copy, "grow"))
    assert len(runs[0]) == 10 and len(set(runs[0])) == 10, runs[0]
    assert runs[0] == runs[1]
