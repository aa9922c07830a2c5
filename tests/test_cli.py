"""The CLI as a user meets it: listing, sampling, describing, and one-line errors for bad input."""

import json
import os
from pathlib import Path

import pytest

NB201_CELL = "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|"


def test_spaces_lists_the_builtins(cli):
    result = cli("spaces", "--json")
    assert result.returncode == 0, result.stderr
    names = {json.loads(line)["name"] for line in result.stdout.splitlines()}
    assert {"nb201", "nb101", "darts", "mbconv", "nni"} <= names
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert not [r for r in rows if r["description"].startswith("unavailable")]


def test_sample_is_seeded_and_parseable(cli):
    first = cli("sample", "nb201", "-n", "5", "--seed", "7")
    again = cli("sample", "nb201", "-n", "5", "--seed", "7")
    other = cli("sample", "nb201", "-n", "5", "--seed", "8")
    assert first.returncode == 0 and first.stdout == again.stdout != other.stdout
    assert len(first.stdout.splitlines()) == 5


@pytest.mark.parametrize("space, size", [("nb201", "15,625"), ("nb101", "423,624")])
def test_more_distinct_architectures_than_a_space_holds_is_refused_before_drawing(cli, space, size):
    """nb101 once drew for hours (50,000 printed in two minutes) before it could tell; nb201 after printing all."""
    result = cli("sample", space, "--unique", "-n", "500000", timeout=60)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip() == (f"nasutil: error: space {space!r} has only {size} distinct architectures; "
                                     f"--unique cannot print 500,000")


def test_describe_json_reports_flops_and_layers(cli):
    result = cli("describe", "nb201", NB201_CELL, "--json")
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["arch"] == NB201_CELL
    assert info["flops_per_image"] == sum(layer["flops"] for layer in info["layers"]) > 0
    assert info["params"] > 0 and len(info["layers"]) > 50


def test_describe_table(cli):
    result = cli("describe", "nb201", NB201_CELL, "--top", "3")
    assert result.returncode == 0, result.stderr
    assert "FLOPs per image" in result.stdout and "top 3 of" in result.stdout


BAD_INPUTS = [
    ("describe", "nb201", ""),
    ("describe", "nb201", "|nor_conv_3x3~0|+|nor_conv_3x3~0|"),
    ("describe", "nb201", "|conv_9x9~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|none~0|none~1|none~2|"),
    ("describe", "nb201", "|none~0|+|none~0|none~1|+|none~0|none~1|none~2|+|none~0|"),
    ("describe", "nb101", "ops=conv3x3-bn-relu;adj=01/00/11"),
    ("describe", "nb101", "ops=input,conv3x3-bn-relu,output;adj=011/001/100"),
    ("describe", "darts", "Genotype(normal=[('sep_conv_3x3', 0)]"),
    ("describe", "darts", "__import__('os').system('true')"),
    ("describe", "mbconv", "k3e6"),
    ("describe", "nni", "not json"),
    ("describe", "nosuchspace", "x"),
    ("sample", "nosuchspace"),
    ("sample", "nb201", "-n", "0"),
    ("sample", "nb201", "--seed", "abc"),
    ("describe", "nb201", NB201_CELL, "--input-size", "-1"),
    ("describe", "nb201", NB201_CELL, "--input-size", "3"),
    ("describe", "nb201", NB201_CELL, "--num-classes", "10000000000"),
    ("predict", "nb201", "--sample", "99999999999999"),
    ("nosuchcommand",),
    (),
]


@pytest.mark.parametrize("args", BAD_INPUTS, ids=lambda a: " ".join(a)[:60] or "no-args")
def test_bad_input_gives_one_line_and_exit_2(cli, args):
    result = cli(*args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert lines[0].startswith("nasutil")


def test_outputs_that_would_overwrite_an_input_are_refused(cli, tmp_path):
    archs = tmp_path / "archs.txt"
    archs.write_text(NB201_CELL + "\n")
    result = cli("predict", "nb201", "--archs", str(archs), "--table", str(archs))
    assert result.returncode == 2 and "--table" in result.stderr and "one of this command's inputs" in result.stderr
    assert archs.read_text() == NB201_CELL + "\n"
    measurements = tmp_path / "runs"
    measurements.mkdir()
    (measurements / "a.jsonl").write_text('{"space": "nb201"}\n')
    result = cli("profile", "fit", str(measurements), "--out", str(measurements / "a.jsonl"))
    assert result.returncode == 2 and "one of this command's inputs" in result.stderr
    assert (measurements / "a.jsonl").read_text() == '{"space": "nb201"}\n'


def test_an_arch_file_with_a_byte_order_mark_is_read(cli, tmp_path):
    archs = tmp_path / "archs.txt"
    archs.write_bytes(b"\xef\xbb\xbf" + NB201_CELL.encode() + b"\n")
    result = cli("predict", "nb201", "--archs", str(archs), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[0])["arch"] == NB201_CELL


def test_an_output_folder_that_cannot_be_made_is_one_line(cli, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("kept")
    result = cli("codes", "train", "--out", str(blocker), "--dataset", "digits", "--device", "cpu", "--epochs", "1",
                 "--base-epochs", "1", "--train-images", "64", "--test-images", "64")
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"cannot use '{blocker}'" in lines[0] and blocker.read_text() == "kept"


@pytest.mark.parametrize("args, said", [
    (("--device", "cpu"), "--mps shares a CUDA device among the workers; it needs --device cuda"),
    (("--device", "cuda", "--in-process"), "--mps shares the device among worker processes; drop --in-process"),
    (("--device", "cuda", "--cache", "{tmp}/m.db"), "--mps keeps its readings out of the cache (on an H100 they read 5% "
                                              "above a plain loop without MPS); drop --cache"),
])
def test_mps_refuses_what_it_cannot_share_in_one_line(cli, tmp_path, args, said):
    """Checked before any worker or daemon starts (these run on a machine without a GPU or MPS)."""
    result = cli("measure", "nb201", NB201_CELL, "--mps", "--fast", *(a.format(tmp=tmp_path) for a in args))
    assert result.returncode == 2 and result.stderr.strip() == f"nasutil: error: {said}", result.stderr
    assert not (tmp_path / "m.db").exists()


def test_a_cache_url_that_is_no_url_is_refused(cli, tmp_path):
    result = cli("measure", "nb201", NB201_CELL, "--device", "cpu", "--fast", "--in-process",
                 env={"NASUTIL_CACHE_URL": "garbage"})
    assert result.returncode == 2 and "NASUTIL_CACHE_URL must be a database URL" in result.stderr
    assert not Path("garbage").exists()


def test_measurements_that_all_fail_exit_1_and_say_so(cli, tmp_path):
    """A failed measurement is a row (its error in it), not a user error: the run exits 1 where every one
    failed, and says how many failed on stderr, as it does where only some did."""
    result = cli("measure", "nb201", "--sample", "2", "--device", "cpu", "--timeout", "0.5", "--no-cache",
                 "--out", str(tmp_path / "rows.jsonl"))
    assert result.returncode == 1, result.stderr
    assert "2 of 2 measurements failed" in result.stderr and "Traceback" not in result.stderr
    rows = (tmp_path / "rows.jsonl").read_text().splitlines()
    assert len(rows) == 2 and all('"status": "failed"' in row and "timed out" in row for row in rows)


def test_listing_spaces_and_predicting_load_neither_torch_nor_scikit_learn():
    """They answer in well under a second: a space lists its own ops, and a profile holds fitted trees."""
    import subprocess
    import sys

    code = ("import sys\nfrom nasutil.cli import main\nassert main(['spaces', '--json']) == 0\n"
            "assert main(['predict', 'nb201', '--sample', '3', '--json']) == 0\n"
            "assert main(['sample', 'darts', '-n', '2']) == 0\n"
            "print('LOADED', sorted(m for m in ('torch', 'sklearn', 'nni') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "LOADED []"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full, a device that is always full")
@pytest.mark.parametrize("args", [("predict", "nb201", "--sample", "3", "--table", "/dev/full"),
                                  ("measure", "nb201", "--sample", "1", "--device", "cpu", "--in-process",
                                   "--no-cache", "--out", "/dev/full")])
def test_a_full_disk_is_one_line(cli, args):
    """A write the disk refuses (ENOSPC) once ended in a traceback from the file's close."""
    r = cli(*args)
    assert r.returncode == 2 and r.stderr.strip() == "nasutil: error: cannot write the output: No space left on device"


def test_an_empty_cache_is_refused_and_a_tiny_budget_is_not_written_as_zero(cli):
    """--cache '' once fell back to the default cache without a word; a budget of 1e-9 GB read "0.0 MiB"."""
    r = cli("measure", "nb201", "--sample", "1", "--device", "cpu", "--cache", "")
    assert r.returncode == 2 and "--cache: must name a file or a URL" in r.stderr
    r = cli("colocate", "nb201", "--sample", "2", "--memory-budget-gb", "1e-9", "--pack", "2", "--device", "cpu")
    assert r.returncode == 2 and "budget of 1e-06 MiB" in r.stderr, r.stderr
