"""A measurement cache shared by processes through a real PostgreSQL server: each (arch, configuration)
is measured once, whichever process gets to it first; the others take its result."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from nasutil import get_space
from nasutil.errors import NasutilError
from nasutil.evaluator import Candidate, Evaluator, MeasureConfig
from nasutil.evaluator.cache import MeasurementCache

CPU = MeasureConfig(device="cpu", dtype="fp32", batch_size=2, mode="eager", channels_last=False, repeats=3,
                    min_window_ms=20.0, input_size=16)
CELLS = [a.to_string() for a in get_space("nb201").sample_many(8, seed=5)]


def _measure(url: str, archs: list[str], env: dict[str, str]) -> subprocess.Popen:
    args = ["--device", "cpu", "--batch-size", "2", "--input-size", "16", "--repeats", "3", "--json",
            "--cache", url, "--in-process"]
    return subprocess.Popen([sys.executable, "-m", "nasutil", "measure", "nb201", "--archs", archs, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_two_processes_measure_each_arch_once(postgres_url, tmp_path):
    import os

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    first.write_text("\n".join(CELLS) + "\n")
    second.write_text("\n".join(reversed(CELLS)) + "\n")  # they meet in the middle
    procs = [_measure(postgres_url, str(path), env) for path in (first, second)]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-1500:] for _, err in outputs]
    rows = [{r["arch"]: r for r in map(json.loads, out.splitlines())} for out, _ in outputs]
    assert set(rows[0]) == set(rows[1]) == set(CELLS)
    for arch in CELLS:  # one measurement each: both processes report the very same windows and timestamp
        a, b = rows[0][arch], rows[1][arch]
        assert (a["timing"]["windows_ms"], a["timestamp"]) == (b["timing"]["windows_ms"], b["timestamp"]), arch
    cache = MeasurementCache(postgres_url)
    assert len(cache) >= len(CELLS)
    cache.close()


def test_a_claim_left_by_a_dead_worker_expires(postgres_url):
    cache = MeasurementCache(postgres_url)
    dead = MeasurementCache(postgres_url)  # another process's cache, which claims and then dies
    with Evaluator(CPU, cache=cache, isolate=False, timeout_s=1.0, clock_retries=0) as ev:
        space = get_space("nb201")
        arch = space.parse(CELLS[0])
        key = cache.key("nb201", arch.canonical_hash(), ev.info["device_name"], ev.info["torch_version"], CPU, 16)
        assert dead.claim(key, ttl_s=2.0) and not cache.claim(key, ttl_s=2.0)
        ev.claim_poll_s = 0.1
        started = time.monotonic()
        m = ev.measure(Candidate("nb201", CELLS[0]))
        waited = time.monotonic() - started
    assert m.ok and waited >= 1.5  # it waited for the claim, then took it over and measured
    assert dead.get_key(key, CELLS[0]) is not None
    dead.close()
    cache.close()


def test_unreachable_and_refused_caches_are_one_line_errors(cli, postgres_url):
    from sqlalchemy.engine import make_url

    refused = make_url(postgres_url).set(password="secret").render_as_string(hide_password=False)
    for url, message in (("postgresql://nasutil:secret@127.0.0.1:9/db", "cannot use measurement cache"),
                         (refused, "password authentication failed")):
        with pytest.raises(NasutilError, match=message) as info:
            MeasurementCache(url)
        assert "secret" not in str(info.value)
        r = cli("measure", "nb201", "--sample", "1", "--device", "cpu", "--cache", url)
        assert r.returncode == 2 and "secret" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
