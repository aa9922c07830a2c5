"""The import direction of docs/architecture.md holds: no module imports from a layer above its own."""

from __future__ import annotations

import ast
import re
import sys
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


# ---------------------------------------------------------------- dependencies run one way

def module_edges(path: Path, known: set[str]) -> set[str]:
    """The modules `path` imports, at module level or in a function: `from a import b` is an import of the
    module `a.b` where there is one, else of `a` (a package's face)."""
    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in known else resolve(node.module))
        elif isinstance(node, ast.Import):
            found.update(resolve(alias.name) for alias in node.names)
    return {name for name in found if name is not None}


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one node (Tarjan), each a set of nodes."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def module_graph(paths: list[Path]) -> dict[str, set[str]]:
    names = {module_name(p): p for p in paths}
    return {name: module_edges(path, set(names)) - {name} for name, path in names.items()}


def package_of(name: str, table: dict[str, int], packages: set[str]) -> str:
    """A module's unit in the package graph: the package that holds it, or the module itself where the
    layer table places it apart from its package (`nasutil.search.__main__` is a front door)."""
    if name in table and name not in packages:
        return name
    holder = name if name in packages else name.rpartition(".")[0]
    return holder or name


def package_graph(graph: dict[str, set[str]], table: dict[str, int]) -> dict[str, set[str]]:
    packages = {module_name(p.parent / "__init__.py") for p in sources() if p.name == "__init__.py"}
    out: dict[str, set[str]] = {}
    for name, targets in graph.items():
        unit = package_of(name, table, packages)
        out.setdefault(unit, set()).update(package_of(t, table, packages) for t in targets)
        out[unit].discard(unit)
    return out


def test_no_module_cycle():
    found = set(cycles(module_graph(sources())))
    assert not found, f"import cycles between modules: {sorted(map(sorted, found))}"


def test_no_package_cycle():
    found = cycles(package_graph(module_graph(sources()), layers()))
    assert not found, f"import cycles between packages: {sorted(map(sorted, found))}"


def test_the_cycle_check_sees_a_planted_cycle(tmp_path, monkeypatch):
    """Two modules of a new package importing each other, one of them inside a function; and two packages
    importing each other through modules that are not in a cycle themselves."""
    package = tmp_path / "nasutil" / "planted"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from nasutil.planted import b\n")
    (package / "b.py").write_text("def f():\n    from nasutil.planted.a import thing\n")
    other = tmp_path / "nasutil" / "other"
    other.mkdir()
    (other / "__init__.py").write_text("")
    (other / "c.py").write_text("from nasutil.planted import d\n")
    (package / "d.py").write_text("")
    (package / "e.py").write_text("from nasutil.other.f import g\n")
    (other / "f.py").write_text("")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    paths = sorted(tmp_path.rglob("*.py"))
    graph = module_graph(paths)
    assert cycles(graph) == [frozenset({"nasutil.planted.a", "nasutil.planted.b"})]
    monkeypatch.setattr(sys.modules[__name__], "sources", lambda: paths)
    assert frozenset({"nasutil.planted", "nasutil.other"}) in cycles(package_graph(graph, {}))
