"""Every command in a ```bash block of README.md and docs/search.md is classified in TABLE below, and each
class is checked the way it can be on a CPU machine without a GPU:

- `cpu`: run as written, here, in a fresh folder (its working directory, NASUTIL_CACHE_DIR inside it);
  exit code 0, no traceback, and what the docs say it prints or writes.
- `filled`: the command has a placeholder the reader fills in (ARCH, archs.txt, results/, my_gpu.json,
  a run folder made by an earlier command); `fill` and `setup` say what stands in for it, and then the
  command runs as above.
- `cuda`: needs a CUDA device; run as written, it must end with exit code 2 and one line on stderr that
  names CUDA or the GPU, with no traceback (skipped where there is a GPU: there it would do the work).
- `costly`: too slow for the suite on a CPU; benchmarks/command_cost.py runs it as written and its
  committed results (benchmarks/results/cpu/command_cost/*.csv) must hold it with exit code 0.
- `elsewhere`: needs a real service or another machine (a PostgreSQL server at the reader's URL, SLURM,
  a shared file system, a web browser); not run here, `why` says why and `covered_by` names the tests
  that run the same path against a throwaway server or a local file.
- `install`: installs the project or runs the test suite, which CI does itself (.ci/run); checked
  against pyproject.toml and .ci/run.

A command in the docs that is missing from TABLE, or a row of TABLE whose command left the docs, fails
test_every_documented_command_is_classified, so no documented command goes unchecked.

The commands run through bash exactly as documented (quoting, `>` redirections, `$PWD`, `$(...)`), with
`nasutil`, `nasutil-search` and `nasutil-codes` on PATH as small scripts that run `sys.executable -m
nasutil`, `-m nasutil.search` and `-m nasutil.cli.codes_app` (the console scripts need not be on PATH).
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import load_script

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "docs/search.md")
COST_RESULTS = ROOT / "benchmarks" / "results" / "cpu" / "command_cost"
KINDS = ("cpu", "filled", "cuda", "costly", "elsewhere", "install")
SHELL_ONLY = {"export", "wait", "cd", "set", "unset", "source"}
COST_SCRIPT = load_script(ROOT / "benchmarks" / "command_cost.py", "command_cost")  # its COMMANDS are the costly ones
MODULES = {"nasutil": "nasutil", "nasutil-search": "nasutil.search", "nasutil-codes": "nasutil.cli.codes_app"}


# --- what the docs show ---------------------------------------------------------------------------

def _strip_comment(line: str) -> str:
    """`line` up to a `#` that starts a shell comment (at the start or after a blank, outside quotes)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def _split_list(line: str) -> list[str]:
    """The commands of a shell list: split at `&&`, `;` and a trailing or separating `&` (not `2>&1` or
    `&>`), outside quotes. A `for`/`while`/`if` compound stays one command."""
    if line.split(maxsplit=1)[0] in ("for", "while", "until", "if"):
        return [line]
    parts, quote, start, i = [], None, 0, 0
    while i < len(line):
        ch = line[i]
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif line.startswith("&&", i) or ch == ";" or (ch == "&" and line[i - 1:i] not in ("<", ">")
                                                        and line[i + 1:i + 2] != ">"):
            parts.append(line[start:i])
            i += 2 if line.startswith("&&", i) else 1
            start = i
            continue
        i += 1
    return [*parts, line[start:]]


def commands_in(text: str, name: str) -> dict[str, list[str]]:
    """Each command of the ```bash blocks of `text` (continuations joined, comments dropped, lists split,
    shell-only lines such as `export` skipped, blanks collapsed) -> where it is ("FILE:LINE")."""
    found: dict[str, list[str]] = {}
    for block in re.finditer(r"^```bash\n(.*?)^```", text, re.DOTALL | re.MULTILINE):
        first = text.count("\n", 0, block.start(1)) + 1
        lines = block.group(1).splitlines()
        i = 0
        while i < len(lines):
            number, line = first + i, lines[i]
            while line.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line.rstrip()[:-1] + " " + lines[i]
            i += 1
            line = _strip_comment(line).strip()
            if not line:
                continue
            for command in _split_list(line):
                command = " ".join(command.split())
                if command and command.split()[0] not in SHELL_ONLY:
                    found.setdefault(command, []).append(f"{name}:{number}")
    return found


def documented_commands() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for name in DOCS:
        for command, where in commands_in((ROOT / name).read_text(), name).items():
            found.setdefault(command, []).extend(where)
    return found


# --- the table ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Doc:
    id: str
    command: str
    kind: str
    fill: tuple[tuple[str, str], ...] = ()  # placeholder -> what the test puts in its place
    setup: tuple[str, ...] = ()  # shell lines run first in the same folder ({root}: the checkout)
    after: str | None = None  # the folder starts as a copy of that entry's folder after its run
    check: Callable[[Path, subprocess.CompletedProcess], None] | None = None
    why: str = ""
    covered_by: tuple[str, ...] = ()
    gpu: str = ""  # documented for a GPU; on a CPU it does not end within its limit: what was seen there
    timeout: float = 300


def _lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.strip()]


def _json_lines(out: str) -> list[dict]:
    return [json.loads(line) for line in _lines(out)]


def _one(cwd: Path, pattern: str) -> Path:
    paths = glob.glob(str(cwd / pattern))
    assert len(paths) == 1, f"expected one {pattern} in {cwd}, found {paths}"
    return Path(paths[0])


def search_wrote(finished: int, *, resumed: bool = False, **counts: Callable[[int], bool]):
    """A search run: the Pareto table printed, the outputs docs/search.md lists in outputs/<study>/, and
    summary.json's counts (`finished` trials; each of `counts` checked by its predicate)."""
    def check(cwd: Path, result: subprocess.CompletedProcess) -> None:
        assert "Pareto front of" in result.stdout and "results:" in result.stdout, result.stdout[-2000:]
        folder = _one(cwd, "outputs/*/summary.json").parent
        for name in ("trials.csv", "pareto.csv", "study.db", "pareto.png", "utilization_hist.png", "study.html",
                     ".hydra"):
            assert (folder / name).exists(), f"{name} missing from {folder}"
        summary = json.loads((folder / "summary.json").read_text())
        assert summary["counts"]["finished"] == finished and summary["counts"]["failed"] == 0, summary["counts"]
        assert summary["resumed"] is resumed
        for key, ok in counts.items():
            assert ok(summary["counts"][key]), (key, summary["counts"])
    return check


def printed(*patterns: str, lines: int | None = None):
    """stdout matches every regex of `patterns` (and has `lines` non-blank lines, where given)."""
    def check(cwd: Path, result: subprocess.CompletedProcess) -> None:
        for pattern in patterns:
            assert re.search(pattern, result.stdout), f"{pattern!r} not in: {result.stdout[-2000:]}"
        if lines is not None:
            assert len(_lines(result.stdout)) == lines, result.stdout[-2000:]
    return check


def table_rows(count: int):
    """A rich table with `count` arch rows (their first cell starts with the cell string's `|`)."""
    def check(cwd: Path, result: subprocess.CompletedProcess) -> None:
        rows = [line for line in result.stdout.splitlines() if re.match(r"^│ \|", line)]
        assert len(rows) == count, result.stdout[-3000:]
    return check


def json_rows(count: int, **fields):
    def check(cwd: Path, result: subprocess.CompletedProcess) -> None:
        rows = _json_lines(result.stdout)
        assert len(rows) == count, result.stdout[-2000:]
        for row in rows:
            assert row.get("latency_ms", 1) > 0
            for key, value in fields.items():
                assert row[key] == value, (key, row[key])
    return check


def check_spaces(cwd: Path, result: subprocess.CompletedProcess) -> None:
    for name in ("nb201", "nb101", "darts", "mbconv", "cell", "nni"):
        assert re.search(rf"^│ {name} ", result.stdout, re.MULTILINE), f"{name} not listed: {result.stdout[-3000:]}"
    assert "unavailable" not in result.stdout, result.stdout


def check_describe_json(cwd: Path, result: subprocess.CompletedProcess) -> None:
    described = json.loads(result.stdout)
    assert described["params"] > 0 and described["flops_per_image"] > 0 and described["layers"], described.keys()


def check_profile_fit(cwd: Path, result: subprocess.CompletedProcess) -> None:
    assert "wrote my_gpu.json: NVIDIA H200" in result.stdout and "learned models: nb201 fp16 b256 cudagraph" in result.stdout
    profile = json.loads((cwd / "my_gpu.json").read_text())
    assert "fitted from results" in profile["source"]


def check_next(cwd: Path, result: subprocess.CompletedProcess) -> None:
    picked = _lines((cwd / "next.txt").read_text())
    assert len(picked) == 50 and len(set(picked)) == 50 and all(p.startswith("|") for p in picked), picked[:3]


def check_codes_report(cwd: Path, result: subprocess.CompletedProcess) -> None:
    for name in ("runs.csv", "reconstruction_by_k.png", "accuracy_vs_overhead.png"):
        assert (cwd / "codes-report" / name).is_file(), name
    rows = (cwd / "codes-report" / "runs.csv").read_text().splitlines()
    assert len(rows) == 2 and rows[1].startswith("outputs/codes/fmnist-k2,digits,mlp,2,1,"), rows


TWO_NODE = "cell:docs/examples/two_node_cells.yaml"
COPY_TWO_NODE = 'mkdir -p docs/examples && cp "{root}/docs/examples/two_node_cells.yaml" docs/examples/'
H200_RESULTS = (('mkdir -p results && head -n 301 "{root}/benchmarks/results/h200/predictor_data_nb201.csv" '
                "> results/h200_nb201.csv"),  # 300 H200 measurements of nb201 cells at fp16, batch 256, cudagraph
                'cp "{root}/nasutil/data/profiles/h200.json" my_gpu.json')  # the shipped profile as "this GPU's"
# A run folder as `nasutil codes train` leaves it, trained in seconds (digits, one epoch, a few images)
CHEAP_CODE = ("nasutil codes train --out runs/fmnist-k2 --dataset digits --base mlp --k 2 --epochs 1 --base-epochs 1 "
              "--train-images 256 --test-images 128")
POSTGRES = "needs a PostgreSQL server at the reader's URL (USER:PASSWORD@HOST)"
COST = "too slow for the suite on a 2-core CPU; benchmarks/command_cost.py runs it as written"
CI = "CI runs it itself: .ci/run is `python3 -m pip install -e '.[test]' && python3 -m pytest -q -n auto --dist loadgroup`"

FMNIST_UNFINISHED = ("a GPU command: on a 2-core CPU command_cost.py stopped it after {s} s with 0 of {n} trials "
                     "finished (each candidate trains 3 epochs of Fashion-MNIST's 60,000 images on the CPU)")
COSTLY_WHY = {
    "nasutil-search trainer.dataset=imagenet16_120 early_stopping=hyperband":
        "about 10-18 s, another tabular search like those run here; left to benchmarks/command_cost.py to keep this "
        "file within its 3 minutes of the suite",
}
GPU_COMMANDS = {  # documented for a GPU: on a CPU they run but do not end within command_cost.py's limit
    "nasutil measure --model torchvision:resnet50 --batch-size 128 --mode compile --per-layer":
        "a GPU command: exit 1 on a 2-core CPU, 'resnet50 128 failed: timed out after 300 s' (the default --timeout "
        "a candidate, a one-line error) in 2 of 3 runs; the third finished in 262 s",
    "nasutil-search trainer=torch trainer.dataset=fashion_mnist trainer.population=8": FMNIST_UNFINISHED.format(s=1800, n=60),
    "nasutil-search trainer=torch trainer.dataset=fashion_mnist trainer.population=16 halving=pareto":
        FMNIST_UNFINISHED.format(s=900, n=60),
    "nasutil-search trainer=torch trainer.dataset=fashion_mnist trainer.population=16 halving=pareto n_trials=128":
        FMNIST_UNFINISHED.format(s=900, n=128),
}

TABLE = [
    # --- run as written ---
    Doc("search-default", "nasutil-search", "cpu", check=search_wrote(60, pruned_before=lambda n: n > 0)),
    Doc("search-resumed", "nasutil-search n_trials=120", "cpu", after="search-default",
        check=search_wrote(120, resumed=True)),  # the line after the default in README's block: it resumes that
    Doc("search-latency-slo", "nasutil-search objectives=accuracy_latency objectives.latency_slo_ms=3.0 prune=latency_slo",
        "cpu", check=search_wrote(60, reasons=lambda r: set(r) <= {"latency_slo"})),
    Doc("search-evaluator-table", "nasutil-search evaluator=table", "cpu",
        check=lambda cwd, r: (search_wrote(60)(cwd, r), printed(r"hardware figures: measured table nb201_h200")(cwd, r))),
    Doc("spaces", "nasutil spaces", "cpu", check=check_spaces),
    Doc("sample-darts", "nasutil sample darts -n 5 --seed 1", "cpu", check=printed(r"^Genotype\(normal=", lines=5)),
    Doc("predict-nb201-sample", "nasutil predict nb201 --sample 5", "cpu", check=table_rows(5)),
    Doc("profile-show", "nasutil profile show h200", "cpu", check=printed(r"NVIDIA H200")),
    Doc("measure-nb201-cell",
        "nasutil measure nb201 '|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|'",
        "cpu", check=lambda cwd, r: (table_rows(1)(cwd, r), printed(r"utilization = achieved FLOP/s")(cwd, r))),
    Doc("cell-sample", f"nasutil sample {TWO_NODE} -n 5", "cpu", setup=(COPY_TWO_NODE,),
        check=printed(r"^\|nor_conv|^\|skip|^\|none", lines=5)),
    Doc("cell-describe", f"nasutil describe {TWO_NODE} '|nor_conv_3x3~0|+|skip_connect~0|nor_conv_1x1~1|'", "cpu",
        setup=(COPY_TWO_NODE,), check=printed(r"params [\d.]+k, FLOPs per image", r"│ conv3x3 ")),
    Doc("cell-predict", f"nasutil predict {TWO_NODE} --sample 3", "cpu", setup=(COPY_TWO_NODE,), check=table_rows(3)),
    # --- placeholders filled in ---
    Doc("describe-mbconv", "nasutil describe mbconv ARCH --input-size 224 --json", "filled",
        fill=(("ARCH", '"$(nasutil sample mbconv -n 1 --seed 0)"'),), check=check_describe_json),
    Doc("predict-mbconv-archs", "nasutil predict mbconv --archs archs.txt --batch-size 1 --mode eager --json", "filled",
        setup=("nasutil sample mbconv -n 3 --seed 0 > archs.txt",),
        check=json_rows(3, space="mbconv", batch_size=1, mode="eager")),
    Doc("predict-nb201-arch", "nasutil predict nb201 ARCH --predictor operators", "filled",
        fill=(("ARCH", '"$(nasutil sample nb201 -n 1 --seed 0)"'),),
        check=lambda cwd, r: (table_rows(1)(cwd, r), printed(r"operators")(cwd, r))),
    Doc("measure-darts-cpu", "nasutil measure darts --archs my_archs.txt --device cpu --json", "filled",
        setup=("nasutil sample darts -n 1 --seed 0 > my_archs.txt",),
        check=json_rows(1, space="darts", device="cpu", status="ok")),
    Doc("profile-fit", "nasutil profile fit results/ --base my_gpu.json --out my_gpu.json", "filled",
        setup=H200_RESULTS, check=check_profile_fit),
    Doc("profile-fit-joined", "nasutil profile fit results/ --base my_gpu.json --base mine.json --out my_gpu.json",
        "filled", setup=(*H200_RESULTS, "cp my_gpu.json mine.json"),  # mine.json: `profile build` on a GPU
        check=check_profile_fit),
    Doc("profile-next", "nasutil profile next nb201 results/ --count 50 > next.txt", "filled", setup=H200_RESULTS,
        check=check_next),
    Doc("codes-eval", "nasutil codes eval runs/fmnist-k2 --json", "filled", setup=(CHEAP_CODE,),
        check=lambda cwd, r: printed(r'"reconstruction_accuracy": ', r'"degraded_accuracy": ')(cwd, r)),
    Doc("codes-report", "nasutil codes report outputs/codes --out codes-report", "filled", after="codes-eval",
        setup=("mkdir -p outputs/codes && cp -r runs/fmnist-k2 outputs/codes/",), check=check_codes_report),
    # --- need CUDA: a one-line error here ---
    Doc("profile-build-cuda", "nasutil profile build --device cuda --out my_gpu.json", "cuda"),
    Doc("profile-build-cuda-space", "nasutil profile build --device cuda --spaces my_space --networks 0 --out mine.json",
        "cuda", why="my_space is left as written: the missing GPU is reported before the space is looked up"),
    Doc("joblib-two-gpus", "nasutil-search -m hydra/launcher=joblib hydra.launcher.n_jobs=4 worker=0,1,2,3 "
        "devices=[cuda:0,cuda:1] storage=journal storage.path=$PWD/shared.log study_name=shared n_trials=200", "cuda"),
    # --- costly: benchmarks/command_cost.py ---
    *[Doc(command, command, "costly", why=COSTLY_WHY.get(command, COST), gpu=GPU_COMMANDS.get(command, ""))
      for command in COST_SCRIPT.COMMANDS if command != "nasutil-search"],
    # --- need a service or another machine ---
    Doc("postgres-workers", "for i in 0 1 2 3; do nasutil-search storage=postgresql study_name=shared n_trials=200 "
        "worker=$i hydra.run.dir=outputs/shared/w$i & done; wait", "elsewhere",
        why=f"{POSTGRES} in NASUTIL_STORAGE_URL; the test runs these four workers against a throwaway server",
        covered_by=("tests/test_search_shared.py::test_four_workers_share_one_postgresql_study",
                    "tests/test_search_shared.py::test_a_worker_killed_mid_trial_loses_nothing")),
    Doc("journal-on-each-machine", "nasutil-search storage=journal storage.path=/shared/studies/shared.log "
        "study_name=shared n_trials=200 worker=N hydra.run.dir=outputs/shared/$(hostname)", "elsewhere",
        why="needs a file system shared by several machines (/shared/studies); the tests share a local journal file",
        covered_by=("tests/test_search_shared.py::test_three_workers_share_a_journal_file",
                    "tests/test_search_journal.py::test_a_cut_off_last_record_is_set_aside_and_the_search_resumes")),
    Doc("optuna-dashboard", 'optuna-dashboard "$NASUTIL_STORAGE_URL"', "elsewhere",
        why=f"optuna-dashboard is another project's web server that runs until stopped, and {POSTGRES}; the test "
            "checks the objective names it shows",
        covered_by=("tests/test_search_shared.py::test_four_workers_share_one_postgresql_study",)),
    Doc("slurm-workers", "nasutil-search -m hydra/launcher=submitit_slurm hydra.launcher.gpus_per_node=1 "
        "hydra.launcher.timeout_min=600 worker=0,1,2,3,4,5,6,7 storage=postgresql study_name=shared n_trials=2000",
        "elsewhere", why=f"needs a SLURM cluster with GPUs, and {POSTGRES}; the test composes the launcher's config",
        covered_by=("tests/test_search_shared.py::test_slurm_launcher_config_composes",
                    "tests/test_search_shared.py::test_workers_started_by_hydras_joblib_launcher_share_one_study")),
    *[Doc(f"shared-cache-{part}", f"nasutil measure nb201 --archs {part}.txt --workers 8 --fast --json > {part}.jsonl",
          "elsewhere", why=f"{POSTGRES} in NASUTIL_CACHE_URL, and two machines; the test runs two measuring "
                           "processes on one cache in a throwaway server (given by --cache)",
          covered_by=("tests/test_evaluator_shared_cache.py::test_two_processes_measure_each_arch_once",
                      "tests/test_evaluator_shared_cache.py::test_unreachable_and_refused_caches_are_one_line_errors"))
      for part in ("part1", "part2")],
    # --- install and test: CI does these ---
    Doc("install", "python3 -m pip install -e .", "install", why=CI),
    Doc("install-test", "python3 -m pip install -e '.[test]'", "install", why=CI),
    Doc("install-postgres", "pip install -e '.[postgres]'", "install", why=CI + " (the test extra holds psycopg)"),
    Doc("test-suite", "python3 -m pytest -q -n auto --dist loadgroup", "install", why=CI),
]
BY_ID = {doc.id: doc for doc in TABLE}


def classification_problems(documented: dict[str, list[str]], table: list[Doc]) -> list[str]:
    problems = [f"{command!r} ({', '.join(where)}) is not in TABLE: classify it" for command, where in documented.items()
                if command not in {doc.command for doc in table}]
    problems += [f"TABLE's {doc.id} ({doc.command!r}) is no longer in {' or '.join(DOCS)}" for doc in table
                 if doc.command not in documented]
    seen: dict[str, str] = {}
    for doc in table:
        if doc.command in seen or doc.id in seen.values():
            problems.append(f"{doc.id}: {doc.command!r} classified twice")
        seen[doc.command] = doc.id
        if doc.kind not in KINDS:
            problems.append(f"{doc.id}: unknown kind {doc.kind!r}")
        if doc.kind in ("elsewhere",) and not (doc.why and doc.covered_by):
            problems.append(f"{doc.id}: an `elsewhere` command says why and which tests cover it")
        if doc.kind in ("costly", "install") and not doc.why:
            problems.append(f"{doc.id}: say why it is not run here")
        placeholders = [p for p in ("ARCH", "USER:PASSWORD@HOST", "my_space") if p in doc.command]
        if doc.kind == "cpu" and placeholders:
            problems.append(f"{doc.id}: holds placeholder(s) {placeholders}: `filled`, with what stands in for them")
    return problems


# --- running a command as documented ---------------------------------------------------------------

@dataclass
class Ran:
    cwd: Path
    result: subprocess.CompletedProcess


@pytest.fixture(scope="module")
def shell_env(tmp_path_factory) -> dict[str, str]:
    """PATH with `nasutil`, `nasutil-search` and `nasutil-codes` running this Python's modules."""
    bin_dir = tmp_path_factory.mktemp("bin")
    for name, module in MODULES.items():
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m {module} "$@"\n')
        script.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("NASUTIL_CACHE_URL", "NASUTIL_STORAGE_URL")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return env


def bash(line: str, cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    proc = subprocess.Popen(["bash", "-c", line], cwd=cwd, env={**env, "NASUTIL_CACHE_DIR": str(cwd / ".cache")},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the command and every worker it started
        out, err = proc.communicate()
        pytest.fail(f"{line!r} still ran after {timeout:.0f} s; it printed: {out[-1500:]} {err[-1500:]}")
    return subprocess.CompletedProcess(line, proc.returncode, out, err)


def as_run(doc: Doc) -> str:
    line = doc.command
    for placeholder, value in doc.fill:
        assert placeholder in line, (doc.id, placeholder)
        line = line.replace(placeholder, value)
    return line


@pytest.fixture(scope="module")
def ran(tmp_path_factory, shell_env):
    """Run an entry (once per module: a later entry may start from its folder) and keep what it did."""
    done: dict[str, Ran] = {}
    root = tmp_path_factory.mktemp("documented")

    def run(doc: Doc) -> Ran:
        if doc.id not in done:
            cwd = root / doc.id
            if doc.after:
                shutil.copytree(run(BY_ID[doc.after]).cwd, cwd, ignore=shutil.ignore_patterns(".cache"))
            else:
                cwd.mkdir()
            for line in doc.setup:
                made = bash(line.format(root=ROOT), cwd, shell_env, doc.timeout)
                assert made.returncode == 0, f"setup {line!r} failed: {made.stderr[-2000:]}"
            done[doc.id] = Ran(cwd, bash(as_run(doc), cwd, shell_env, doc.timeout))
        return done[doc.id]

    return run


def _params(*kinds: str):
    return [pytest.param(doc, id=doc.id) for doc in TABLE if doc.kind in kinds]


# --- the tests -------------------------------------------------------------------------------------

def test_every_documented_command_is_classified():
    documented = documented_commands()
    assert len(documented) >= 50, sorted(documented)  # the extraction found the blocks
    problems = classification_problems(documented, TABLE)
    assert problems == [], "\n".join(problems)


def test_the_classification_check_fails_on_a_new_or_a_stale_command():
    documented = documented_commands()
    planted = "Text.\n\n```bash\nexport X=1\nnasutil frobnicate --all \\\n    --fast   # new\n```\n"
    new = {**documented, **commands_in(planted, "README.md")}
    assert classification_problems(new, TABLE) == [
        "'nasutil frobnicate --all --fast' (README.md:5) is not in TABLE: classify it"]
    gone = {c: w for c, w in documented.items() if c != "nasutil spaces"}
    assert classification_problems(gone, TABLE) == [
        "TABLE's spaces ('nasutil spaces') is no longer in README.md or docs/search.md"]


def test_the_extraction_splits_lists_and_keeps_quotes_and_loops():
    text = ("```bash\npip install -e . && nasutil-search   # a comment\n"
            "nasutil describe x '|a~0|#b' ; nasutil spaces\n"
            "nasutil measure a > a.jsonl &   # on one machine\n"
            "for i in 1 2; do nasutil-search w$i & done; wait\n"
            "cmd 2>&1 | tee log\n```\n")
    assert list(commands_in(text, "X")) == ["pip install -e .", "nasutil-search", "nasutil describe x '|a~0|#b'",
                                            "nasutil spaces", "nasutil measure a > a.jsonl",
                                            "for i in 1 2; do nasutil-search w$i & done; wait", "cmd 2>&1 | tee log"]


@pytest.mark.parametrize("doc", _params("cpu", "filled"))
def test_a_documented_command_runs_on_a_cpu(doc, ran):
    done = ran(doc)
    result = done.result
    assert result.returncode == 0, f"{result.args!r} exited {result.returncode}: {result.stderr[-3000:]}"
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    if doc.check is not None:
        doc.check(done.cwd, result)


@pytest.mark.parametrize("doc", _params("cuda"))
def test_a_documented_cuda_command_is_a_one_line_error_without_cuda(doc, ran):
    import torch

    if torch.cuda.is_available():
        pytest.skip("there is a GPU here: the command would do its work (minutes) rather than refuse")
    result = ran(doc).result
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, f"exit {result.returncode}: {result.stderr[-3000:]}"
    assert len(lines) == 1 and re.search(r"CUDA|GPU", lines[0]), result.stderr[-3000:]
    assert "Traceback" not in result.stderr


def _cost_rows() -> dict[str, dict]:
    import csv

    rows = {}
    for path in sorted(COST_RESULTS.glob("*.csv")):
        with path.open(newline="") as fh:
            rows.update({r["command"]: {**r, "file": path.name} for r in csv.DictReader(fh)})
    return rows


@pytest.mark.parametrize("doc", _params("costly"))
def test_a_costly_documented_command_ran_in_command_cost(doc):
    commands = COST_SCRIPT.COMMANDS
    assert doc.command in commands, f"add {doc.command!r} to benchmarks/command_cost.py's COMMANDS and run it"
    row = _cost_rows().get(doc.command)
    assert row is not None, f"no row for {doc.command!r} in {COST_RESULTS}: run benchmarks/command_cost.py --only " \
                            f"{commands.index(doc.command)}"
    assert row["gpu"] == "none", f"{doc.command!r} was timed on {row['gpu']}, not on a CPU machine"
    if not doc.gpu:
        assert row["exit_code"] == "0", f"{doc.command!r} exited {row['exit_code']} ({row['file']}): {row['error']}"
        return
    # a GPU command: what it did on the CPU is stated in README.md, and the docs say it is for a GPU
    assert row["error"], f"{doc.command!r} ended on the CPU: it is no longer a GPU-only command"
    readme = (ROOT / "README.md").read_text()
    assert f"| `{doc.command}` | {float(row['wall_s']):,.0f} s |" in readme and row["error"] in readme, doc.command
    marked = [line for path in ("README.md", "docs/search.md") for line in (ROOT / path).read_text().splitlines()
              if line.startswith(doc.command + " ") or line == doc.command]
    assert marked and all("GPU" in line for line in marked), marked


def test_command_cost_runs_documented_commands_only():
    module = COST_SCRIPT
    documented = documented_commands()
    assert [c for c in module.COMMANDS if c not in documented] == []
    assert [c for c in _cost_rows() if c not in module.COMMANDS] == []


@pytest.mark.parametrize("doc", _params("elsewhere"))
def test_a_command_that_needs_a_service_names_the_tests_that_cover_it(doc):
    for node in doc.covered_by:
        path, name = node.split("::")
        assert re.search(rf"^def {name}\(", (ROOT / path).read_text(), re.MULTILINE), f"{node} is not a test"


@pytest.mark.parametrize("doc", _params("install"))
def test_an_install_command_is_what_ci_runs(doc):
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert set(MODULES) <= set(project["scripts"])  # the commands the docs run are installed
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python3 -m pip install -e '.[test]' && python3 -m pytest -q -n auto --dist loadgroup" in ci
    extra = re.search(r"\.\[(\w+)\]", doc.command)
    if extra:
        assert extra.group(1) in project["optional-dependencies"], doc.command
        test_extra = " ".join(project["optional-dependencies"]["test"])
        for requirement in project["optional-dependencies"][extra.group(1)]:  # CI's install brings it too
            assert re.split(r"[\[<>=]", requirement)[0] in test_extra, requirement
