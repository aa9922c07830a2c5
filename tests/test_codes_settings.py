"""The codes settings are declared once (`nasutil.codes.settings`): the `nasutil codes train` flags are made
from the schema, conf/codes.yaml (the settings of `nasutil-codes`) holds the same names in the same order with
the same defaults, and both front doors read their values through one function."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
from pathlib import Path

import pytest
import yaml

from nasutil.codes import settings as schema
from nasutil.codes.settings import CodeSpec, JobSettings, RunSettings, from_values, run_folder_name, settings
from nasutil.errors import NasutilError

ROOT = Path(__file__).resolve().parents[1]
CODES_YAML = ROOT / "conf" / "codes.yaml"


def yaml_drift(path: Path = CODES_YAML) -> list[str]:
    """How the settings of a `nasutil-codes` config file differ from the schema's: a name missing or extra, a
    default that differs (as the file spells it, interpolations unresolved), or another order."""
    written = {key: value for key, value in yaml.safe_load(path.read_text()).items() if key != "hydra"}
    declared = {s.name: s.yaml for s in schema.settings()}
    drift = [f"{name}: in the schema, not in {path.name}" for name in declared if name not in written]
    drift += [f"{name}: in {path.name}, not in the schema" for name in written if name not in declared]
    drift += [f"{name}: {path.name} says {written[name]!r}, the schema {declared[name]!r}"
              for name in declared if name in written and written[name] != declared[name]]
    if not drift and list(written) != list(declared):
        drift.append(f"{path.name} lists the settings in another order than the schema: {list(written)}")
    return drift


def test_conf_codes_yaml_holds_the_schemas_settings_and_defaults():
    assert yaml_drift() == []


def test_the_drift_check_sees_a_planted_drift(tmp_path, monkeypatch):
    """Both ways: the schema's default changed (monkeypatched), and the file's default changed or a key added."""
    changed = tuple(dataclasses.replace(s, default=31, yaml=31) if s.name == "epochs" else s for s in settings())
    monkeypatch.setattr(schema, "settings", lambda: changed)
    assert yaml_drift() == ["epochs: codes.yaml says 30, the schema 31"]
    monkeypatch.undo()
    text = CODES_YAML.read_text()
    planted = tmp_path / "codes.yaml"
    planted.write_text(text.replace("\nepochs: 30 ", "\nepochs: 40 "))
    assert yaml_drift(planted) == ["epochs: codes.yaml says 40, the schema 30"]
    planted.write_text(text.replace("\nseed: 0\n", "\nseed: 0\nlr: 0.1\n"))
    assert yaml_drift(planted) == ["lr: in codes.yaml, not in the schema"]
    planted.write_text(text.replace("\nseed: 0\n", "\n"))
    assert yaml_drift(planted) == ["seed: in the schema, not in codes.yaml"]


def test_every_setting_is_declared_once_on_a_dataclass_with_its_metadata():
    names = [s.name for s in settings()]
    assert names == list(schema.ORDER) and len(set(names)) == len(names)
    owned = {f.name for cls in (CodeSpec, RunSettings, JobSettings) for f in dataclasses.fields(cls)} - {"code"}
    assert owned == set(names)
    for s in settings():
        field = {f.name: f for f in dataclasses.fields(s.owner)}[s.name]
        assert field.default == s.default  # the dataclass's own default is the schema's
        for choice in s.choices or ():
            assert choice in s.help, f"{s.name}: its help does not name {choice!r}"
    assert RunSettings() == RunSettings(code=CodeSpec())  # defaults construct, and the code is nested


def _train_parser() -> argparse.ArgumentParser:
    from nasutil.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    codes = commands.choices["codes"]
    actions = next(a for a in codes._actions if isinstance(a, argparse._SubParsersAction))
    return actions.choices["train"]


def test_the_train_flags_are_made_from_the_schema():
    flags = {a.dest: a for a in _train_parser()._actions}
    for s in settings():
        if not s.flag:
            assert s.name not in flags
            continue
        action = flags[s.name]
        assert action.option_strings == [f"--{s.name.replace('_', '-')}"] and action.default == s.default
        assert (action.help or "").startswith(s.help or "")
    assert {"out", "json"} <= set(flags) and not {"progress", "runs"} & set(flags)
    args = _train_parser().parse_args(["--out", "x", "--k", "3", "--base-epochs", "3", "--encoder", "sum"])
    run, job = from_values({s.name: getattr(args, s.name) for s in settings() if s.flag})
    assert run == RunSettings(code=CodeSpec(k=3, encoder="sum"), base_epochs=3) and job == JobSettings()


def test_a_new_schema_setting_becomes_a_flag(monkeypatch):
    """Nothing but the schema lists the flags: a setting added there is a flag of `nasutil codes train`."""
    from nasutil.cli import codes_command

    extra = schema.Setting("warmup", RunSettings, 3, "warm-up epochs", None, 0, True, 3)
    monkeypatch.setattr(codes_command, "settings", lambda: (*settings(), extra))
    args = _train_parser().parse_args(["--out", "x", "--warmup", "5"])
    assert args.warmup == 5
    with pytest.raises(SystemExit):
        _train_parser().parse_args(["--out", "x", "--warmup", "-1"])  # a whole number >= 0


@pytest.mark.parametrize("command", [["codes", "train", "--help"]])
def test_train_help_lists_every_flag_setting(capsys, command):
    from nasutil.cli import main

    with pytest.raises(SystemExit) as stop:
        main(command)
    out = capsys.readouterr().out
    assert stop.value.code == 0
    for s in settings():
        assert (f"--{s.name.replace('_', '-')}" in out) == s.flag
    assert "queries per parity group (default 2)" in out and "cpu, cuda, cuda:N or auto (default)" in out


def test_the_hydra_app_help_lists_every_setting(capsys):
    from nasutil.cli.codes_app import main

    try:
        code = main(["--help"])
    except SystemExit as stop:
        code = stop.code
    out = capsys.readouterr().out
    assert code in (0, None)
    for s in settings():
        assert f"\n{s.name}:" in out, s.name


def test_values_are_read_by_one_function_for_both_front_doors():
    run, job = from_values({"k": 4, "encoder": "sum", "base": 5, "data_dir": None, "progress": False})
    assert run.code == CodeSpec(k=4, encoder="sum") and run.base == "5"  # text taken as text
    assert job == JobSettings(progress=False) and job.data_dir is None
    with pytest.raises(NasutilError, match=r"unknown setting\(s\) lr, momentum \(settings: base, dataset"):
        from_values({"lr": 1, "momentum": 2})
    with pytest.raises(NasutilError, match="progress must be true or false, got 'maybe'"):
        from_values({"progress": "maybe"})


def test_whole_number_settings_are_checked_against_their_least_value():
    for name, least in (("seed", 0), ("base_epochs", 1), ("epochs", 1), ("train_images", 1)):
        with pytest.raises(NasutilError, match=f"{name} must be a whole number >= {least}, got -1"):
            RunSettings(dataset="digits", **{name: -1}).check()
    RunSettings(dataset="digits", train_images=None, seed=0, base_epochs=1).check()


@pytest.mark.parametrize("name, most", [("batch_size", 65_536), ("epochs", 100_000), ("base_epochs", 100_000),
                                        ("seed", 2**31 - 1), ("train_images", 2**31 - 1)])
def test_whole_number_settings_are_checked_against_their_largest_value(name, most):
    """A batch of 10**20 overflowed inside torch after the run folder was made: a traceback, exit 1."""
    with pytest.raises(NasutilError, match=f"^{name} must be at most {most:,}, got {10**20}$"):
        RunSettings(dataset="digits", **{name: 10**20}).check()
    RunSettings(dataset="digits", **{name: most if name != "train_images" else 10}).check()


def test_a_run_trains_its_base():
    """base_epochs=0 once trained and scored a code of an untrained base (normal-mode accuracy at chance) and
    exited 0: a run folder's base is trained in it, so there is no trained base for 0 epochs to reuse."""
    with pytest.raises(NasutilError, match="^base_epochs must be a whole number >= 1, got 0$"):
        RunSettings(dataset="digits", base_epochs=0).check()
    with pytest.raises(NasutilError, match="^base_epochs must be a whole number >= 1, got 0$"):
        from_values({"dataset": "digits", "base_epochs": 0})[0].check()


@pytest.mark.parametrize("owner, settings, message", [
    (RunSettings, {"base": None}, "base must be text, got None"),
    (RunSettings, {"base": 3}, "base must be text, got 3"),
    (RunSettings, {"code": None}, "code must be a CodeSpec, got None"),
    (RunSettings, {"code": {"k": 2}}, "code must be a CodeSpec, got {'k': 2}"),
    (RunSettings, {"dataset": None}, "unknown dataset None (choose from digits, "),
    (RunSettings, {"epochs": None}, "epochs must be a whole number >= 1, got None"),
    (RunSettings, {"batch_size": "64"}, "batch_size must be a whole number >= 1, got '64'"),
    (RunSettings, {"test_images": 2.5}, "test_images must be a whole number >= 1, got 2.5"),
    (CodeSpec, {"parity": None}, "parity must be text, got None"),
    (CodeSpec, {"parity": 3}, "parity must be text, got 3"),
    (CodeSpec, {"encoder": ["mlp"]}, "unknown encoder ['mlp'] (choose from mlp, conv, sum, concat)"),
    (CodeSpec, {"loss": None}, "unknown loss None (choose from mse, kl)"),
    (JobSettings, {"device": None}, "device must be text, got None"),
    (JobSettings, {"data_dir": 3}, "data_dir must be text, got 3"),
    (JobSettings, {"runs": None}, "runs must be text, got None"),
    (JobSettings, {"progress": 1}, "progress must be true or false, got 1"),
])
def test_every_setting_of_the_wrong_kind_is_refused_naming_it(owner, settings, message):
    """base=None or parity=3 once failed with "argument of type 'NoneType' is not iterable", code=None with
    "'NoneType' object has no attribute 'check'"; a job's device of None failed only when training began."""
    if owner is CodeSpec:
        settings = {"code": CodeSpec(**settings)}
    built = JobSettings(**settings) if owner is JobSettings else RunSettings(**{"dataset": "digits", **settings})
    with pytest.raises(NasutilError) as raised:
        built.check()
    assert str(raised.value).startswith(message)


def test_run_folder_names_stay_what_they_were():
    """The name's digest covers the settings it covered before the schema (every run setting but epochs), so
    a run folder made before is continued, not started again."""
    before = ("dataset", "base", "k", "r", "encoder", "decoder", "parity", "loss", "seed", "base_epochs",
              "batch_size", "train_images", "test_images")
    assert sorted(schema.named_settings()) == sorted(before)
    values = {s.name: s.default for s in settings()} | {"base": "nb201:|x~0|", "k": 3}
    digest = hashlib.sha1(json.dumps({k: values[k] for k in before}, sort_keys=True).encode()).hexdigest()[:8]
    name = run_folder_name(values)
    assert name == f"fashion_mnist/{schema.slug('nb201:|x~0|')}/k3-r1-mlp-mlp-base-mse-s0-{digest}"
    assert run_folder_name(values | {"epochs": 99, "device": "cpu"}) == name  # growable and job settings: same folder


def test_the_schema_and_the_command_list_load_without_torch():
    import subprocess
    import sys

    code = ("import sys\nfrom nasutil.codes import RunSettings, settings\nfrom nasutil.cli import build_parser\n"
            "build_parser(); RunSettings(); settings.settings()\nprint('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr[-2000:]
