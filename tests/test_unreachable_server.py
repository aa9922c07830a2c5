"""A database server that never answers is given up within the connect timeout, in one line: a study
storage or a measurement cache pointed at such a host once held the command for minutes. The server
here is a real listening socket on 127.0.0.1 that accepts connections and never says a word."""

from __future__ import annotations

import socket
import time

import pytest

from nasutil.errors import NasutilError


@pytest.fixture
def silent_port():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    yield listener.getsockname()[1]
    listener.close()


def test_a_study_storage_that_never_answers_fails_within_its_timeout(silent_port, capsys, tmp_path, monkeypatch):
    pytest.importorskip("psycopg")
    from nasutil.cli.search_command import main

    monkeypatch.setenv("NASUTIL_STORAGE_URL", f"postgresql://user@127.0.0.1:{silent_port}/db")
    start = time.monotonic()
    assert main(["storage=postgresql", "storage.connect_timeout_s=2", "predictor=analytical", "plots=false",
                 "progress=false", f"hydra.run.dir={tmp_path / 'run'}"]) == 2
    assert time.monotonic() - start < 30
    err = capsys.readouterr().err.strip()
    assert "cannot open study storage" in err and "timeout" in err and "\n" not in err, err


def test_a_measurement_cache_that_never_answers_fails_within_its_timeout(silent_port, monkeypatch):
    pytest.importorskip("psycopg")
    from nasutil.evaluator.cache import MeasurementCache

    monkeypatch.setenv("NASUTIL_CONNECT_TIMEOUT_S", "2")
    start = time.monotonic()
    with pytest.raises(NasutilError, match="cannot use measurement cache .*timeout"):
        MeasurementCache(f"postgresql://user@127.0.0.1:{silent_port}/db")
    assert time.monotonic() - start < 15


def test_a_bad_connect_timeout_is_one_line(capsys, tmp_path):
    from nasutil.cli.search_command import main

    assert main(["storage=url", "storage.url=postgresql://u@127.0.0.1:1/db", "storage.connect_timeout_s=-1",
                 "plots=false", "progress=false", f"hydra.run.dir={tmp_path / 'run'}"]) == 2
    assert "connect timeout must be a number of seconds above 0 and up to 3600, got -1" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["abc", "-5", "30s", "0", "1e30"])
def test_a_connect_timeout_from_the_environment_that_is_not_seconds_is_refused(monkeypatch, value):
    """`abc`, `-5` or `30s` once fell back to 5 s without a word."""
    from nasutil.databases import connect_args

    monkeypatch.setenv("NASUTIL_CONNECT_TIMEOUT_S", value)
    with pytest.raises(NasutilError, match=f"NASUTIL_CONNECT_TIMEOUT_S must be a number of seconds .*got '{value}'"):
        connect_args("postgresql://u@127.0.0.1:1/x")
    monkeypatch.setenv("NASUTIL_CONNECT_TIMEOUT_S", "2.5")
    assert connect_args("postgresql://u@127.0.0.1:1/x") == {"connect_timeout": 3}


@pytest.mark.parametrize("setting", ["heartbeat_interval", "grace_period"])
def test_a_heartbeat_setting_past_a_day_is_refused(setting, tmp_path):
    """10**20 s overflowed inside the heartbeat threads: a traceback, then a search that ran nothing, exit 0."""
    from nasutil.search.storage import open_storage

    with pytest.raises(NasutilError, match=f"storage.{setting} must be a number of seconds above 0 and up to 86400"):
        open_storage(f"sqlite:///{tmp_path / 's.db'}", **{setting: 10**20})
