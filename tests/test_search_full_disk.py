"""Writes the disk refuses while a search runs or reports. A child process gets a file size limit
(RLIMIT_FSIZE, with SIGXFSZ ignored): a write past it fails with EFBIG as one on a full disk fails with ENOSPC,
part-way where it crosses the limit. The one line names the file, and what was stored before stays whole."""

from __future__ import annotations

import csv
import json
import resource
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import optuna

from nasutil.cli.search_command import main
from nasutil.search.storage import journal_storage

FAST = ["predictor=analytical", "plots=false", "progress=false", "prune=none"]
COMPLETE = optuna.trial.TrialState.COMPLETE


def limit_files(limit: int) -> Callable[[], None]:
    """What a child runs before its program: no file of its may grow past `limit` bytes."""
    def start() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    return start


def child(args: list[str], limit: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], check=False, capture_output=True, text=True, timeout=120,
                          preexec_fn=limit_files(limit))


def rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def stopped(file: Path) -> str:
    return (f"nasutil-search: error: the study storage stopped working during the search: cannot write {str(file)!r}: "
            f"File too large (the trials stored before stay, and the run folder's tables list them; re-run to resume "
            f"once it works)")


def test_a_journal_the_disk_refuses_is_named_and_the_tables_list_what_it_holds(tmp_path, capsys):
    """A journal that could grow no more ended in "cannot write the output: File too large", with no tables, and
    left a cut-off record at its end."""
    journal = tmp_path / "journal.log"
    args = [f"hydra.run.dir={tmp_path}", "n_trials=12", "study_name=s", "storage=journal", f"storage.path={journal}",
            *FAST]
    run = child(["-m", "nasutil.search", *args], limit=25_000)
    assert run.returncode == 2 and run.stderr.strip() == stopped(journal), run.stderr[-2000:]
    assert journal.read_bytes().endswith(b"\n")  # whole records only
    trials = optuna.load_study(study_name="s", storage=journal_storage(str(journal)).storage).trials
    complete = [t.number for t in trials if t.state == COMPLETE]
    assert len(complete) >= 3 and len(trials) < 12
    table = rows(tmp_path / "trials.csv")
    assert len(table) == len(trials) and [int(r["number"]) for r in table if r["state"] == "COMPLETE"] == complete
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["counts"]["finished"] == len(complete)
    assert summary["storage_error"] == f"cannot write {str(journal)!r}: File too large"
    assert main(args) == 0  # with room again, the same command resumes it
    assert "cut-off" not in capsys.readouterr().err
    after = optuna.load_study(study_name="s", storage=journal_storage(str(journal)).storage).trials
    assert set(complete) <= {t.number for t in after if t.state == COMPLETE}
    assert len([t for t in after if t.state == COMPLETE]) == 12


def test_an_sqlite_database_the_disk_refuses_is_named_and_the_tables_list_what_it_holds(tmp_path):
    """SQLite says "disk I/O error" of a write past the size limit (or over a quota), naming no file."""
    run = child(["-m", "nasutil.search", f"hydra.run.dir={tmp_path}", "n_trials=30", "study_name=s", *FAST],
                limit=450_000)
    assert run.returncode == 2 and run.stderr.strip() == stopped(tmp_path / "study.db-wal"), run.stderr[-2000:]
    trials = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'study.db'}").trials
    complete = [t.number for t in trials if t.state == COMPLETE]
    assert complete and len(trials) < 30
    assert [int(r["number"]) for r in rows(tmp_path / "trials.csv") if r["state"] == "COMPLETE"] == complete


APPEND = """
import resource, sys
import optuna
from nasutil.search.storage import journal_storage, write_user_attrs

path, limit = sys.argv[1], int(sys.argv[2])
study = optuna.load_study(study_name="s", storage=journal_storage(path).storage)
trial = study.ask()
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
try:  # three records in one append: the disk takes the first and part of the second
    write_user_attrs(study, trial._trial_id, {"a": "x" * 300, "b": "y" * 300, "c": "z" * 300})
except Exception as exc:
    print("refused:", type(exc).__name__, exc)
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))  # room again
write_user_attrs(study, trial._trial_id, {"d": 1})
study.tell(trial, 0.5)
"""


def test_an_append_the_disk_refuses_part_way_leaves_no_cut_off_record(tmp_path):
    """The cut-off record an append left was joined to the next append's first one (the disk having room
    again) into one broken line, and no record after it could be read."""
    journal = tmp_path / "journal.log"
    study = optuna.create_study(study_name="s", storage=journal_storage(str(journal)).storage)
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=1)
    room = journal.stat().st_size + 600  # asking writes two short records, then the first long one fits
    run = child(["-c", APPEND, str(journal), str(room)], limit=2**40)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == f"refused: StorageInternalError cannot write study journal {str(journal)!r}: File too large"
    from optuna.storages.journal import JournalFileBackend

    plain = optuna.storages.JournalStorage(JournalFileBackend(str(journal)))  # no repair on opening
    first, second = optuna.load_study(study_name="s", storage=plain).trials
    assert first.state == second.state == COMPLETE and second.value == 0.5
    assert second.user_attrs == {"a": "x" * 300, "d": 1}  # the whole record written before the refusal stays


PROBE = """
import resource, sys
from pathlib import Path
from nasutil.search.storage import refused_write_in

print(refused_write_in(Path(sys.argv[1]), "study.db"))
resource.setrlimit(resource.RLIMIT_FSIZE, (100, resource.RLIM_INFINITY))
print(refused_write_in(Path(sys.argv[1]), "study.db"))
"""


def test_why_a_folder_takes_no_writes_is_found_by_one_it_removes(tmp_path):
    run = child(["-c", PROBE, str(tmp_path)], limit=2**40)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.splitlines() == ["None", "[Errno 27] File too large: 'study.db'"]
    assert list(tmp_path.iterdir()) == []


REPORT = """
import resource, sys
from pathlib import Path
from nasutil.errors import NasutilError
from nasutil.search import build_search, report_search
from nasutil.search.config import compose

folder, journal = Path(sys.argv[1]), sys.argv[2]
setup = build_search(compose(["storage=journal", f"storage.path={journal}", "n_trials=1", "predictor=analytical",
                              "progress=false"]), folder)
counts = setup.search.run(setup.n_trials)
resource.setrlimit(resource.RLIMIT_FSIZE, (10_000, resource.RLIM_INFINITY))  # the tables fit, no plot does
report_search(setup, counts, 1.0)
kept = (folder / "summary.json").read_text()
tables = max((folder / name).stat().st_size for name in ("trials.csv", "pareto.csv"))
assert len(kept) > tables + 100, (len(kept), tables)
resource.setrlimit(resource.RLIMIT_FSIZE, (tables + 100, resource.RLIM_INFINITY))  # the tables fit, the summary not
try:
    report_search(setup, counts, 1.0, plots=False)
except NasutilError as exc:
    print("error:", exc)
assert (folder / "summary.json").read_text() == kept
"""


def test_plots_and_a_summary_the_disk_refuses_are_named_and_keep_the_ones_there_were(tmp_path):
    """A plot ended as "plots skipped: OSError: [Errno 27] File too large" and left half a PNG where one had been;
    summary.json ended as "cannot write the output" and was left cut off."""
    folder = tmp_path.joinpath("d" * 200, "e" * 200, "f" * 200)  # its name makes summary.json longer than the tables
    folder.mkdir(parents=True)
    (folder / "pareto.png").write_bytes(b"an earlier run's plot")
    run = child(["-c", REPORT, str(folder), str(tmp_path / "journal.log")], limit=2**40)
    assert run.returncode == 0, run.stderr[-2000:]
    said = "".join(run.stdout.split())  # the report folds lines longer than its width
    assert "".join(f"plots skipped: cannot write {str(folder / 'pareto.png')!r}: File too large".split()) in said
    assert run.stdout.splitlines()[-1] == f"error: cannot write {str(folder / 'summary.json')!r}: File too large"
    assert (folder / "pareto.png").read_bytes() == b"an earlier run's plot"
    assert sorted(p.name for p in folder.iterdir()) == ["pareto.csv", "pareto.png", "summary.json", "trials.csv"]
