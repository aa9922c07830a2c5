"""Every file a user names is read as a regular file of bounded size, and its JSON fails in one line.

A size check alone let special files through: /dev/zero reports size 0 and was read until memory ran out
(23 GB before the kernel stopped it), a FIFO blocked until something wrote to it, and /dev/null as a
study journal failed inside fsync with a traceback. An integer of 5,000 digits in a profile failed
Python's conversion limit with a ValueError that the JSON error handling did not cover.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from nasutil.errors import NasutilError

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux device files and FIFOs")


def _arch_file(path: Path) -> None:
    from nasutil import get_space
    from nasutil.cli.args import read_arch_file

    read_arch_file(path, get_space("nb201"))


def _profile(path: Path) -> None:
    from nasutil.predictor.profile import load_profile

    load_profile(str(path))


def _measurements(path: Path) -> None:
    from nasutil.predictor.training_data import read_measurements

    read_measurements([path])


def _prediction_table(path: Path) -> None:
    from nasutil.predictor.kinds.table import TablePredictor

    TablePredictor(path)


def _journal(path: Path) -> None:
    from nasutil.search.storage import journal_storage

    journal_storage(str(path))


READERS: dict[str, Callable[[Path], None]] = {"architecture file": _arch_file, "profile": _profile,
                                               "measurements file": _measurements,
                                               "prediction table": _prediction_table, "study journal": _journal}


@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "pipe.json"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("what", READERS)
@pytest.mark.parametrize("special", ["/dev/zero", "/dev/null", "fifo"])
def test_a_special_file_is_refused_unread(what, special, fifo):
    path = fifo if special == "fifo" else Path(special)
    with pytest.raises(NasutilError, match="not a regular file") as info:
        READERS[what](path)
    assert what in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("what", ["profile", "measurements file"])
def test_json_with_an_integer_too_long_to_convert_is_one_line(what, tmp_path):
    path = tmp_path / ("big.json" if what == "profile" else "big.jsonl")
    path.write_text('{"a": ' + "9" * 5000 + "}\n")
    with pytest.raises(NasutilError) as info:
        READERS[what](path)
    assert "\n" not in str(info.value) and str(path.name) in str(info.value)


def test_a_byte_order_mark_is_no_part_of_a_prediction_tables_first_column(tmp_path):
    """An editor's BOM before the header once made the table 'lack column(s) arch'."""
    from nasutil.predictor.kinds.table import TablePredictor

    path = tmp_path / "t.csv"
    path.write_text("\ufeffarch,latency_ms,throughput_per_s,utilization,space,device_name,dtype,batch_size,mode\n"
                    "|skip_connect~0|+|none~0|none~1|+|none~0|none~1|none~2|,1.0,256000.0,0.01,nb201,NVIDIA H200,"
                    "fp16,256,cudagraph\n", encoding="utf-8")
    assert len(TablePredictor(path).rows) == 1


def test_a_cell_config_or_a_run_record_that_is_a_pipe_is_refused_unread(fifo):
    """The older readers share the check: a FIFO given as a cell config was called missing, and as a run's
    record it waited for a writer."""
    from nasutil import get_space
    from nasutil.codes.run import read_record

    with pytest.raises(NasutilError, match="cell space config .* is not a regular file"):
        get_space(f"cell:{fifo}")
    with pytest.raises(NasutilError, match="run record .* is not a regular file"):
        read_record(fifo)
