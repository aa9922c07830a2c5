"""`nasutil-search` end to end: the default run, multirun sweeps, bad configs, failing trials."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import optuna
import pytest

from nasutil.cli.search_command import main
from nasutil.errors import NasutilError

FAST = ["predictor=analytical", "plots=false", "progress=false"]


def rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def test_default_run_writes_every_output_and_prunes_before_training(tmp_path):
    """The built-in default (only the trial count lowered), as a user runs it: a subprocess."""
    run_dir = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "nasutil.search", "n_trials=40", f"hydra.run.dir={run_dir}"],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    for name in ("trials.csv", "pareto.csv", "study.db", "pareto.png", "utilization_hist.png", "study.html",
                 "summary.json"):
        assert (run_dir / name).is_file(), name
    assert not (run_dir / "population.png").exists()  # no population trained: nothing to draw
    trials = rows(run_dir / "trials.csv")
    assert len(trials) == 40
    pruned = [t for t in trials if t["prune_stage"] == "before_training"]
    trained = [t for t in trials if t["outcome"] == "trained"]
    assert pruned and trained, "the default policy should prune some trials and train others"
    # TPE by default: a pruned trial is told to the sampler as PRUNED, and is a pruned one in the tables
    # (no accuracy, no feasibility, no training).
    assert all(t["outcome"] == "pruned_before_training" and t["state"] == "PRUNED" and t["prune_reason"]
               and t["training_epochs"] == "0" and t["accuracy"] == "" and t["feasible"] == "" for t in pruned)
    assert all(t["state"] == "COMPLETE" and t["generation"] == "" for t in trained)  # no generations in TPE
    for t in trials:  # every trial carries its arch, predictions, FLOPs and params
        assert t["arch"].startswith("|") and float(t["predicted_throughput_per_s"]) > 0
        assert float(t["predicted_utilization"]) > 0 and int(t["flops_per_image"]) > 0 and int(t["params"]) > 0
        assert t["prediction_validated"] == "True"  # the shipped profile was validated on nb201
    assert all(0 < float(t["accuracy"]) <= 100 for t in trained)
    front = rows(run_dir / "pareto.csv")
    assert front and {f["number"] for f in front} <= {t["number"] for t in trained}
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["counts"]["pruned_before"] == len(pruned) and summary["counts"]["trained"] == len(trained)
    import torch  # where the hardware figures came from: measured on a GPU by default, else predicted

    assert summary["hardware"].startswith("evaluator on cuda" if torch.cuda.is_available() else "predicted")
    assert "Pareto front" in proc.stdout and str(run_dir) in proc.stdout
    assert "pruned before training" in proc.stdout
    study = optuna.load_study(study_name=summary["study_name"], storage=f"sqlite:///{run_dir / 'study.db'}")
    assert len(study.trials) == 40 and study.user_attrs["metrics"] == ["accuracy", "throughput"]


@pytest.mark.parametrize("anchors", [0, 2])
def test_the_summary_says_where_the_wall_time_went(tmp_path, anchors):
    """A short search's wall time is more than its trials: building it (the anchors' short search among it),
    running (closing what it held among it), and the report, each in summary.json's `phases_s`."""
    assert main([*FAST, "n_trials=6", f"anchors={anchors}", f"hydra.run.dir={tmp_path}"]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    phases = summary["phases_s"]
    assert set(phases) == {"build_s", "anchors_s", "run_s", "close_s", "report_s"}
    assert (phases["anchors_s"] > 0) == bool(anchors) and phases["anchors_s"] <= phases["build_s"]
    assert 0 <= phases["close_s"] <= phases["run_s"]
    assert 0 < phases["build_s"] + phases["run_s"] <= summary["wall_s"] + 0.01
    assert summary["measuring_activity"] is None  # predicted figures: nothing was measured


def _one_line_exit_2(capsys, *args: str) -> str:
    assert main(list(args)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("nasutil-search: error: ") and "\n" not in err and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("args, message", [
    (["sampler=simulated_annealing"], "Could not find 'sampler/simulated_annealing' (available options in 'sampler': "
                                      "gp, nsga2, nsga3, random, tpe)"),
    (["search_space=my_plugin_space"], ("(available options in 'search_space': cell, darts, mbconv, nb101, nb201, "
                                        "nni); search_space=NAME takes a shipped or registered space (a plugin's "
                                        "once its package is installed: `nasutil spaces` lists them); a cell file is "
                                        "chosen by name: search_space.name=cell:FILE.yaml")),
    (["search_space=cell:spaces/small.yaml"], ("search_space=cell:spaces/small.yaml: a space with an option (a cell "
                                               "file) is chosen by name, not as an option of the search_space group: "
                                               "search_space.name=cell:spaces/small.yaml")),
    (["n_trials=-3"], "n_trials must be a positive integer, got -3"),
    (["n_trials=ten"], "n_trials must be a positive integer"),
    (["no_such_key=1"], "no_such_key"),
    (["objectives.metrics=[accuracy,speed]"], "unknown objective 'speed'"),
    (["trainer._target_=collections.OrderedDict"], "made a OrderedDict, not a nasutil.search.trainers.Trainer"),
    (["+n_trails=5"], ("+n_trails=5: nasutil-search has no setting 'n_trails', did you mean n_trials? (a '+' override "
                       "adds a key that nothing reads, so the search would run without it)")),
    (["+zzzz=5"], ("+zzzz=5: nasutil-search has no setting 'zzzz' (a '+' override adds a key that nothing reads, so "
                   "the search would run without it)")),
    (["timeout_s=nan"], "timeout_s must be positive or null, got nan"),
    (["evaluator.timeout_s=nan"], "evaluator.timeout_s must be a number, got nan"),
    (["prune.band=nan"], "prune.band must be a number, got nan"),  # every comparison false: pruning was off
    (["sampler=nsga2", "sampler.population_size=nan"], "sampler.population_size must be a number, got nan"),
    (["sampler.n_startup_trials=2.5"], "sampler.n_startup_trials must be a whole number, got 2.5"),
    (["trainer=torch", "trainer.epochs=1.5"], "trainer.epochs must be a whole number, got 1.5"),
    (["prune=utilization_threshold", "prune.threshold=true"], "prune.threshold must be a number, got True"),
    (["prune.margin=false"], "prune.margin must be a number, got False"),  # true read as 1.0: pruned everything
    (["target.batch_size=2.5"], "target.batch_size must be a whole number from 1 to 65536, got 2.5"),
    (["target.batch_size=100000000"], "target.batch_size must be a whole number from 1 to 65536"),
    (["trainer=torch", "trainer.dataset=cifar10", "trainer.data_dir=/nonexistent/data"], "dataset cifar10 not found"),
    (["search_space=darts"], "nb201 only"),
    (["pruned_as=skip"], "pruned_as must be one of auto, pruned, infeasible, predicted, got 'skip'"),
    (["max_trainings=0"], "max_trainings must be a whole number >= 1 or null, got 0"),
    (["max_trainings=2.5"], "max_trainings must be a whole number >= 1 or null, got 2.5"),
    (["objectives.min_accuracy=abc"], "objectives.min_accuracy must be a number or null, got 'abc'"),
    (["objectives.min_accuracy=150"], "percentage in [0, 100]"),
    (["objectives.latency_slo_ms=nan"], "objectives.latency_slo_ms must be a finite number"),
    (["trainer=torch", "trainer.lr=inf"], "trainer.lr must be a finite number, got inf"),
    (["trainer=torch", "trainer.lr=nan"], "trainer.lr must be a number, got nan"),
    (["trainer=torch", "trainer.memory_budget_gb=nan"], "trainer.memory_budget_gb must be a number, got nan"),
    (["trainer=torch", "trainer.memory_budget_gb=inf"], ("trainer.memory_budget_gb must be a positive number, auto "
                                                         "or null, got inf")),
    (["objectives.metrics=accuracy"], "objectives.metrics must be a list, e.g. [accuracy,throughput], got 'accuracy'"),
    (["trainer.fidelities=200"], "trainer.fidelities must be an increasing subset of [12, 200], got 200"),
    (["verbose=maybe"], "verbose must be true or false, got 'maybe'"),  # progress and plots: as verbose
    (["prune.fidelity=rung"], "prune.fidelity=rung judges candidates at halving's first rung, and with no halving "
                              "there is none"),
    (["trainer=torch", "trainer.channels_last=maybe"], "trainer.channels_last must be true or false, got 'maybe'"),
    (["evaluator=cpu"], "nasutil ships no predictor for a CPU (profile build times ops on CUDA): use evaluator=none"),
    (["trainer=torch", "halving=pareto", "halving.inform_sampler=1"], "halving.inform_sampler must be true or false"),
    (["trainer=torch", "trainer.batch_size=100000"], "trainer.batch_size 100000 is larger than the 1293 training"),
    (["trainer=torch", "trainer.valid_fraction=0.9999"], "larger than the 0 training images"),
    (["trainer=torch", "trainer.threads=-1"], "trainer.threads must be a whole number from 1 to"),
    (["trainer=torch", "trainer.momentum=-0.5"], "trainer.momentum and trainer.weight_decay must be >= 0"),
    (["early_stopping=hyperband", "early_stopping.reduction_factor=0"],
     "HyperbandPruner cannot run with early_stopping.min_resource=1, early_stopping.max_resource=auto, "
     "early_stopping.reduction_factor=0 ("),
    (["early_stopping=hyperband", "early_stopping.min_resource=0"],  # the line once named no setting
     "HyperbandPruner cannot run with early_stopping.min_resource=0, early_stopping.max_resource=auto, "
     "early_stopping.reduction_factor=3 ("),
    (["early_stopping=median", "early_stopping.n_startup_trials=-1"], "cannot create early_stopping 'median'"),
    # nested past Hydra's parser's recursion: a traceback of 2,750 lines
    (["seed=" + "[" * 300 + "]" * 300], "the setting 'seed' nests brackets 300 levels deep, deeper than the 32"),
    (["search_space=cell", "search_space.settings.merge=" + "[" * 300 + "]" * 300],
     "the setting 'search_space.settings.merge' nests brackets 300 levels deep"),
    (["search_space=cell", "search_space.settings.merge=" + "[" * 32 + "]" * 32],
     "inline cell space settings nest 33 levels deep"),
    (["search_space=cell", "search_space.settings.channels=4096", "search_space.settings.input_size=1024",
      "search_space.settings.stages=1", "search_space.settings.nodes=1", "search_space.settings.cells_per_stage=1"],
     "channels 4096 at 1024x1024 (input_size) make feature maps of 4.3e+09 values"),
])
def test_bad_configs_end_with_one_line_and_exit_2(tmp_path, capsys, args, message):
    err = _one_line_exit_2(capsys, *args, f"hydra.run.dir={tmp_path}", *FAST)
    assert message in err
    assert "search path" not in err and "provider=" not in err  # Hydra's own search path is not an option


@pytest.mark.parametrize("args, message", [
    (["+objectives.metircs=[accuracy]"], "objectives: unknown setting 'metircs', did you mean objectives.metrics? (known: "
                                         "latency_slo_ms, metrics, min_accuracy, name, scored_on)"),
    (["+objectives.scored=measured"], "objectives: unknown setting 'scored', did you mean objectives.scored_on?"),
    (["+target.batchsize=64"], "target: unknown setting 'batchsize', did you mean target.batch_size? (known: batch_size, "
                               "device, dtype, mode)"),
    (["+search_space.setings.nodes=4"], "search_space: unknown setting 'setings', did you mean search_space.settings?"),
    (["+halving.reduction_factor=2"], "halving=none is off and reads no reduction_factor: choose an option that "
                                      "takes it (halving=accuracy, halving=pareto), or a class of your own with "
                                      "+halving._target_=..."),
    (["+early_stopping.n_startup_trials=3"], "early_stopping=none is off and reads no n_startup_trials: choose an "
                                             "option that takes it (early_stopping=hyperband, early_stopping=median"),
])
def test_a_key_that_nasutil_reads_no_setting_of_is_refused_not_ignored(tmp_path, capsys, args, message):
    """`+group.key=value` is how Hydra's own hint answers a misspelt key; in a group whose settings nasutil reads
    itself (not a class's arguments, which the class names) the search once ran with the key ignored."""
    err = _one_line_exit_2(capsys, *args, f"hydra.run.dir={tmp_path}", *FAST)
    assert message in err, err
    assert not (tmp_path / "study.db").exists()  # refused before any study


def test_a_class_of_ones_own_given_to_an_optional_part_that_is_off_is_used(tmp_path, capsys):
    """`+halving._target_=...` and `+early_stopping._target_=...` over the default `none` options were ignored."""
    args = [f"hydra.run.dir={tmp_path}", "n_trials=3", "study_name=own", "prune=none", *FAST]
    err = _one_line_exit_2(capsys, *args, "+halving._target_=collections.OrderedDict")
    assert "halving._target_ made a OrderedDict, not a nasutil.search.halving.Halving" in err  # made, so checked
    assert main([*args, "+early_stopping._target_=optuna.pruners.MedianPruner",
                 "+early_stopping.n_startup_trials=1"]) == 0
    assert json.loads((tmp_path / "summary.json").read_text())["pruner"] == "MedianPruner"


def test_a_key_added_from_python_that_nothing_reads_is_refused():
    from nasutil.search.build import build_search
    from nasutil.search.config import compose

    with pytest.raises(NasutilError, match="has no setting 'n_trails', did you mean n_trials\\? \\(a '\\+' override"):
        compose(["+n_trails=5"])
    with pytest.raises(NasutilError, match="objectives: unknown setting 'metircs'"):
        build_search(compose(["+objectives.metircs=[accuracy]", "storage=url", "storage.url=sqlite://"]), "unused")


def test_unreachable_storage_is_one_line_and_exit_2(tmp_path, capsys):
    err = _one_line_exit_2(capsys, "storage=url", f"storage.url=sqlite:///{tmp_path}/missing/dir/study.db",
                           f"hydra.run.dir={tmp_path}", *FAST)
    assert "cannot open study storage sqlite:///" in err
    err = _one_line_exit_2(capsys, "storage=url", "storage.url=postgresql://user:secret@127.0.0.1:9/db",
                           f"hydra.run.dir={tmp_path}", *FAST)
    assert "cannot open study storage postgresql://user:***@127.0.0.1:9/db" in err and "secret" not in err


def test_another_programs_sqlite_file_is_left_as_it_is(tmp_path, capsys):
    """Optuna added its tables to any SQLite file it was given; a measurement cache did the same."""
    import sqlite3

    from nasutil.evaluator.cache import MeasurementCache

    other = tmp_path / "notes.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE notes (text)")
    before = other.read_bytes()
    err = _one_line_exit_2(capsys, "storage=url", f"storage.url=sqlite:///{other}", f"hydra.run.dir={tmp_path}/run",
                           *FAST)
    assert "is another program's SQLite database (tables notes)" in err
    with pytest.raises(NasutilError, match="another program's SQLite database"):
        MeasurementCache(other)
    text = tmp_path / "notes.txt"
    text.write_text("not a database")
    with pytest.raises(NasutilError, match="is not an SQLite database"):
        MeasurementCache(text)
    assert other.read_bytes() == before and text.read_text() == "not a database"
    MeasurementCache(tmp_path / "empty.db").close()  # new files and nasutil's own are opened as before
    MeasurementCache(tmp_path / "empty.db").close()


def test_bad_flags_and_run_folders_end_with_one_line_and_exit_2(tmp_path, capsys):
    """Hydra's own parser would print its whole usage first; a run folder that cannot be made is a path
    the user gave, not a bug."""
    err = _one_line_exit_2(capsys, "--n-trials", "5")
    assert "unrecognized arguments: --n-trials" in err and "key=value, e.g. n_trials=20" in err
    err = _one_line_exit_2(capsys, "--cfg", "bogus")
    assert "invalid choice: 'bogus'" in err
    blocker = tmp_path / "a-file"
    blocker.write_text("kept")
    err = _one_line_exit_2(capsys, f"hydra.run.dir={blocker / 'run'}", *FAST)
    assert f"cannot use '{blocker / 'run'}'" in err and blocker.read_text() == "kept"


def test_console_script_reports_a_bad_option_in_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "nasutil.search", "prune=sometimes", f"hydra.run.dir={tmp_path}"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "Could not find 'prune/sometimes'" in proc.stderr


def test_a_study_with_other_objectives_is_not_mixed_in(tmp_path, capsys):
    args = [f"hydra.run.dir={tmp_path}", "study_name=s", "n_trials=3", *FAST]
    assert main(args) == 0
    err = _one_line_exit_2(capsys, *args, "objectives=accuracy_latency")
    assert "optimises ['accuracy', 'throughput'], not ['accuracy', 'latency']" in err


def test_multirun_sweeps_write_one_study_per_job(tmp_path):
    sweep = tmp_path / "sweep"
    assert main(["-m", "seed=0,1", "prune=none,utilization_threshold", "n_trials=6", f"hydra.sweep.dir={sweep}",
                 *FAST]) == 0
    jobs = sorted(p.parent for p in sweep.glob("*/*/summary.json"))
    assert len(jobs) == 4
    summaries = [json.loads((j / "summary.json").read_text()) for j in jobs]
    assert sorted((s["seed"], s["prune"].split(" ")[0]) for s in summaries) == [
        (0, "none"), (0, "utilization_threshold"), (1, "none"), (1, "utilization_threshold")]
    assert all(len(rows(j / "trials.csv")) == 6 for j in jobs)
    assert len({s["study_name"] for s in summaries}) == 4  # the default name differs per job, as do the folders
    assert main(["-m", "seed=0,1", "prune=none,utilization_threshold", "n_trials=8", f"hydra.sweep.dir={sweep}",
                 *FAST]) == 0  # the same sweep, a larger budget: every job resumes its study in its folder
    assert sorted(p.parent for p in sweep.glob("*/*/summary.json")) == jobs
    assert all(len(rows(j / "trials.csv")) == 8 for j in jobs)
    table = rows(sweep / "sweep_summary.csv")  # the sweep's jobs side by side, written as it ended
    assert sorted(r["folder"] for r in table) == sorted(str(j) for j in jobs)
    for r in table:
        assert r["finished"] == "8" and r["settings"].startswith("seed=") and " prune=" in r["settings"]
        assert "n_trials" not in r["settings"]  # shared by every job: it tells none apart
        assert 0 < float(r["hypervolume"]) <= 1 and int(r["front"]) >= 1 and float(r["best_accuracy"]) > 0


def test_a_sweep_jobs_resume_hint_resumes_it(tmp_path, capsys):
    """A sweep job once said "re-run the same command, or with study_name=NAME, to resume"; its settings run
    with that name alone started a new study in outputs/. It now names the sweep, or the job's folder."""
    sweep = tmp_path / "sweep"
    assert main(["-m", "seed=3", "n_trials=3", f"hydra.sweep.dir={sweep}", *FAST]) == 0
    [job] = [p.parent for p in sweep.glob("*/*/summary.json")]
    said = " ".join(capsys.readouterr().out.split())
    assert (f"re-run the same sweep to resume every job; this one alone: its settings without -m, with "
            f"hydra.run.dir={job})") in said
    assert main(["seed=3", "n_trials=5", f"hydra.run.dir={job}", *FAST]) == 0
    summary = json.loads((job / "summary.json").read_text())
    assert summary["resumed"] and summary["counts"]["finished"] == 5


def test_a_sweep_summary_leaves_out_jobs_of_earlier_sweeps(tmp_path):
    from nasutil.search.sweep_summary import sweep_rows

    sweep = tmp_path / "sweep"
    assert main(["-m", "seed=0,1", "n_trials=3", f"hydra.sweep.dir={sweep}", *FAST]) == 0
    import time

    began = time.time() + 1.0
    time.sleep(1.5)
    assert main(["-m", "seed=2", "n_trials=3", f"hydra.sweep.dir={sweep}", *FAST]) == 0
    assert len(sweep_rows(sweep)) == 3
    [only] = sweep_rows(sweep, since=began)
    assert "seed=2" in only["settings"]
    [written] = rows(sweep / "sweep_summary.csv")
    assert written["settings"].split()[:2] == ["seed=2", "n_trials=3"]


def test_a_failed_job_has_its_row_in_the_sweep_summary_and_each_sweep_keeps_its_own(tmp_path, capsys):
    """A job that failed before it had a study was missing from the comparison ("1 job" of two), and a later
    sweep into the same folder replaced the earlier one's table."""
    import time

    sweep = tmp_path / "sweep"
    assert main(["-m", "prune.band=0.05,nan", "n_trials=3", f"hydra.sweep.dir={sweep}", *FAST]) == 2
    said = capsys.readouterr()
    assert "sweep summary: 2 jobs, 1 failed" in said.out
    table = rows(sweep / "sweep_summary.csv")
    [failed] = [r for r in table if r["error"]]
    assert failed["settings"] == "prune.band=nan" and "prune.band must be a number, got nan" in failed["error"]
    assert [r["settings"] for r in table if not r["error"]] == ["prune.band=0.05"]
    time.sleep(1.1)  # the kept tables are named by the second a sweep began
    assert main(["-m", "seed=4", "n_trials=3", f"hydra.sweep.dir={sweep}", *FAST]) == 0
    kept = sorted(sweep.glob("sweep_summary_*.csv"))
    assert len(kept) == 2 and any(r["error"] for r in rows(kept[0])) and len(rows(kept[1])) == 1


def test_a_budget_of_only_start_up_trials_is_called_a_random_search(tmp_path, capsys):
    assert main(["n_trials=4", f"hydra.run.dir={tmp_path}/short", *FAST]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "sampler tpe (all 4 trials are its random start-up trials, sampler.n_startup_trials=10: a random search)" \
        in said
    assert main(["n_trials=11", f"hydra.run.dir={tmp_path}/long", *FAST]) == 0
    assert "start-up trials" not in capsys.readouterr().out


def test_constraint_and_other_samplers(tmp_path):
    for sampler in ("tpe", "random", "nsga3"):
        run = tmp_path / sampler
        assert main([f"sampler={sampler}", "objectives=accuracy_throughput_slo", "objectives.latency_slo_ms=1.9",
                     "n_trials=12", "prune=latency_slo", f"hydra.run.dir={run}", *FAST]) == 0
        trials = rows(run / "trials.csv")
        assert len(trials) == 12
        for t in trials:  # the SLO policy prunes exactly the candidates predicted to miss 1.9 ms
            slow = float(t["predicted_latency_ms"]) > 1.9
            assert (t["prune_stage"] == "before_training") == slow
            if t["outcome"] == "trained":
                assert t["feasible"] == "True"
        expected = "predicted" if sampler == "nsga3" else "pruned"  # latency_slo has no estimate: infeasible
        assert json.loads((run / "summary.json").read_text())["pruned_as"] == expected
        pruned_states = {t["state"] for t in trials if t["outcome"] == "pruned_before_training"}
        assert pruned_states <= ({"COMPLETE"} if sampler == "nsga3" else {"PRUNED"})
        assert all(f["outcome"] == "trained" for f in rows(run / "pareto.csv"))


def test_a_crashing_trial_is_failed_with_its_reason_and_the_search_goes_on(tmp_path):
    from nasutil.search.build import predictor_for
    from nasutil.search.config import compose, shipped
    from nasutil.search.controller import Search
    from nasutil.search.objectives import Objectives
    from nasutil.search.trainers.tabular import TabularTrainer

    class Flaky(TabularTrainer):
        def train(self, space, arch_text, reporter, trial_number=0):
            if trial_number % 3 == 1:
                raise RuntimeError("simulated crash in training")
            return super().train(space, arch_text, reporter, trial_number)

    study = optuna.create_study(directions=["maximize", "maximize"], storage=f"sqlite:///{tmp_path}/s.db",
                                sampler=optuna.samplers.RandomSampler(seed=0))
    predictor, target = predictor_for(compose(["predictor=analytical"]))
    search = Search(study, "nb201", predictor, target, shipped("prune", "none"), Flaky(),
                    Objectives.from_config({"metrics": ["accuracy", "throughput"]}))
    counts = search.run(9)
    failed = [t for t in study.trials if t.state == optuna.trial.TrialState.FAIL]
    assert counts.finished == 9 and counts.failed == len(failed) >= 3
    assert all(t.user_attrs["fail_reason"] == "RuntimeError: simulated crash in training" for t in failed)
    assert all("predicted_throughput_per_s" in t.user_attrs for t in failed)  # what was learned is kept


@pytest.mark.parametrize("name", ["../../escape", "a/b", ".hidden", "'~home'", "..", "x\\y"])
def test_a_study_name_never_puts_the_run_folder_outside_the_output_root(tmp_path, name):
    """The run folder is outputs/<study_name>: a name that is a path elsewhere is refused before Hydra
    makes any folder."""
    proc = subprocess.run([sys.executable, "-m", "nasutil.search", f"study_name={name}", *FAST], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "cannot name a run folder" in proc.stderr, proc.stderr[-500:]
    assert len(proc.stderr.strip().splitlines()) == 1
    made = [p for p in tmp_path.parent.iterdir() if p.name == "escape"] + list(tmp_path.rglob("*"))
    assert made == [], made


def test_a_budget_of_trainings_stops_the_search_and_a_larger_one_resumes_it(tmp_path):
    """Trials pruned before training cost nothing and do not count against max_trainings."""
    import optuna

    from nasutil.search.record import Counts

    args = ["study_name=budget", f"hydra.run.dir={tmp_path}", "n_trials=200", "plots=false", "progress=false"]
    assert main([*args, "max_trainings=14"]) == 0
    study = optuna.load_study(study_name="budget", storage=f"sqlite:///{tmp_path / 'study.db'}")
    first = Counts.of(study.trials)
    assert first.trainings == 14 and first.pruned_before > 0 and first.finished < 200
    assert main([*args, "max_trainings=18"]) == 0
    again = Counts.of(optuna.load_study(study_name="budget", storage=f"sqlite:///{tmp_path / 'study.db'}").trials)
    assert again.trainings == 18 and again.finished > first.finished


PLUGIN_SEARCH = ["trainer=torch", "trainer.epochs=1", "trainer.max_batches_per_epoch=1", "evaluator=none",
                 "predictor=analytical", "plots=false", "progress=false"]


def test_a_plugins_space_is_an_option_of_the_search_space_group(tmp_path, capsys, installed_plugin):
    """`search_space=tiny` was refused ("could not find 'search_space/tiny'") for an installed plugin's
    space, which only `search_space.name=tiny` reached; both now choose it, and name one study."""
    assert main(["search_space=tiny", "n_trials=2", f"hydra.run.dir={tmp_path}", *PLUGIN_SEARCH]) == 0
    trials = rows(tmp_path / "trials.csv")
    assert len(trials) == 2 and all(t["arch"] in ("w8", "w16", "w32") and t["state"] == "COMPLETE" for t in trials)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["study_name"].startswith("tiny-") and summary["counts"]["trained"] == 2
    assert main(["search_space.name=tiny", "n_trials=3", f"hydra.run.dir={tmp_path}", *PLUGIN_SEARCH]) == 0
    assert json.loads((tmp_path / "summary.json").read_text())["study_name"] == summary["study_name"]
    assert len(rows(tmp_path / "trials.csv")) == 3  # the same study, resumed
    capsys.readouterr()


def test_a_space_registered_at_run_time_is_an_option_until_it_is_unregistered(tmp_path):
    """The options stored for registered spaces follow the registry: one taken back is no option."""
    from test_plugins import ProbeSpace

    from nasutil.registry import register, unregister
    from nasutil.search.config import compose

    register(ProbeSpace)
    assert compose(["search_space=probe_space"]).search_space.name == "probe_space"
    unregister("probe_space")
    with pytest.raises(NasutilError, match="Could not find 'search_space/probe_space'"):
        compose(["search_space=probe_space"])


def test_a_search_on_unvalidated_predictions_says_so(tmp_path, capsys):
    """darts was never measured eagerly: its eager predictions are unvalidated, and a search that prunes
    on them says so in its summary, as `nasutil predict` does."""
    assert main(["search_space=darts", "trainer=torch", "trainer.epochs=1", "trainer.max_batches_per_epoch=1",
                 "n_trials=1", "evaluator=none", "target.mode=eager", "plots=false", "progress=false",
                 f"hydra.run.dir={tmp_path}"]) == 0
    out = capsys.readouterr().out
    assert "warning: 1 of 1 candidates were predicted by a model never validated for them" in out
    assert json.loads((tmp_path / "summary.json").read_text())["counts"]["unvalidated_predictions"] == 1
    assert main(["plots=false", "progress=false", "n_trials=3", f"hydra.run.dir={tmp_path / 'validated'}"]) == 0
    assert "never validated" not in capsys.readouterr().out
    assert json.loads((tmp_path / "validated" / "summary.json").read_text())["counts"]["unvalidated_predictions"] == 0


def test_the_summaries_count_unvalidated_predictions(tmp_path, capsys):
    """summary.json and the sweep summary said nothing of predictions never validated (only the closing
    report's warning and trials.csv did), so a sweep's jobs compared on them looked alike."""
    sweep = tmp_path / "sweep"
    assert main(["-m", "predictor=h200,analytical", "n_trials=3", "plots=false", "progress=false",
                 f"hydra.sweep.dir={sweep}"]) == 0
    table = {r["settings"]: r for r in rows(sweep / "sweep_summary.csv")}
    assert table["predictor=analytical"]["unvalidated_predictions"] == "3"  # no profile: never validated
    assert table["predictor=h200"]["unvalidated_predictions"] == "0"
    for r in table.values():
        counts = json.loads((Path(r["folder"]) / "summary.json").read_text())["counts"]
        assert str(counts["unvalidated_predictions"]) == r["unvalidated_predictions"]
    assert "unvalidated_predictions" in capsys.readouterr().out  # the printed table has the column too


def test_the_progress_bar_counts_as_the_summary_does(tmp_path, capsys):
    """The bar said "49 trained" where the summary said 13 trained and 36 stopped early: it counted every
    candidate that cost a training as trained."""
    import re

    assert main(["trainer.dataset=imagenet16_120", "early_stopping=hyperband", "n_trials=40", "plots=false",
                 "progress=true", f"hydra.run.dir={tmp_path}"]) == 0
    err = capsys.readouterr().err
    counts = json.loads((tmp_path / "summary.json").read_text())["counts"]
    bars = re.findall(r"(\d+) trained, (\d+) stopped early, (\d+) pruned, (\d+) failed", err)
    assert bars, err[-1500:]
    trained, stopped, pruned, failed = map(int, bars[-1])
    assert stopped > 0  # hyperband stopped some
    assert (trained, stopped, pruned, failed) == (counts["trained"], counts["stopped_early"],
                                                 counts["pruned_before"], counts["failed"]), counts


def test_the_summary_names_the_early_stopping_group_and_lists_summary_json(tmp_path, capsys):
    """The summary said "pruner MedianPruner" after the group was renamed early_stopping, and its list of
    result files left out summary.json."""
    assert main(["early_stopping=median", "n_trials=3", f"hydra.run.dir={tmp_path}", *FAST]) == 0
    out = capsys.readouterr().out
    assert "; early_stopping MedianPruner" in " ".join(out.split()) and "; pruner " not in out
    listed = out.split("results: ")[1].split("storage: ")[0].split()
    assert "summary.json" in listed and (tmp_path / "summary.json").is_file()


def test_a_refused_run_leaves_no_folder_behind_and_a_refused_resume_keeps_the_study(tmp_path, capsys, monkeypatch):
    """Hydra writes its config files before the job can refuse its settings; a refused run removes them (and
    the folders Hydra made under the launch folder), but never a folder that holds a study."""
    monkeypatch.chdir(tmp_path)
    _one_line_exit_2(capsys, "n_trials=-1", *FAST)
    _one_line_exit_2(capsys, "n_trials=0", "hydra.run.dir=runs/a/b", *FAST)
    assert list(tmp_path.iterdir()) == []
    assert main(["hydra.run.dir=kept", "n_trials=2", "study_name=s", *FAST]) == 0
    kept = tmp_path / "kept"
    before = {p.name for p in kept.iterdir()} - {"study.db-wal", "study.db-shm"}  # SQLite's, come and go
    _one_line_exit_2(capsys, "hydra.run.dir=kept", "n_trials=-2", "study_name=s", *FAST)
    assert {p.name for p in kept.iterdir()} - {"study.db-wal", "study.db-shm"} == before
    assert {"study.db", "trials.csv", ".hydra"} <= before
    trials = optuna.load_study(study_name="s", storage=f"sqlite:///{kept}/study.db").trials
    assert len(trials) == 2 and len(rows(kept / "trials.csv")) == 2


def test_a_table_that_cannot_be_written_is_named_and_leaves_no_temporary_file(tmp_path, capsys):
    args = [f"hydra.run.dir={tmp_path}", "study_name=t", *FAST]
    assert main([*args, "n_trials=2"]) == 0
    (tmp_path / "trials.csv").unlink()
    (tmp_path / "trials.csv").mkdir()  # where the table goes, a folder
    err = _one_line_exit_2(capsys, *args, "n_trials=3")
    assert f"cannot write '{tmp_path / 'trials.csv'}'" in err
    assert not list(tmp_path.glob("*.tmp")) and (tmp_path / "study.db").is_file()


@pytest.mark.parametrize("n_trials", [1, 2])
def test_a_search_whose_every_trial_fails_is_an_error_whatever_its_budget(tmp_path, capsys, n_trials):
    """A budget below the failure streak (5) once ended with exit 0 and nothing finished: the attempts ran
    out before the streak was reached."""
    from nasutil.cli import main as nasutil_main

    table = tmp_path / "one_cell.csv"  # a prediction table that holds one cell: the others' trials fail
    cell = "|skip_connect~0|+|none~0|none~1|+|none~0|none~1|none~2|"
    assert nasutil_main(["predict", "nb201", cell, "--table", str(table)]) == 0
    capsys.readouterr()
    code = main([f"hydra.run.dir={tmp_path / 'run'}", f"n_trials={n_trials}", "predictor=table",
                 f"predictor.path={table}", "plots=false", "progress=false"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith(f"nasutil-search: error: all {2 * n_trials} trials of this run failed"), err


def test_a_storage_that_cannot_be_written_is_one_line_and_keeps_what_it_holds(tmp_path, capsys):
    """A read-only study database (here opened read-only by its URL; a full disk fails the same way) once
    ended in a 136-line traceback from inside Optuna."""
    first = tmp_path / "first"
    assert main([f"hydra.run.dir={first}", "n_trials=2", "study_name=kept", "plots=false", "progress=false"]) == 0
    capsys.readouterr()
    url = f"sqlite:///file:{first / 'study.db'}?mode=ro&uri=true"
    assert main([f"hydra.run.dir={tmp_path / 'again'}", "n_trials=4", "study_name=kept", "plots=false",
                 "progress=false", "storage=url", f"storage.url='{url}'"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["nasutil-search: error: cannot write the study storage: attempt to write a readonly database "
                   "(the trials stored before stay)"], err
    study = optuna.load_study(study_name="kept", storage=f"sqlite:///{first / 'study.db'}")
    assert len(study.trials) == 2


WRITES = (sqlite3.SQLITE_DELETE, sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE)  # as SQLite's authorizer names them


@contextlib.contextmanager
def refused_once_five_complete(database: Path, refused: Callable[[int, str | None], bool]) -> Iterator[None]:
    """The study database at `database` refuses what `refused(action, table)` says once five trials have finished
    (SQLite's authorizer denies it, as a database whose grants were revoked does; a full disk or a server gone
    fails the same way)."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    refusing: list[bool] = []

    def authorize(action: int, table: str | None, *_names) -> int:
        return sqlite3.SQLITE_DENY if refused(action, table) else sqlite3.SQLITE_OK

    def on_begin(connection) -> None:
        raw = connection.connection.dbapi_connection
        if not isinstance(raw, sqlite3.Connection) or str(connection.engine.url.database) != str(database):
            return
        if not refusing and raw.execute("SELECT count(*) FROM sqlite_master WHERE name = 'trials'").fetchone()[0]:
            if raw.execute("SELECT count(*) FROM trials WHERE state = 'COMPLETE'").fetchone()[0] >= 5:
                refusing.append(True)
        if refusing:
            raw.set_authorizer(authorize)

    event.listen(Engine, "begin", on_begin)
    try:
        yield
    finally:
        event.remove(Engine, "begin", on_begin)


def _stopped(reason: str, after: str) -> list[str]:
    return [f"nasutil-search: error: the study storage stopped working during the search: {reason} (the trials "
            f"stored before stay{after})"]


LISTED = ", and the run folder's tables list them; re-run to resume once it works"


@pytest.mark.parametrize("refused", [
    lambda action, table: action in WRITES,  # every write: the trials running then fail to end too
    lambda action, table: action == sqlite3.SQLITE_INSERT and table == "trials",  # new trials: running ones end
], ids=["every-write", "new-trials"])
def test_a_storage_that_stops_accepting_writes_mid_search_is_one_line_and_the_tables_list_what_it_stored(
        tmp_path, capsys, monkeypatch, refused):
    """Four trials at once on a study database that refuses writes once five trials have finished. A trial thread
    that could not ask died with the storage's error, printing its traceback, and the run ended with exit 0 and
    fewer trials than asked; then it ended in one line, but with no tables in the run folder."""
    from nasutil.search.trainers.tabular import TabularTrainer

    monkeypatch.setattr(TabularTrainer, "concurrent_trials", 4)
    database = tmp_path / "study.db"
    with refused_once_five_complete(database, refused):
        code = main([f"hydra.run.dir={tmp_path}", "n_trials=30", "study_name=s", "prune=none", *FAST])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == _stopped("not authorized", LISTED), err
    trials = optuna.load_study(study_name="s", storage=f"sqlite:///{database}").trials
    complete = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(complete) >= 5 and len(trials) < 30
    assert all(t.user_attrs.get("accuracy") is not None for t in complete)
    table = rows(tmp_path / "trials.csv")
    assert [(int(r["number"]), r["state"]) for r in table] == [(t.number, t.state.name) for t in trials]
    front = {int(r["number"]) for r in rows(tmp_path / "pareto.csv")}
    assert front and front <= {t.number for t in complete}
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["counts"]["finished"] == len(complete) and summary["storage_error"] == "not authorized"


def test_a_storage_that_stops_mid_search_keeps_earlier_tables_where_it_cannot_be_read_back(tmp_path, capsys):
    """Reads refused too: the tables of the run before stay as they were, and the line says the re-run writes
    them."""
    args = [f"hydra.run.dir={tmp_path}", "study_name=s", "prune=none", *FAST]
    assert main([*args, "n_trials=2"]) == 0
    earlier = (tmp_path / "trials.csv").read_text()
    capsys.readouterr()
    with refused_once_five_complete(tmp_path / "study.db", lambda action, table: True):
        code = main([*args, "n_trials=30"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].endswith(
        "(the trials stored before stay; the study cannot be read back to write the run folder's tables: re-run to "
        "resume once it works, which writes them)"), err
    assert (tmp_path / "trials.csv").read_text() == earlier
    trials = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'study.db'}").trials
    assert len([t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]) >= 5
    assert main([*args, "n_trials=8"]) == 0  # the re-run writes them
    trials = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'study.db'}").trials
    assert [int(r["number"]) for r in rows(tmp_path / "trials.csv")] == [t.number for t in trials]


def test_a_storage_that_stops_mid_search_says_so_first_where_the_tables_cannot_be_written(tmp_path, capsys):
    (tmp_path / "trials.csv").mkdir(parents=True)  # where the table goes, a folder
    with refused_once_five_complete(tmp_path / "study.db", lambda action, table: action in WRITES):
        code = main([f"hydra.run.dir={tmp_path}", "n_trials=30", "study_name=s", "prune=none", *FAST])
    err = capsys.readouterr().err.strip().splitlines()
    table = tmp_path / "trials.csv"
    assert code == 2 and err == _stopped(
        "not authorized", f"; the run folder's tables were not written (cannot write {str(table)!r}: Is a directory): "
                          f"re-run to resume once it works, which writes them"), err
    assert not list(tmp_path.glob("*.tmp"))


def test_a_sweep_job_whose_storage_stopped_is_one_row_with_its_error(tmp_path, capsys):
    """Such a job writes its summary, then its error: it was counted twice, as a study and as a failed job."""
    sweep = tmp_path / "sweep"
    with refused_once_five_complete(sweep / "broken" / "w0" / "study.db", lambda action, table: action in WRITES):
        code = main(["-m", "study_name=kept,broken", "n_trials=8", f"hydra.sweep.dir={sweep}", *FAST])
    assert code == 2
    assert "sweep summary: 2 jobs, 1 failed" in capsys.readouterr().out
    table = {r["study"]: r for r in rows(sweep / "sweep_summary.csv")}
    assert set(table) == {"kept", "broken"} and table["kept"]["error"] == ""
    assert table["broken"]["error"].startswith("the study storage stopped working during the search: not authorized")
    assert int(table["broken"]["finished"]) >= 5
