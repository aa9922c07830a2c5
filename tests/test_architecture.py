"""The import direction of docs/architecture.md holds: no module imports from a layer above its own."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TABLE_ROW = re.compile(r"^\|\s*(\d+)\s*\|[^|]*\|([^|]*)\|")


def layers() -> dict[str, int]:
    """Package or module name -> layer number, from the table in docs/architecture.md."""
    out = {}
    for line in (ROOT / "docs" / "architecture.md").read_text().splitlines():
        match = TABLE_ROW.match(line)
        if match:
            for name in re.findall(r"`([\w.]+)`", match.group(2)):
                out[name] = int(match.group(1))
    return out


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[0] == "search_spaces":
        parts[0] = "nasutil_search_spaces"
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(name: str, table: dict[str, int]) -> int | None:
    """The layer of the longest table entry that is `name` or a package holding it; the top-level package
    `nasutil` stands for its own `__init__` only, so every module below it must be placed by name."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        entry = ".".join(parts[:end])
        if entry in table and (entry != "nasutil" or end == len(parts)):
            return table[entry]
    return None


def imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)  # `from nasutil import search`
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {n for n in found if n.split(".")[0] in ("nasutil", "nasutil_search_spaces")}


def sources() -> list[Path]:
    return sorted((ROOT / "nasutil").rglob("*.py")) + sorted((ROOT / "search_spaces").rglob("*.py"))


def test_every_module_has_a_layer():
    table = layers()
    assert table, "docs/architecture.md has no layer table"
    unplaced = [module_name(p) for p in sources() if layer_of(module_name(p), table) is None]
    assert not unplaced, f"add these to the layer table of docs/architecture.md: {unplaced}"


def test_no_module_imports_from_a_higher_layer():
    table = layers()
    upward = []
    for path in sources():
        own = layer_of(module_name(path), table)
        for name in imports(path):
            other = layer_of(name, table)
            if other is not None and other > own:
                upward.append(f"{module_name(path)} (layer {own}) imports {name} (layer {other})")
    assert not upward, "\n".join(upward)


def test_the_check_sees_an_upward_import(tmp_path):
    """The checker itself: a lower-layer module importing the CLI is reported."""
    table = layers()
    assert layer_of("nasutil.evaluator.worker", table) < layer_of("nasutil.cli.measure_command", table)
    assert layer_of("nasutil.search.__main__", table) == layer_of("nasutil.cli", table)
    assert layer_of("nasutil.colocation.engine", table) is None  # a new package must be placed in the table
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from nasutil.cli import main\n")
    assert imports(bad) == {"nasutil.cli", "nasutil.cli.main"}
