"""The nb201 pruning experiment: its committed trials give its committed results, and its README quotes them."""

import csv
import gzip
import json
import statistics
from pathlib import Path

import pytest

from conftest import load_script

EXPERIMENT = Path(__file__).resolve().parents[1] / "experiments" / "nb201_pruning"
RESULTS = EXPERIMENT / "results"
ARMS = {  # arm -> the README's label for it
    "nsga2-none": "NSGA-II, no pruning",
    "nsga2-dominated_throughput": "NSGA-II + `dominated_throughput` (`pruned_as=predicted`)",
    "tpe-none": "TPE, no pruning",
    "tpe-dominated_throughput": "TPE + `dominated_throughput` (`pruned_as=pruned`)",
    "random-none": "random, no pruning",
    "random-dominated_throughput": "random + `dominated_throughput`",
}
PAIRED = {  # paired comparison -> the README's label for it
    "nsga2-dominated_throughput vs nsga2-none": "NSGA-II",
    "tpe-dominated_throughput vs tpe-none": "TPE",
    "random-dominated_throughput vs random-none": "random",
}
NOISE = {"nsga2-none": "NSGA-II", "tpe-none": "TPE", "random-none": "random"}
SEEDS = range(200, 220)  # the evaluation seeds, none used to tune the policy


@pytest.fixture(scope="module")
def analyze():
    return load_script(EXPERIMENT / "analyze.py", "nb201_pruning_analyze")


@pytest.fixture(scope="module")
def analysis(analyze):
    runs = analyze.read_runs(RESULTS / "trials.csv.gz")
    return runs, *analyze.analyze(runs, analyze.read_cells(RESULTS))


@pytest.fixture(scope="module")
def readme() -> str:
    return " ".join((EXPERIMENT / "README.md").read_text().replace("**", "").split())  # line breaks do not matter


def test_analysis_of_the_committed_trials_gives_the_committed_results(analyze, analysis):
    _, results, _, summary = analysis
    assert analyze.results_csv(results) == (RESULTS / "results.csv").read_bytes().decode()  # csv writes CRLF
    assert analyze.summary_json(summary) == (RESULTS / "summary.json").read_text()


def test_committed_trials_hold_every_search(analysis):
    runs = analysis[0]
    assert {(r["arm"], r["seed"]) for r in runs} == {(a, s) for a in ARMS for s in SEEDS}
    for run in runs:
        assert [int(t["number"]) for t in run["trials"]] == list(range(150))
        assert {t["outcome"] for t in run["trials"]} <= {"trained", "pruned_before_training", "repeat"}


def _count(value: float) -> str:
    return f"{value:.0f}" if value == int(value) else f"{value:.1f}"


def test_readme_tables_quote_the_summary(readme):
    summary = json.loads((RESULTS / "summary.json").read_text())
    for arm, label in ARMS.items():
        s = summary["arms"][arm]
        generations = s["generations"]
        if not arm.startswith("nsga2"):
            gens = "-"
        elif generations["min"] == generations["max"]:
            gens = _count(generations["mean"])
        else:
            gens = f"{_count(generations['mean'])} ({generations['min']}-{generations['max']})"
        hv = s["hv_ratio_to_true"]
        row = (f"| {label} | {s['trainings']['mean']:.1f} ({s['trainings']['min']}-{s['trainings']['max']}) | "
               f"{_count(round(s['pruned_before_training']['mean'], 1))} | {gens} | "
               f"{hv['mean']:.3f} +- {hv['std']:.3f} | {hv['min']:.3f} | {s['best_accuracy']['mean']:.2f}% |")
        assert row in readme, f"README lacks {row!r}"
    for key, label in PAIRED.items():
        p = summary["paired"][key]
        n = p["seeds"]
        row = (f"| {label} | {100 * p['trainings_saved_mean']:.1f}%, {100 * p['trainings_saved_min']:.1f}% | "
               f"{p['hv_ratio_mean']:.3f}, {p['hv_ratio_min']:.3f} | {p['hv_goal_seeds']} / {n} | "
               f"{p['seeds_hv_below_0.90']} / {n} | {p['trainings_goal_seeds']} / {n} | {p['goal_met_seeds']} / {n} |")
        assert row in readme, f"README lacks {row!r}"
    for arm, label in NOISE.items():
        q = summary["seed_noise"][arm]
        row = f"| {label} | {q['hv_ratio_mean']:.3f}, {q['hv_ratio_min']:.3f} | {q['seeds_hv_below_0.90']} / {q['pairs']} |"
        assert row in readme, f"README lacks {row!r}"
    ref, front = summary["reference_point"], summary["true_front"]
    assert f"({ref['accuracy']:.1f}% accuracy, {ref['throughput_per_s']:,.1f} images/s)" in readme
    hv = f"{front['hypervolume']:.3e}".replace("e+0", "e")
    assert f"the {front['cells']} non-dominated cells among all 15,625 (HV {hv})" in readme


def test_readme_quotes_the_hypervolume_after_60_trainings(analysis, readme):
    curves = analysis[2]
    after_60 = {arm: statistics.fmean(c[min(59, len(c) - 1)] for c in runs) for arm, runs in curves.items()}
    assert (f"after 60 trainings pruned NSGA-II holds {after_60['nsga2-dominated_throughput']:.3f} of the true "
            f"front's hypervolume (unpruned {after_60['nsga2-none']:.3f}), pruned TPE "
            f"{after_60['tpe-dominated_throughput']:.3f} ({after_60['tpe-none']:.3f}) and pruned random search "
            f"{after_60['random-dominated_throughput']:.3f} ({after_60['random-none']:.3f})") in readme
    benchmarks = " ".join((Path(__file__).resolve().parents[1] / "BENCHMARKS.md").read_text().split())
    assert (f"after 60 trainings pruned NSGA-II (`predicted`) holds {after_60['nsga2-dominated_throughput']:.3f} of "
            f"the true front's hypervolume, unpruned NSGA-II {after_60['nsga2-none']:.3f}, pruned random search "
            f"{after_60['random-dominated_throughput']:.3f}, random search {after_60['random-none']:.3f}") in benchmarks


def test_run_folders_are_consolidated_into_one_file(analyze, tmp_path):
    runs = tmp_path / "runs"
    for arm, seed, wall in (("nsga2-none", 0, 26.21), ("nsga2-dominated_throughput", 0, 30.0)):
        folder = runs / arm / f"s{seed}"
        folder.mkdir(parents=True)
        (folder / "summary.json").write_text(json.dumps({"seed": seed, "wall_s": wall, "pruned_as": "predicted"}))
        with (folder / "trials.csv").open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=["number", "outcome", "state", "generation", "arch", "accuracy",
                                                   "predicted_throughput_per_s", "duration_s"])
            writer.writeheader()
            writer.writerows([{"number": n, "outcome": "trained", "state": "COMPLETE", "generation": 0,
                               "arch": f"a{n}", "accuracy": 90 + n, "predicted_throughput_per_s": 1000 - n,
                               "duration_s": 0.1} for n in (1, 0)])
    results = tmp_path / "results"
    results.mkdir()
    path = analyze.trials_file(runs, results)
    first = path.read_bytes()
    assert analyze.trials_file(runs, results).read_bytes() == first  # the same runs give the same bytes
    with gzip.open(path, "rt", newline="") as f:
        header = next(csv.reader(f))
    assert header == list(analyze.RUN_COLUMNS + analyze.TRIAL_COLUMNS)
    read = analyze.read_runs(path)
    assert [(r["arm"], r["seed"], r["wall_s"]) for r in read] == [("nsga2-dominated_throughput", 0, 30.0),
                                                                  ("nsga2-none", 0, 26.21)]
    assert [t["number"] for t in read[1]["trials"]] == ["0", "1"]
    assert analyze.trained_points(read[1]["trials"]) == [(90.0, 1000.0), (91.0, 999.0)]


def test_the_300_trial_evaluation_is_what_its_committed_trials_say(tmp_path):
    """The budget-300 summaries follow from the committed trials, the README quotes them, and on the fresh
    seeds every sampler keeps >= 50% of the trainings saved and >= 0.90 of the hypervolume on every seed."""
    import subprocess
    import sys

    folder = Path(__file__).resolve().parents[1] / "experiments" / "nb201_pruning"
    budget = folder / "results" / "budget300"
    r = subprocess.run([sys.executable, str(folder / "tuning" / "summarize.py"), str(budget / "trials_seeds300.csv.gz"),
                        "--out", "seeds300", "--out-dir", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for name in ("seeds300.csv", "seeds300_per_seed.csv"):
        assert (tmp_path / name).read_text() == (budget / name).read_text()
    rows = {row["arm"].split("-")[0]: row for row in csv.DictReader((budget / "seeds300.csv").open())}
    assert set(rows) == {"nsga2", "tpe", "random"}
    readme = (folder / "README.md").read_text()
    label = {"nsga2": "NSGA-II", "tpe": "TPE", "random": "random"}
    for sampler, row in rows.items():
        assert int(row["n"]) == 20 and float(row["saved_min"]) >= 0.5 and float(row["hv_ratio_min"]) >= 0.9
        assert float(row["hv_ratio_mean"]) >= 0.99
        figures = (f"| {label[sampler]} | {float(row['trainings_mean']):.1f} | {100 * float(row['saved_mean']):.1f}%, "
                   f"{100 * float(row['saved_min']):.1f}% | {float(row['hv_ratio_mean']):.3f}, "
                   f"{float(row['hv_ratio_min']):.3f} |")
        assert figures in readme, figures


def assert_measured_table_quoted(summary: dict, readme: str, label: str = "") -> None:
    """Every sampler and budget of an `analyze_measured` summary is a row of the README's measured table
    (`label` follows the sampler's name in its first cell, e.g. ", seeds 600-619")."""
    names = {"nsga2": "NSGA-II", "tpe": "TPE", "random": "random"}
    for key, e in summary["by_sampler"].items():
        sampler, budget = key.split("@")
        line = (f"| {names[sampler]}{label} | {budget} | {100 * e['trainings_saved_mean']:.1f}%, "
                f"{100 * e['trainings_saved_min']:.1f}% | {e['hv_ratio_measured_mean']:.3f}, "
                f"{e['hv_ratio_measured_min']:.3f} | {e['seeds_below_0.95_measured']} / "
                f"{e['seeds_below_0.90_measured']} | {e['hv_ratio_predicted_mean']:.3f}, "
                f"{e['hv_ratio_predicted_min']:.3f} | {e['pruned_on_front_measured']} of {e['pruned']:,} |")
        assert line in readme, line


def committed_analysis(folder: Path, pairs: int, seeds: range) -> tuple[list[dict], dict]:
    """The analysis of a folder's committed trials, checked to be its committed summary and table: one row a
    pair of searches (pruned and unpruned, one sampler and seed) and budget (150 and 300 trials), over `seeds`."""
    measured = load_script(EXPERIMENT / "analyze_measured.py", "nb201_pruning_analyze_measured")
    rows, summary = measured.analyze(measured.read_trials(folder / "trials.csv.gz"), [150, 300],
                                     "dominated_throughput")
    assert json.loads(json.dumps(summary)) == json.loads((folder / "measured_summary.json").read_text())
    with (folder / "measured.csv").open(newline="") as f:
        assert [{k: str(v) for k, v in r.items()} for r in rows] == list(csv.DictReader(f))
    assert len(rows) == 2 * pairs and {r["seed"] for r in rows} == set(seeds)
    return rows, summary


def assert_anchors_trained_first(folder: Path, anchors: int, searches: int) -> None:
    """In every search of the folder the first `anchors` trials were trained (the anchors)."""
    with gzip.open(folder / "trials.csv.gz", "rt", newline="") as f:
        first = [r for r in csv.DictReader(f) if int(r["number"]) < anchors]
    assert len(first) == anchors * searches and all(r["outcome"] == "trained" for r in first)


def test_the_measured_scoring_is_what_its_committed_trials_say_and_the_readme_quotes_it(tmp_path, readme):
    """Prune by prediction, score by measurement: the committed trials of the 120 searches give the
    committed summary, and the README's table quotes it."""
    measured = load_script(EXPERIMENT / "analyze_measured.py", "nb201_pruning_analyze_measured")
    folder = RESULTS / "measured"
    rows, summary = measured.analyze(measured.read_trials(folder / "trials.csv.gz"), [150, 300],
                                     "dominated_throughput")
    assert json.loads(json.dumps(summary)) == json.loads((folder / "measured_summary.json").read_text())
    assert len(rows) == 120 and {r["seed"] for r in rows} == set(range(400, 420))
    assert_measured_table_quoted(summary, readme, "")


def test_the_third_version_on_fresh_seeds_is_what_its_committed_trials_say_and_the_readme_quotes_it(readme):
    """The policy's third version (distinct cells, error quantile, guarded fast end), scored on measured
    throughput: the committed trials of its 120 searches on the evaluation seeds 600-619 give the committed
    summary, and the README's table quotes it."""
    rows, summary = committed_analysis(RESULTS / "measured_v2", 60, range(600, 620))
    low = [r for r in rows if r["hv_ratio_measured"] < 0.95]
    slower = [r for r in low if r["fastest_pruned_measured"] < r["fastest_baseline_measured"]]
    assert (f"in {len(slower)} of the {len(low)} pairs (seed and budget) below 0.95 of the measured hypervolume, "
            f"the pruned search's fastest trained cell is slower than the unpruned one's") in readme
    assert_measured_table_quoted(summary, readme, ", seeds 600-619")


def test_the_third_versions_tuning_replays_as_committed(readme):
    """On the tuning seeds 500-509: replaying the chosen setting along the committed unpruned searches gives
    the committed screen's rows, and the diagnosis of the previous version's pruned searches gives the
    committed list of the candidates it pruned that would have joined the front."""
    replay = load_script(EXPERIMENT / "tuning" / "replay_measured.py", "nb201_pruning_replay_measured")
    folder = RESULTS / "measured_v2" / "tuning"
    searches, tables = replay.read_trials(folder / "trials.csv.gz"), replay.tables()
    assert {seed for _, seed in searches} == set(range(500, 510))
    with (folder / "screen.csv").open(newline="") as f:
        committed = [r for r in csv.DictReader(f) if r["setting"] == "error_quantile=0.75"]
    assert [{k: str(v) for k, v in r.items()} for r in replay.screen(searches, "error_quantile=0.75", [150, 300],
                                                                     tables)] == committed
    with (folder / "why.csv").open(newline="") as f:
        assert [{k: str(v) for k, v in r.items()} for r in replay.why(searches, 300, tables)] == list(
            csv.DictReader(f))
    with (folder / "screen.csv").open(newline="") as f:
        screen = list(csv.DictReader(f))
    for setting in dict.fromkeys(r["setting"] for r in screen):  # the README's screen table quotes every setting
        get = {(r["sampler"], r["budget"]): r for r in screen if r["setting"] == setting}
        cells = []
        for sampler in ("nsga2", "tpe", "random"):
            a, b = get[(sampler, "150")], get[(sampler, "300")]
            cells += [f"{100 * float(a['saved_mean']):.1f}%, {100 * float(b['saved_mean']):.1f}%",
                      f"{float(a['hv_ratio_min']):.3f}, {float(b['hv_ratio_min']):.3f}"]
        line = f"| `{setting}` | " + " | ".join(cells) + " |"
        assert line in readme, line
    measured = load_script(EXPERIMENT / "analyze_measured.py", "nb201_pruning_analyze_measured")
    _, summary = measured.analyze(measured.read_trials(folder / "trials.csv.gz"), [150, 300],
                                  "dominated_throughput_v3")  # the confirmation: real searches of the third version
    assert json.loads(json.dumps(summary)) == json.loads((folder / "confirm_summary.json").read_text())
    assert_measured_table_quoted(summary, readme, ", seeds 500-509")


def test_the_anchored_evaluation_is_what_its_committed_trials_say_and_the_readme_quotes_it(readme):
    """The third version with `anchors=4` in both arms, seeds 600-619: the committed trials give the committed
    summary, and the README's table quotes it; in every search the first four trials were trained (the anchors)."""
    folder = RESULTS / "measured_anchors"
    rows, summary = committed_analysis(folder, 40, range(600, 620))
    assert_anchors_trained_first(folder, 4, 80)
    low = [r for r in rows if r["hv_ratio_measured"] < 0.95]
    slower = [r for r in low if r["fastest_pruned_measured"] < r["fastest_baseline_measured"]]
    assert f"In {len(slower)} of the {len(low)} pairs below 0.95" in readme
    assert_measured_table_quoted(summary, readme, ", seeds 600-619, anchors")


@pytest.mark.parametrize("folder_name, label, anchors", [
    ("measured_q60", ", seeds 800-819, anchors=8, error_quantile=0.6", 8),
    ("measured_q60_reference", ", seeds 800-819, anchors=4, defaults", 4),
])
def test_the_fresh_seed_comparison_is_what_its_committed_trials_say_and_the_readme_quotes_it(
        readme, folder_name, label, anchors):
    """Eight anchors and a lower error allowance against the defaults with four, both on fresh seeds 800-819:
    the committed trials give the committed summaries, the README's table quotes them, and every search first
    trained its anchors."""
    folder = RESULTS / folder_name
    _, summary = committed_analysis(folder, 40, range(800, 820))
    assert_anchors_trained_first(folder, anchors, 80)
    assert_measured_table_quoted(summary, readme, label)


def test_the_fastest_cells_ranks_by_each_model_are_the_committed_tables(readme):
    """The learned model (the table the searches read) against the operator-level one (the study's column),
    for the ten fastest measured cells."""
    learned = {r["arch"]: float(r["throughput_per_s"]) for r in csv.DictReader((RESULTS / "predicted_h200.csv").open())}
    cells = list(csv.DictReader((EXPERIMENT.parent / "nb201_study" / "results" / "cells.csv").open()))
    measured = {r["arch"]: float(r["throughput_b256"]) for r in cells}
    operators = {r["arch"]: -float(r["predicted_ms_b256"]) for r in cells}  # faster: larger

    def ranks(predicted: dict[str, float]) -> list[int]:
        place = {arch: i + 1 for i, arch in enumerate(sorted(predicted, key=lambda a: -predicted[a]))}
        return sorted(place[arch] for arch in sorted(measured, key=lambda a: -measured[a])[:10])

    by_operators, by_learned = ranks(operators), ranks(learned)
    assert (f"the ten fastest measured cells are its {_ordinal(by_operators[0])} to {_ordinal(by_operators[-1])} by "
            f"prediction, against the learned model's {_ordinal(by_learned[0])} to {_ordinal(by_learned[-1])}") in readme
    assert f"the ten fastest measured cells are {_ordinal(by_learned[0])} to {_ordinal(by_learned[-1])} by prediction" \
        in readme


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"
