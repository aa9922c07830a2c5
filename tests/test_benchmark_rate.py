"""benchmarks/nb201_rate.py refuses a bad `--variant`, and turn_contents.py bad settings, before either looks for a
device, naming the setting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "nb201_rate.py"


@pytest.mark.parametrize("variant, says", [
    ("repeats=1", "repeats must be a whole number from 2 to 10,000, got 1"),
    ("repeats", "'repeats': expected KEY=VALUE"),
    ("no_such_setting=3", "no_such_setting"),
    ('device_turn="somewhere"', "device_turn must be one of whole, timing, split, got 'somewhere'"),
    ("mode=eager", "mode: every pass shares it"),
    ("counters=yes", 'the value must be a number, true, false or "text"'),
    ("min_window_ms=-1", "min_window_ms must be a finite number >= 0"),
])
def test_a_bad_variant_is_refused_with_exit_2(tmp_path, variant, says):
    done = subprocess.run([sys.executable, str(SCRIPT), "--variant", "repeats=4", "--variant", variant,
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 2 and "argument --variant" in last and says in last, done.stderr
    assert not any(tmp_path.iterdir())  # nothing measured, nothing written


@pytest.mark.parametrize("args, says", [
    (["--seconds", "0"], "--seconds must be from 0.5 to 600, got 0"),
    (["--seconds", "nan"], "--seconds must be from 0.5 to 600, got nan"),
    (["--networks", "0"], "--networks must be at least 1, got 0"),
])
def test_turn_contents_refuses_bad_input_with_exit_2_before_it_looks_for_a_device(tmp_path, args, says):
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "turn_contents.py"), *args,
                           "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 2 and says in done.stderr.strip().splitlines()[-1], done.stderr
    assert not (tmp_path / "out").exists()
