"""The README's quick start and CI stay in step."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _quick_start_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = section.split("```bash\n")[1:]
    return [block.split("```", 1)[0].strip() for block in blocks]


def test_quick_start_has_two_commands_and_ci_runs_the_test_one():
    commands = _quick_start_commands()
    assert len(commands) == 2 and all("\n" not in c for c in commands)
    ci = (ROOT / ".ci" / "run").read_text()
    assert commands[1] in ci.splitlines()


def test_bundled_data_keeps_its_attribution():
    notice = (ROOT / "NOTICE").read_text()
    data_readme = (ROOT / "nasutil" / "data" / "README.md").read_text()
    for text in (notice, data_readme):
        assert "NAS-Bench-201" in text and "NATS-Bench" in text and "MIT" in text


def test_every_package_is_declared_for_installation():
    import tomllib

    declared = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.relative_to(ROOT).parent.parts) for p in (ROOT / "nasutil").rglob("__init__.py")}
    assert found <= declared, found - declared
