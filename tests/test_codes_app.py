"""`nasutil-codes`, the Hydra front of code training: a run folder named by its settings that the same
command continues, sweeps with one folder per job, and one-line errors that leave no folder behind."""

import json
import os

import pytest

from nasutil.cli.codes_app import LOCK, main, slug

SMALL = ["dataset=digits", "base_epochs=1", "progress=false", "train_images=300", "test_images=120"]


def _history(folder):
    return [json.loads(line) for line in (folder / "history.jsonl").read_text().splitlines()]


def _runs(root):
    return sorted(p.parent for p in root.rglob("run.json"))


def test_a_run_is_named_by_its_settings_and_continues_where_it_stopped(tmp_path, capsys):
    assert main([f"runs={tmp_path}", "epochs=1", *SMALL]) == 0
    [folder] = _runs(tmp_path)
    assert folder.parent == tmp_path / "digits" / "mlp" and folder.name.startswith("k2-r1-mlp-mlp-base-mse-s0-")
    assert (folder / "code.safetensors").is_file() and (folder / "scores.json").is_file()
    assert not (folder / LOCK).exists()  # released
    assert str(folder) in capsys.readouterr().out
    assert len(_history(folder)) == 1
    assert main([f"runs={tmp_path}", "epochs=2", *SMALL]) == 0  # the same folder, one more epoch
    assert _runs(tmp_path) == [folder] and len(_history(folder)) == 2
    scores = json.loads((folder / "scores.json").read_text())
    assert 0.0 <= scores["reconstruction_accuracy"] <= 1.0


@pytest.mark.parametrize("runs", ["runs=", "runs=' '", "runs=null"])
def test_an_empty_runs_folder_is_refused_before_anything_is_written(runs, tmp_path, capsys, monkeypatch):
    """`runs=''` once put the run folder at the file system's root (/digits/mlp/...)."""
    monkeypatch.chdir(tmp_path)
    assert main([runs, "epochs=1", *SMALL]) == 2
    assert capsys.readouterr().err.strip() == ("nasutil-codes: error: runs must name a folder (the default is "
                                               "outputs/codes), got an empty one")
    assert not list(tmp_path.iterdir())


def test_a_sweep_trains_one_folder_per_job(tmp_path):
    assert main(["-m", f"runs={tmp_path}", "k=2,3", "encoder=sum", "decoder=subtract", "parity=copy", "epochs=1",
                 *SMALL]) == 0
    made = [p.name for p in _runs(tmp_path)]
    assert len(made) == 2 and made[0].startswith("k2-r1-sum-subtract-copy-mse-s0-") \
        and made[1].startswith("k3-r1-sum-subtract-copy-mse-s0-")


def test_settings_outside_the_readable_name_still_get_their_own_folder(tmp_path):
    assert main(["-m", f"runs={tmp_path}", "epochs=1", "batch_size=32,64", *SMALL]) == 0
    folders = _runs(tmp_path)
    assert len(folders) == 2 and len({f.name for f in folders}) == 2


def test_an_architecture_as_base_gets_a_safe_folder_name():
    arch = "nb201:|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|"
    name = slug(arch)
    assert "/" not in name and "|" not in name and ":" not in name and name.startswith("nb201-nor_conv_3x3")
    assert slug(arch.replace("skip_connect~2", "none~2")) != name  # two architectures, two folders
    assert slug("mlp") == "mlp"
    assert slug("..") not in ("..", ".") and "/" not in slug("a/b")


@pytest.mark.parametrize("args, message", [
    (["dataset=nope"], "unknown dataset 'nope'"),
    (["dataset=digits", "k=1"], "k must be"),
    (["dataset=mnist", "data_dir=/nonexistent"], "dataset mnist not found"),
    (["+foo=1"], "unknown setting(s) foo"),
    (["epochs=-1", "dataset=digits"], "epochs must be"),
    (["encoder=magic", "dataset=digits"], "encoder"),
    (["dataset=digits", "seed=abc"], "seed must be"),
    (["dataset=digits", "train_images=0"], "train_images must be"),
    (["dataset=digits", "test_images=1"], "test_images must be at least k = 2"),
    (["dataset=digits", "progress=maybe"], "progress must be"),
    (["dataset=digits", "parity=nope"], "unknown base 'nope'"),
    (["dataset=digits", "data_dir=${oc.env:NASUTIL_NO_SUCH_VARIABLE}"], "NASUTIL_NO_SUCH_VARIABLE"),
])
def test_bad_settings_are_one_line_and_leave_no_run_folder(tmp_path, capsys, args, message):
    assert main([f"runs={tmp_path}", "progress=false", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert not any(p.is_file() for p in tmp_path.rglob("*"))


def test_a_refused_setting_keeps_a_run_that_holds_results(tmp_path):
    assert main([f"runs={tmp_path}", "epochs=1", *SMALL]) == 0
    [folder] = _runs(tmp_path)
    before = sorted(p.name for p in folder.iterdir())
    settings = (folder / "run.json").read_text()
    assert main([f"runs={tmp_path}", "epochs=2", *SMALL, "device=cuda:99"]) == 2  # refused, here or on a GPU
    assert sorted(p.name for p in folder.iterdir()) == before
    assert (folder / "run.json").read_text() == settings  # not rewritten by the refused job


def test_a_refused_job_removes_only_what_it_made_and_only_inside_runs(tmp_path):
    mine = tmp_path / "elsewhere"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    assert main([f"runs={tmp_path / 'runs'}", f"hydra.run.dir={mine}", "dataset=nope"]) == 2
    assert (mine / "notes.txt").read_text() == "keep me"  # outside runs: nothing touched
    assert main([f"runs={tmp_path}", f"hydra.run.dir={mine}", "dataset=nope"]) == 2
    assert (mine / "notes.txt").read_text() == "keep me"  # inside runs: only the job's own files go


def test_a_failure_in_training_is_reported_as_itself_and_keeps_the_run(tmp_path, monkeypatch):
    """An error of the training inside the lock (taken by both front doors) once carried the lock's
    FileExistsError as its context: it was reported as "cannot use '.training.lock'" and the run's
    run.json was removed as if the job had been refused."""
    import nasutil.codes.run

    def broken(*args, **kwargs):
        raise RuntimeError("scoring broke")

    monkeypatch.setattr(nasutil.codes.run, "score_code", broken)
    with pytest.raises(RuntimeError, match="scoring broke"):
        main([f"runs={tmp_path}", "epochs=1", *SMALL])
    [folder] = _runs(tmp_path)
    assert (folder / "run.json").is_file() and (folder / "base.safetensors").is_file()
    assert not (folder / LOCK).exists()


def test_two_jobs_never_train_one_folder_at_once(tmp_path, capsys):
    assert main([f"runs={tmp_path}", "epochs=1", *SMALL]) == 0
    [folder] = _runs(tmp_path)
    import socket

    (folder / LOCK).write_text(f"{socket.gethostname()} {os.getppid()}")  # another live job holds it
    assert main([f"runs={tmp_path}", "epochs=2", *SMALL]) == 2
    assert "being trained by another job" in capsys.readouterr().err
    assert len(_history(folder)) == 1 and (folder / LOCK).exists()
    (folder / LOCK).write_text(f"{socket.gethostname()} 999999999")  # a job that died: taken over
    assert main([f"runs={tmp_path}", "epochs=2", *SMALL]) == 0
    assert len(_history(folder)) == 2 and not (folder / LOCK).exists()


def test_the_other_front_door_respects_the_lock_too(tmp_path, cli):
    """`nasutil codes train --out FOLDER` once trained into a folder that a live `nasutil-codes` job held."""
    import socket

    folder = tmp_path / "run"
    folder.mkdir()
    (folder / LOCK).write_text(f"{socket.gethostname()} {os.getppid()}")  # a live job: this test's parent
    r = cli("codes", "train", "--out", str(folder), "--dataset", "digits", "--device", "cpu", "--epochs", "1",
            "--base-epochs", "1", "--train-images", "300", "--test-images", "120")
    assert r.returncode == 2 and "being trained by another job" in r.stderr, r.stderr[-600:]
    assert len(r.stderr.strip().splitlines()) == 1 and not (folder / "run.json").exists()


def test_a_sweep_in_worker_processes_still_reports_a_refused_job(tmp_path, capsys):
    code = main(["-m", f"runs={tmp_path}", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "loss=mse,nope",
                 "epochs=1", *SMALL])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "loss" in err and len(err.splitlines()) == 1, err
    assert len(_runs(tmp_path)) == 1  # the good job ran


def test_report_compares_a_sweeps_runs_in_a_table_a_csv_and_two_plots(tmp_path, cli):
    assert main(["-m", f"runs={tmp_path / 'runs'}", "k=2,3", "epochs=1", *SMALL]) == 0
    r = cli("codes", "report", str(tmp_path / "runs"), "--out", str(tmp_path / "report"), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert sorted(row["k"] for row in out["runs"]) == [2, 3]
    for row in out["runs"]:
        assert row["design"] == "learned code (mlp encoder, mlp decoder)" and row["overhead"] > 0
        assert {"seed", "loss", "train_images", "base_epochs", "batch_size"} <= set(row)  # what tells bars apart
        assert 0 <= row["reconstruction_accuracy"] <= 1
    for name in ("runs.csv", "reconstruction_by_k.png", "accuracy_vs_overhead.png"):
        assert (tmp_path / "report" / name).stat().st_size > 0
    bad = cli("codes", "report", str(tmp_path / "nowhere"), "--out", str(tmp_path / "report2"))
    assert bad.returncode == 2 and "does not exist" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_the_shapes_a_report_costs_codes_at_are_the_datasets_own():
    from nasutil.codes.data import load_code_data
    from nasutil.datasets import SHAPES

    data = load_code_data("digits")
    assert SHAPES["digits"] == (data.shape, data.num_classes)


def test_report_refuses_damaged_scores_and_an_out_that_is_a_file(tmp_path, cli):
    assert main([f"runs={tmp_path / 'runs'}", "epochs=1", *SMALL]) == 0
    [folder] = _runs(tmp_path / "runs")
    (tmp_path / "afile").write_text("")
    r = cli("codes", "report", str(tmp_path / "runs"), "--out", str(tmp_path / "afile"))
    assert r.returncode == 2 and "is a file" in r.stderr and "Traceback" not in r.stderr
    (folder / "scores.json").write_text('{"reconstruction_accuracy": 0.5}')
    r = cli("codes", "report", str(tmp_path / "runs"), "--out", str(tmp_path / "report"))
    assert r.returncode == 2 and "damaged" in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("epochs", ['"lots"', "null", "[1]", "-7", "NaN", "0", "1.5", "true"])
def test_report_refuses_epochs_that_are_not_a_whole_number(tmp_path, cli, epochs):
    """A run's recorded epochs once crashed the report's plots (text, null, a list) or went into its table as
    they were (-7, NaN)."""
    assert main([f"runs={tmp_path / 'runs'}", "epochs=1", *SMALL]) == 0
    [folder] = _runs(tmp_path / "runs")
    scores = json.loads((folder / "scores.json").read_text())
    assert scores.pop("epochs") == 1 and scores["settings"]["epochs"] == 1  # the run's own settings stay whole
    (folder / "scores.json").write_text(json.dumps(scores)[:-1] + f', "epochs": {epochs}}}')
    r = cli("codes", "report", str(tmp_path / "runs"), "--out", str(tmp_path / "report"))
    assert r.returncode == 2 and "damaged (epochs must be" in r.stderr and len(r.stderr.strip().splitlines()) == 1, \
        r.stderr[-600:]
    assert not (tmp_path / "report" / "runs.csv").exists()  # nothing half written



@pytest.mark.parametrize("record, text", [
    ("scores.json", "[" * 100_000 + "]" * 100_000),                         # nested too deep to read
    ("scores.json", '{"reconstruction_accuracy": 1' + "0" * 5000 + "}"),    # a number too long to convert
    ("scores.json", '{"reconstruction_accuracy": "high", "degraded_accuracy": 0.5, "normal_accuracy": 0.5, '
                    '"rebuilt": 10}'),                                          # a score that is text
    ("scores.json", '{"reconstruction_accuracy": 1e400, "degraded_accuracy": 0.5, "normal_accuracy": 0.5, '
                    '"rebuilt": 10}'),                                          # an infinite score
    ("run.json", "[" * 100_000 + "]" * 100_000),
], ids=["deep-scores", "long-number", "text-score", "infinite-score", "deep-run"])
def test_report_and_eval_refuse_a_damaged_record_in_one_line(tmp_path, cli, record, text):
    """A run's JSON records are read by one reader that bounds them: each case once ended in a traceback."""
    assert main([f"runs={tmp_path / 'runs'}", "epochs=1", *SMALL]) == 0
    [folder] = _runs(tmp_path / "runs")
    (folder / record).write_text(text)
    for command in (["codes", "report", str(tmp_path / "runs"), "--out", str(tmp_path / "report")],
                    ["codes", "eval", str(folder)]):
        if (record == "scores.json") != (command[1] == "report"):
            continue  # report reads scores.json (which holds its settings); eval reads run.json
        r = cli(*command)
        assert r.returncode == 2 and "damaged" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr[-600:]


def test_help_lists_the_codes_settings_not_the_searchs_groups(capsys):
    try:
        code = main(["--help"])
    except SystemExit as stop:  # Hydra may end a --help run itself
        code = stop.code
    out = capsys.readouterr().out
    assert code in (0, None) and out.startswith("nasutil-codes: train a learned code")
    assert "encoder: mlp" in out and "sampler:" not in out and "search_space" not in out


def test_a_reports_bars_never_average_runs_of_other_settings():
    """A bar is the mean of runs that differ by seed alone: runs on 300 and 900 training images, or trained
    with mse and kl, were averaged into one bar (its key was design, dataset, base, r and epochs only);
    each now has its bar, labelled by the settings that tell it apart."""
    from nasutil.codes.report import bars, labels

    def row(accuracy: float, seed: int = 0, **settings) -> dict:
        return {"design": "learned code", "dataset": "digits", "base": "mlp", "r": 1, "k": 2, "epochs": 1,
                "loss": "mse", "train_images": None, "seed": seed, "reconstruction_accuracy": accuracy, **settings}

    heights = bars([row(0.5), row(0.7, seed=1), row(0.9, epochs=20.0), row(0.3, dataset="fashion_mnist"),
                    row(0.2, train_images=300), row(0.4, train_images=900), row(0.8, loss="kl"),
                    row(0.6, loss="kl", seed=3)])
    named = {label: heights[key] for key, label in labels(heights).items()}
    common = "learned code; dataset={}, epochs={}, train_images={}, loss={}"
    assert named == {common.format("digits", 1, "all", "mse"): {2: 60.0},
                     common.format("digits", 20, "all", "mse"): {2: 90.0},
                     common.format("fashion_mnist", 1, "all", "mse"): {2: 30.0},
                     common.format("digits", 1, 300, "mse"): {2: 20.0},
                     common.format("digits", 1, 900, "mse"): {2: 40.0},
                     common.format("digits", 1, "all", "kl"): {2: 70.0}}
