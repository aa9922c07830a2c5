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
    assert "connect timeout must be a positive number of seconds, got -1" in capsys.readouterr().err
