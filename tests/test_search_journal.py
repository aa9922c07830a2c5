"""A study journal whose last record was cut off (a writer killed mid-append) is read up to its last whole
record, with a warning, and the search goes on: it once crashed and left the journal unreadable."""

from __future__ import annotations

import optuna
import pytest

from nasutil.cli.search_command import main
from nasutil.search.storage import journal_storage

ARGS = ["predictor=analytical", "plots=false", "progress=false", "prune=none", "storage=journal",
        "study_name=cut"]


def trials_in(path) -> list:
    return optuna.load_study(study_name="cut", storage=journal_storage(str(path)).storage).trials


def test_a_cut_off_last_record_is_set_aside_and_the_search_resumes(tmp_path):
    journal = tmp_path / "study.log"
    args = [*ARGS, f"storage.path={journal}"]
    assert main([*args, "n_trials=5", f"hydra.run.dir={tmp_path / 'a'}"]) == 0
    whole = journal.read_bytes()
    cut = b'{"op_code": 5, "worker_id": "w", "trial_id": 3, "user_attr": {"accur'
    journal.write_bytes(whole + cut)
    with pytest.warns(UserWarning, match="last record was cut off"):
        assert len(trials_in(journal)) == 5
    assert journal.read_bytes() == whole
    assert (tmp_path / "study.log.cut-off").read_bytes() == cut + b"\n"
    assert main([*args, "n_trials=8", f"hydra.run.dir={tmp_path / 'b'}"]) == 0
    trials = trials_in(journal)
    assert len(trials) == 8 and all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)


def test_a_whole_journal_is_left_as_it_is(tmp_path):
    journal = tmp_path / "study.log"
    assert main([*ARGS, f"storage.path={journal}", "n_trials=3", f"hydra.run.dir={tmp_path / 'a'}"]) == 0
    before = journal.read_bytes()
    assert len(trials_in(journal)) == 3 and journal.read_bytes() == before
    assert not (tmp_path / "study.log.cut-off").exists()


def test_the_search_says_in_one_line_that_it_set_a_cut_off_record_aside(tmp_path, monkeypatch, capsys):
    """Where warnings are hidden (the default), a repaired journal is still told: it once went unsaid."""
    monkeypatch.delenv("NASUTIL_WARNINGS", raising=False)
    journal = tmp_path / "study.log"
    args = [*ARGS, f"storage.path={journal}"]
    assert main([*args, "n_trials=3", f"hydra.run.dir={tmp_path / 'a'}"]) == 0
    journal.write_bytes(journal.read_bytes() + b'{"op_code": 5, "worker_id": "w", "tri')
    capsys.readouterr()
    assert main([*args, "n_trials=4", f"hydra.run.dir={tmp_path / 'b'}"]) == 0
    told = [line for line in capsys.readouterr().err.splitlines() if "cut off" in line]
    assert len(told) == 1 and told[0].startswith("nasutil-search: warning: study journal"), told
    assert "cut-off bytes moved to" in told[0] and (tmp_path / "study.log.cut-off").exists()


@pytest.mark.parametrize("kind", ["study database", "picture", "notes", "folder"])
def test_a_file_that_is_not_a_journal_is_refused_and_left_as_it_is(tmp_path, capsys, kind):
    """`storage.path` pointed at another file once had that file's bytes cut off as a broken record (a study
    database's 40 trials made unreadable) or a journal record appended to it."""
    target = tmp_path / {"study database": "copy.db", "picture": "plot.png", "notes": "notes.txt",
                         "folder": "runs"}[kind]
    if kind == "study database":  # a copy: the search's own file is still the process's to close
        assert main([*ARGS[:-2], "n_trials=3", f"hydra.run.dir={tmp_path / 'first'}"]) == 0  # SQLite
        target.write_bytes((tmp_path / "first" / "study.db").read_bytes())
    elif kind == "picture":
        target.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(200))
    elif kind == "notes":
        target.write_text("hello notes")
    else:
        target.mkdir()
    before = target.read_bytes() if target.is_file() else None
    capsys.readouterr()
    assert main([*ARGS, f"storage.path={target}", "n_trials=2", f"hydra.run.dir={tmp_path / 'again'}"]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and ("is not a study journal" in error[0] or "it is a folder" in error[0]), error
    assert (target.read_bytes() if target.is_file() else None) == before
    assert not list(tmp_path.glob("*.cut-off"))
