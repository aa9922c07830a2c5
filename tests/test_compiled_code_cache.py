"""A compile killed while Inductor wrote a library left it cut off in Inductor's cache, and every later
compile of that network failed to load it ("file too short"). nasutil removes cut-off libraries before
its first compile in a process, and they are compiled again."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from nasutil.evaluator.modes import check_compiled_code_cache, cut_off_libraries


def _a_real_library() -> Path:
    """A shared library this process loaded (torch's extension module): a whole ELF file, wherever Python is."""
    import torch._C

    library = Path(torch._C.__file__)
    assert library.suffix == ".so" and library.stat().st_size > 4096, library
    return library


def test_cut_off_libraries_are_found_and_whole_ones_kept(tmp_path, monkeypatch):
    real = _a_real_library()
    whole = tmp_path / "ab" / "whole.so"
    whole.parent.mkdir()
    shutil.copy(real, whole)
    cut = tmp_path / "cd" / "cut.so"
    cut.parent.mkdir()
    cut.write_bytes(real.read_bytes()[: real.stat().st_size // 2])
    empty = tmp_path / "empty.so"
    empty.write_bytes(b"")
    (tmp_path / "kernel.py").write_text("# not a library\n")
    assert sorted(cut_off_libraries(tmp_path)) == sorted([cut, empty])
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    assert check_compiled_code_cache.__wrapped__() == 2
    assert whole.exists() and not cut.exists() and not empty.exists()


COMPILE = """
import torch
from nasutil.evaluator.modes import prepare
model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(288, 4)).eval()
x = torch.randn(2, 3, 8, 8)
with torch.no_grad():
    print("compiled", tuple(prepare(model, x, "compile").fn().shape))
"""


def test_a_compile_after_one_was_cut_off_compiles_again(tmp_path):
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    first = subprocess.run([sys.executable, "-c", COMPILE], env=env, capture_output=True, text=True, timeout=600)
    assert "compiled (2, 4)" in first.stdout, first.stderr[-2000:]
    libraries = list((tmp_path / "cache").rglob("*.so"))
    assert libraries
    for library in libraries:  # as a compile killed mid-write leaves them
        with library.open("r+b") as fh:
            fh.truncate(100)
    again = subprocess.run([sys.executable, "-c", COMPILE], env=env, capture_output=True, text=True, timeout=600)
    assert "compiled (2, 4)" in again.stdout, again.stderr[-2000:]
    assert "cut-off compiled librar" in again.stderr
    assert cut_off_libraries(tmp_path / "cache") == []
