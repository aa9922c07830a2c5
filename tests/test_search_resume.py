"""Kill a search mid-run and start it again: it resumes and nothing completed is lost."""

from __future__ import annotations

import json
import time
from pathlib import Path

import optuna
import pytest

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
    # how a figure is read (settled or not) leaves it alone: studies named before the option existed resume
    assert _study_name("evaluator.settle=false") == base
    assert _study_name("study_name=mine") == "mine"


def test_prune_settings_that_act_only_at_rungs_name_a_new_study_only_with_halving():
    """`prune.fidelity` and its rung settings change nothing without halving: the default name stays what it
    was before they existed (so a study made then resumes); with halving they choose what trains, and name
    the study."""
    base = _study_name()
    assert base == "nb201-tpe-dominated_throughput-s0-4cdab4b0"  # the name before the settings existed
    assert _study_name("prune.fidelity=final") == _study_name("prune.rung_band=0.2") == base
    halving = {_study_name("halving=pareto", o) for o in ("prune.fidelity=auto", "prune.fidelity=final",
                                                           "prune.rung_min_neighbours=2")}
    assert len(halving) == 3 and base not in halving
    own = "prune._target_=nasutil.search.prune.NoPruning"  # a class of the user's own may mean anything by them
    assert _study_name("prune=none", own, "+prune.rung_band=0.3") != _study_name("prune=none", own, "+prune.rung_band=0.9")


def test_torch_trainer_settings_added_later_name_a_new_study_only_when_set():
    """`trainer.finish_together` and `trainer.rung_valid_images` at their defaults leave the default name as it was
    before they existed, so a study made then resumes; set otherwise, they name another study."""
    torch = ("trainer=torch", "trainer.data_dir=data")  # the default where NASUTIL_DATA_DIR is unset: it is named too
    base = _study_name(*torch)
    assert base == "nb201-tpe-dominated_throughput-s0-9e92213c"  # the name before the settings existed
    assert _study_name(*torch, "trainer.population=16", "halving=pareto") == \
        "nb201-tpe-dominated_throughput-s0-6f9ed038-hb919b464"
    changed = {_study_name(*torch, o) for o in ("trainer.finish_together=true", "trainer.rung_valid_images=2000",
                                                 "trainer.batch_size=64")}
    assert len(changed) == 3 and base not in changed
    from nasutil.search.config import trainer_key  # a trainer of the user's own may mean anything by these keys

    own = {"_target_": "my.Trainer", "finish_together": False}
    assert trainer_key(own) == own


def test_rerunning_the_same_command_resumes_under_the_default_name(tmp_path, capsys):
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


RESUMABLE = ["predictor=analytical", "prune=none", "plots=false", "progress=false", "study_name=kept"]


@pytest.mark.parametrize("change, named", [
    (["target.batch_size=64"], "target.batch_size 256 then, 64 now"),
    (["target=cpu", "evaluator=none"], "target.device cuda then, cpu now; target.dtype fp16 then, fp32 now; "
                                       "target.batch_size 256 then, 8 now; target.mode cudagraph then, eager now"),
    (["predictor=h200"], "predictor.kind analytical then, auto now"),
    (["predictor.profile={tmp}/other.json"], ("predictor.profile h200 then, {tmp}/other.json now, with other "
                                              "content, digest ")),
    (["trainer.dataset=cifar100"], "trainer.dataset cifar10 then, cifar100 now"),
    (["trainer.fidelities=[12]"], "trainer.fidelities[-1] 200 then, 12 now"),
    (["objectives.scored_on=predicted"], "objectives.scored_on auto then, predicted now"),
    (["objectives.min_accuracy=50"], "objectives.min_accuracy null then, 50.0 now"),
    (["trainer=torch"], "trainer._target_ nasutil.search.trainers.tabular.TabularTrainer then, "
                        "nasutil.search.trainers.torch_trainer.TorchTrainer now)"),
])
def test_a_study_resumed_under_settings_that_change_what_its_figures_mean_is_refused(tmp_path, capsys, change,
                                                                                     named):
    """Resuming a study by its name with another target, predictor, dataset or way of scoring once added trials
    whose figures meant something else to the same study and front; each setting changed is named."""
    import nasutil

    _refitted(Path(nasutil.__file__).parent / "data" / "profiles" / "h200.json", tmp_path / "other.json")
    change, named = [c.format(tmp=tmp_path) for c in change], named.format(tmp=tmp_path)
    run_dir = tmp_path / "run"
    args = [*RESUMABLE, f"hydra.run.dir={run_dir}"]
    assert main([*args, "n_trials=3"]) == 0
    capsys.readouterr()
    assert main([*args, "n_trials=5", *change]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("nasutil-search: error: study 'kept' was made with other settings that decide what its "
                          "figures mean (") and "\n" not in err, err
    assert named in err and err.endswith("choose another study_name, or restore the setting" +
                                         ("s" if ";" in named else "")), err
    study = optuna.load_study(study_name="kept", storage=f"sqlite:///{run_dir / 'study.db'}")
    assert len(study.trials) == 3  # nothing added


def _refitted(profile: Path, out: Path) -> Path:
    """A copy of `profile` whose analytical constants differ, as a refit leaves it: its predictions differ."""
    data = json.loads(profile.read_text())
    data["analytical"]["fp16/cudagraph"] = {**data["analytical"].get("fp16/cudagraph", {}), "kernel_us": 7.5}
    out.write_text(json.dumps(data))
    return out


def test_a_study_over_a_profile_refitted_in_place_is_refused(tmp_path, capsys):
    """The profile was judged by its name or path alone: one refitted in place under the same path resumed the
    study, whose new trials' predictions then came from another fit than its old ones'."""
    import shutil

    import nasutil

    shipped = Path(nasutil.__file__).parent / "data" / "profiles" / "h200.json"
    profile = shutil.copy(shipped, tmp_path / "mine.json")
    run_dir = tmp_path / "run"
    args = [*RESUMABLE, f"hydra.run.dir={run_dir}", f"predictor.profile={profile}"]
    assert main([*args, "n_trials=2"]) == 0
    assert main([*args, "n_trials=3"]) == 0  # unchanged: resumed
    _refitted(shipped, tmp_path / "mine.json")
    capsys.readouterr()
    assert main([*args, "n_trials=5"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"(predictor.profile {profile}: its content changed since the study was made, " \
                               f"digest " in err and err.endswith("choose another study_name, or restore the setting"), err
    then, now = err.split("digest ", 1)[1].split(" now)", 1)[0].split(" then, ")
    assert len(then) == len(now) == 12 and then != now, err
    study = optuna.load_study(study_name="kept", storage=f"sqlite:///{run_dir / 'study.db'}")
    assert len(study.trials) == 3  # nothing added, nothing lost


def test_a_profile_named_otherwise_resumes_the_study_where_its_content_is_the_same(tmp_path):
    """The shipped profile by its name, by its file's path, and a copy of that file are one profile: each
    resumes the study the others made (its name and its path were two settings, and refused)."""
    import shutil

    import nasutil

    shipped = Path(nasutil.__file__).parent / "data" / "profiles" / "h200.json"
    copied = shutil.copy(shipped, tmp_path / "copy.json")
    run_dir = tmp_path / "run"
    args = [*RESUMABLE, f"hydra.run.dir={run_dir}"]
    for n, profile in enumerate(("h200", str(shipped), str(copied), "h200"), start=1):
        assert main([*args, f"n_trials={n}", f"predictor.profile={profile}"]) == 0, profile
    assert len(optuna.load_study(study_name="kept", storage=f"sqlite:///{run_dir / 'study.db'}").trials) == 4


def test_a_study_that_stored_a_profile_by_its_name_alone_compares_its_name(tmp_path, capsys):
    """A study made while only the profile's name or path was stored still resumes under that name, and is
    refused under another: what that name read then is not known."""
    import sqlite3

    import nasutil
    from nasutil.search.study_settings import CONTENT, SETTINGS_ATTR

    run_dir = tmp_path / "run"
    args = [*RESUMABLE, f"hydra.run.dir={run_dir}"]
    assert main([*args, "n_trials=1"]) == 0
    with sqlite3.connect(run_dir / "study.db") as db:
        [(value,)] = db.execute("SELECT value_json FROM study_user_attributes WHERE key = ?", (SETTINGS_ATTR,))
        settings = json.loads(value)
        assert len(settings.pop(CONTENT)) == 12
        db.execute("UPDATE study_user_attributes SET value_json = ? WHERE key = ?", (json.dumps(settings), SETTINGS_ATTR))
    assert main([*args, "n_trials=2"]) == 0
    capsys.readouterr()
    shipped = Path(nasutil.__file__).parent / "data" / "profiles" / "h200.json"
    assert main([*args, "n_trials=3", f"predictor.profile={shipped}"]) == 2
    assert f"(predictor.profile h200 then, {shipped} now)" in capsys.readouterr().err


def test_a_prediction_table_counts_by_its_rows_not_its_path(tmp_path):
    """A table the predictor reads is a file like a profile: rewritten in place it is refused, copied elsewhere
    it is the same table."""
    import shutil

    from nasutil.errors import NasutilError
    from nasutil.predictor.kinds.table import TablePredictor
    from nasutil.search.study_settings import CONTENT, refuse_other_settings

    table = tmp_path / "table.csv"
    table.write_text("arch,latency_ms,throughput_per_s,utilization\n|none~0|+|none~0|none~1|+|none~0|none~1|none~2|,"
                     "1.5,170000,0.2\n")
    copy = shutil.copy(table, tmp_path / "copy.csv")
    made = {"predictor.kind": "table", "predictor.path": str(table), CONTENT: TablePredictor(table).content_digest}
    refuse_other_settings("t", made, {**made, "predictor.path": str(copy), CONTENT: TablePredictor(copy).content_digest})
    table.write_text(table.read_text().replace("1.5,", "2.5,"))
    now = TablePredictor(table).content_digest
    with pytest.raises(NasutilError) as refused:
        refuse_other_settings("t", made, {**made, CONTENT: now})
    assert (f"(predictor.path {table}: its content changed since the study was made, digest {made[CONTENT]} then, "
            f"{now} now)") in str(refused.value)


def test_settings_that_change_only_how_a_study_searches_resume_it(tmp_path):
    run_dir = tmp_path / "run"
    args = [*RESUMABLE, f"hydra.run.dir={run_dir}"]
    assert main([*args, "n_trials=3"]) == 0
    assert main([*args, "n_trials=6", "seed=4", "sampler=random", "prune=utilization_threshold", "timeout_s=600",
                 "trainer.fidelities=[200]", "target.device=cuda:0", "pruned_as=infeasible"]) == 0
    study = optuna.load_study(study_name="kept", storage=f"sqlite:///{run_dir / 'study.db'}")
    assert len(study.trials) == 6


def test_a_study_made_before_its_settings_were_stored_still_resumes(tmp_path):
    import sqlite3

    from nasutil.search.study_settings import SETTINGS_ATTR

    run_dir = tmp_path / "run"
    args = [*RESUMABLE, f"hydra.run.dir={run_dir}"]
    assert main([*args, "n_trials=2"]) == 0
    with sqlite3.connect(run_dir / "study.db") as db:  # as a study made before settings were stored holds them
        assert db.execute("DELETE FROM study_user_attributes WHERE key = ?", (SETTINGS_ATTR,)).rowcount == 1
    assert main([*args, "n_trials=3", "target.batch_size=64"]) == 0  # nothing stored: nothing to compare
    assert len(optuna.load_study(study_name="kept", storage=f"sqlite:///{run_dir / 'study.db'}").trials) == 3


def test_workers_that_open_a_new_study_at_once_compare_with_what_its_maker_stored(tmp_path):
    """One worker makes the study and stores its settings; the others, even those that looked for it before
    it existed, compare theirs with those."""
    import threading

    from nasutil.errors import NasutilError
    from nasutil.search.build import open_study
    from nasutil.search.study_settings import SETTINGS_ATTR

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(tmp_path / "s.log")))
    start, results = threading.Barrier(6), []

    def open_one(batch: int) -> None:
        start.wait()
        try:
            open_study(storage, "shared", ["maximize", "maximize"], ["accuracy", "throughput"],
                       optuna.samplers.RandomSampler(), "nb201", {"target.batch_size": batch})
            results.append(("opened", batch))
        except NasutilError as exc:
            results.append((str(exc), batch))

    threads = [threading.Thread(target=open_one, args=(256,)) for _ in range(5)]
    threads.append(threading.Thread(target=open_one, args=(64,)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    made = optuna.load_study(study_name="shared", storage=storage).user_attrs[SETTINGS_ATTR]
    other = 64 if made == {"target.batch_size": 256} else 256
    assert sorted(b for outcome, b in results if outcome == "opened") == [b for b in [256] * 5 + [64] if b != other]
    refused = [outcome for outcome, b in results if outcome != "opened"]
    assert refused and all(f"target.batch_size {made['target.batch_size']} then, {other} now" in r for r in refused)


def test_every_shipped_trainer_setting_is_known_to_decide_its_accuracy_or_not():
    """A setting added to a trainer's config must be placed: one that changes what the accuracy means and is
    left out would let a resumed study mix two kinds of accuracy without a word."""
    from omegaconf import OmegaConf

    from nasutil.search.study_settings import TRAINER_DEFINING, TRAINER_RUNNING

    assert not set(TRAINER_DEFINING) & set(TRAINER_RUNNING)
    for option in (Path(__file__).resolve().parents[1] / "conf" / "trainer").glob("*.yaml"):
        keys = {str(k) for k in OmegaConf.load(option) if k != "_target_"}
        assert keys <= set(TRAINER_DEFINING) | set(TRAINER_RUNNING), (option.name, keys - set(TRAINER_DEFINING)
                                                                      - set(TRAINER_RUNNING))
