"""BENCHMARKS.md's "Validation's share of a search's arithmetic" held to search_arithmetic.py's result file, and
how the script counts a trial's validations and FLOPs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from test_benchmark_step_kernels import _flat, _table  # the same markdown readers

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from search_arithmetic import DEFAULT_RUNGS, FlopCounts, arithmetic, evaluations, main, rungs_of  # noqa: E402

RESULT = ROOT / "benchmarks" / "results" / "cpu" / "search_arithmetic" / "search_arithmetic.json"
TITLE = "Validation's share of a search's arithmetic (CPU, from the recorded searches of seeds 143-147)"


def _section() -> str:
    text = (ROOT / "BENCHMARKS.md").read_text()
    start = text.index(f"### {TITLE}")
    return text[start:text.index("\n### ", start + 4)]


def _spread(values, fmt: str) -> str:
    low, high = format(min(values), fmt), format(max(values), fmt)
    return low if low == high else f"{low}-{high}"


@pytest.mark.parametrize("epochs, expected", [(1 / 9, (1, 0)), (0.111111, (1, 0)), (1 / 3, (2, 0)),
                                              (0.333333, (2, 0)), (1.0, (3, 1)), (0.999999, (3, 1)),
                                              (0.05, (0, 0))])
def test_a_trial_is_validated_at_each_rung_it_reached_and_at_its_end(epochs, expected):
    assert evaluations(epochs, DEFAULT_RUNGS) == expected


def test_without_halving_a_trial_is_validated_and_tested_once_at_its_end():
    assert evaluations(1.0, ()) == (1, 1)


def test_a_run_is_counted_at_its_own_rungs():
    assert rungs_of({"halving": "none"}) == () and rungs_of({"halving": "pareto"}) == DEFAULT_RUNGS
    assert rungs_of({"halving": "pareto", "reduction_factor": 4}) == (1 / 16, 1 / 4)


@pytest.mark.parametrize("line, says", [("nope", "not a run of population_search.py's"),
                                        ('{"run": "p1", "work": [["|bad|", 1.0]], "seed": 1, "batch_size": 64}',
                                         "not a run of population_search.py's"),
                                        ('{"run": "p1", "work": [["|none~0|", 2.0]], "seed": 1, "batch_size": 64}',
                                         "more than one epoch")])
def test_a_file_that_is_not_a_record_ends_in_one_line(tmp_path, capsys, line, says):
    (tmp_path / "runs.jsonl").write_text(line + "\n")
    with pytest.raises(SystemExit) as ended:
        main([str(tmp_path / "runs.jsonl"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert ended.value.code == 2 and says in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_flops_of_a_run_add_up_from_its_trials():
    flops = FlopCounts()
    cheap, heavy = "|none~0|+|none~0|none~1|+|none~0|none~1|skip_connect~2|", \
        "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|nor_conv_3x3~0|nor_conv_3x3~1|nor_conv_3x3~2|"
    (cheap_step, cheap_forward), (heavy_step, heavy_forward) = flops.of(cheap), flops.of(heavy)
    assert heavy_forward > 10 * cheap_forward and 2 < heavy_step / heavy_forward < 3.5
    run = {"run": "p16-pareto", "seed": 0, "batch_size": 64, "halving": "pareto", "work": [[heavy, 1.0], [cheap, 1 / 9]]}
    counted = arithmetic(run, flops)
    assert (counted["validations"], counted["tests"]) == (4, 1)
    assert counted["training_flops"] == pytest.approx(54_000 * (heavy_step + cheap_step / 9))
    assert counted["validation_flops"] == pytest.approx(6_000 * (3 * heavy_forward + cheap_forward))
    assert counted["test_flops"] == pytest.approx(10_000 * heavy_forward)
    assert 0 < counted["rung_validation_share"] < counted["validation_share"] < counted["evaluation_share"] < 1


def test_the_table_and_notes_are_the_result_file():
    result = json.loads(RESULT.read_text())
    runs, section = result["runs"], _section()
    assert len(runs) == 28 and {r["seed"] for r in runs} == {143, 144, 145, 146, 147}
    expected = []
    for batch in (64, 256):
        for population in (False, True):
            group = [r for r in runs if r["batch_size"] == batch and (r["run"] != "p1") == population]
            expected.append(["16, 64 and 256 at once" if population else "one at a time", str(batch),
                             ", ".join(str(s) for s in sorted({r["seed"] for r in group})), str(len(group)),
                             _spread([r["epochs"] for r in group], ".1f"), _spread([r["validations"] for r in group], "d"),
                             _spread([r["tests"] for r in group], "d"),
                             _spread([100 * r["evaluation_share"] for r in group], ".1f") + "%",
                             _spread([100 * r["validation_share"] for r in group], ".1f") + "%",
                             _spread([100 * r["rung_validation_share"] for r in group], ".1f") + "%"])
    assert _table(section) == expected
    flat = _flat(section)
    assert all(r["validations"] == r["validations_recorded"] for r in runs)
    assert "in every one of the 28 runs" in flat
    ratios = [r["validations"] / r["tests"] for r in runs if r["run"] != "p1"]
    assert f"candidates trained to the end {min(ratios):.0f}-{max(ratios):.0f} to 1" in flat
    together = json.loads((ROOT / "benchmarks/results/h100/step_kernels/after/step_kernels.json").read_text())
    rate = next(r for r in together["rows"] if r["batch"] == 64)["graph_together"]["steps_per_s"]
    validation = json.loads((ROOT / "benchmarks/results/h100/validation_s102/validation_cost.json").read_text())
    images_per_s = validation["images"] / validation["median"]["eager_total_ms"] * 1e3
    assert f"about {round(rate * 64 * 3, -3):,.0f} image-forwards' worth" in flat
    assert f"{rate:.0f} steps/s of 64 images" in flat
    assert f"about {round(images_per_s, -3):,.0f} ({validation['images']:,} images in a median " \
           f"{validation['median']['eager_total_ms']:.1f} ms" in flat
