"""HostTimes: phase durations summed from several threads, a phase that raises still counted."""

from __future__ import annotations

import threading

import pytest

from nasutil.colocate.host_times import HostTimes


def test_phases_from_many_threads_are_summed_and_averaged():
    times = HostTimes()

    def work() -> None:
        for _ in range(100):
            times.add("build", 0.002)
            times.add("capture", 0.004)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    means = times.means_ms()
    assert means["build_count"] == means["capture_count"] == 800
    assert means["mean_build_ms"] == pytest.approx(2.0) and means["mean_capture_ms"] == pytest.approx(4.0)


def test_a_phase_that_raises_is_still_timed():
    times = HostTimes()
    with pytest.raises(RuntimeError):
        with times.phase("report"):
            raise RuntimeError("a cut at a rung")
    assert times.means_ms()["report_count"] == 1 and times.means_ms()["mean_report_ms"] >= 0
    assert HostTimes().means_ms() == {}
