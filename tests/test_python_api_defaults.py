"""The Python API takes what the CLI takes: CPU defaults on a CPU, an `Arch` where a string is expected,
and the README's evaluator snippet runs as the script it is (it once ended in an EOFError traceback)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nasutil import get_space
from nasutil.errors import NasutilError
from nasutil.evaluator import Candidate, MeasureConfig

ROOT = Path(__file__).resolve().parents[1]


def test_a_measure_config_for_the_cpu_takes_the_cpus_defaults():
    config = MeasureConfig(device="cpu")
    assert (config.dtype, config.batch_size, config.mode) == ("fp32", 8, "eager")
    gpu = MeasureConfig(device="cuda")
    assert (gpu.dtype, gpu.batch_size, gpu.mode) == ("fp16", 256, "cudagraph")
    assert MeasureConfig(device="cpu", batch_size=2).batch_size == 2
    with pytest.raises(NasutilError, match="needs a CUDA device"):
        MeasureConfig(device="cpu", mode="cudagraph")


def test_a_candidate_takes_an_arch_as_its_string():
    arch = get_space("nb201").sample(np.random.default_rng(0))
    assert Candidate("nb201", arch) == Candidate("nb201", arch.to_string())
    with pytest.raises(NasutilError, match="a space name and an arch string"):
        Candidate("nb201", 5)


def _run_readme_snippet(after: str, folder: Path, timeout: float) -> str:
    """The first ```python block of README.md after the text `after`, run as a script of its own; its stdout."""
    text = (ROOT / "README.md").read_text()
    script = folder / "snippet.py"
    script.write_text(text.split(after)[1].split("```python\n")[1].split("```")[0])
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=timeout,
                            cwd=folder)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_the_readmes_evaluator_snippet_runs_as_a_script(tmp_path):
    out = _run_readme_snippet("From Python (a whole script", tmp_path, timeout=600)
    lines = [line for line in out.splitlines() if line.startswith("|")]
    assert len(lines) == 4 and all(float(line.split()[1]) > 0 for line in lines)


def test_the_readmes_python_api_snippet_runs_as_a_script(tmp_path):
    arch, flops, digest, shape = _run_readme_snippet("### Python API", tmp_path, timeout=300).split()
    assert arch.startswith("|") and int(flops) > 0 and len(digest) == 32 and shape == "(30,)"


def test_a_script_that_measures_without_a_main_guard_is_told_what_to_change(tmp_path):
    """The evaluator's workers import the script that started them; one that measures as it is imported made
    each worker try to start workers of its own, and the script ended in Python's bootstrapping RuntimeError
    (from the worker) and an EOFError traceback (from the script). It ends in one error that says what to do."""
    script = tmp_path / "unguarded.py"
    script.write_text("from nasutil.evaluator import Candidate, Evaluator, MeasureConfig\n\n"
                      "with Evaluator(MeasureConfig(device='cpu')) as ev:\n"
                      "    print(ev.measure(Candidate('nb201', '|skip_connect~0|+|none~0|skip_connect~1|+"
                      "|none~0|none~1|skip_connect~2|')).latency_ms)\n")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode != 0
    assert 'if __name__ == "__main__":' in result.stderr, result.stderr[-2000:]
    assert "EOFError" not in result.stderr and "bootstrapping phase" not in result.stderr, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1].startswith("nasutil.errors.NasutilError: measurement worker could "
                                                             "not start"), result.stderr[-2000:]
