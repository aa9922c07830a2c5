"""Operator timing and `nasutil profile build` on a CUDA device (skipped without one)."""

import json

import pytest
import torch

from nasutil.ops import Op
from nasutil.predictor.prediction import PredictTarget
from nasutil.predictor.op_timing import time_op_us

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("mode", ["cudagraph", "eager"])
def test_op_times_grow_with_work(mode):
    target = PredictTarget(torch.cuda.get_device_name(0), "fp16", 256, mode)
    small = time_op_us(Op("conv", 64, 32, 32, 64, 32, 32, kernel=3), target, torch.device("cuda"))
    large = time_op_us(Op("conv", 256, 32, 32, 256, 32, 32, kernel=3), target, torch.device("cuda"))
    assert 0 < small < large


def test_profile_build_writes_tables_and_fits_overlap(cli, tmp_path):
    out = tmp_path / "gpu.json"
    r = cli("profile", "build", "--spaces", "nb201", "--op-networks", "20", "--networks", "4", "--batch-size", "32",
            "--mode", "cudagraph", "--workers", "1", "--out", str(out))
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    (table,) = data["operators"]
    # networks measured while the SM clock was lowered are left out of the overlap fit
    assert table["batch_size"] == 32 and len(table["ops"]) >= 20 and 2 <= table["calibrated_on"] <= 4
    r = cli("predict", "nb201", "--sample", "2", "--batch-size", "32", "--profile", str(out), "--json")
    assert r.returncode == 0, r.stderr
    assert all(json.loads(line)["predictor"] == "operators" for line in r.stdout.splitlines())
