"""The library's structure: floors that every import follows (deferred imports and builders/ included), no import cycle
between vhx modules, thin package faces, private names kept home."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "vhx"


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """vhx module -> the vhx modules it imports anywhere in its body (top level or inside functions).

    A package's own re-exports of its submodules (``vhx.scoring`` -> ``vhx.scoring.metrics``) are
    edges too: a submodule importing its package back would make a real cycle.
    """
    files = {_module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.split(".")[0] == "vhx":
                deps.add(node.module)
                deps.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level > 0:
                package = name.rsplit(".", node.level - (1 if path.name == "__init__.py" else 0))[0]
                target = f"{package}.{node.module}" if node.module else package
                deps.add(target)
                deps.update(f"{target}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name.split(".")[0] == "vhx")
        graph[name] = {d for d in deps if d in files and d != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for dep in sorted(graph.get(node, ())):
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in on_stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def test_cycle_finder_finds_a_planted_cycle(tmp_path: Path):
    pkg = tmp_path / "vhx"
    (pkg / "models").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "models" / "__init__.py").write_text("")
    (pkg / "models" / "hf.py").write_text("def f():\n    from vhx.predict import run\n")
    (pkg / "predict.py").write_text("from vhx.models.hf import f\n")
    (pkg / "runtime.py").write_text("import os\n")
    assert cycles(import_graph(pkg)) == [["vhx.models.hf", "vhx.predict"]]


@pytest.mark.parametrize("module", ["vhx.models.hf", "vhx.models.base", "vhx.models.openai_api", "vhx.predict"])
def test_no_import_cycle_in_vhx(module: str):
    graph = import_graph()
    assert module in graph
    assert cycles(graph) == []


def test_every_vhx_command_the_docs_name_exists():
    """Each `vhx COMMAND` in a code span or code block of the README, the docs and the card templates is a subcommand."""
    import argparse
    import re

    from vhx.cli import build_parser

    parser = build_parser()
    commands = set(next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices)
    named: dict[str, set[str]] = {}
    for path in [ROOT.parent / "README.md", *sorted((ROOT.parent / "docs").glob("*.md")), *sorted((ROOT.parent / "hub_cards").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        spans = re.findall(r"`([^`\n]+)`", text)
        blocks = [line.strip() for block in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S) for line in block.splitlines()]
        for snippet in spans + blocks:
            for m in re.finditer(r"(?:^|[;&|(]\s*)vhx ([a-z][a-z-]*)", snippet.strip()):
                named.setdefault(m.group(1), set()).add(path.name)
    assert named, "no vhx command found in the docs"
    unknown = {c: sorted(where) for c, where in named.items() if c not in commands}
    assert not unknown, f"commands the docs name that `vhx` does not have: {unknown}"


def test_every_test_the_docs_cite_exists():
    """A claim backed by `test_file.py::test_name` (or `::test_name` after one in the same line) names a real test."""
    import re

    cited, missing = 0, []
    for path in [ROOT.parent / "README.md", *sorted((ROOT.parent / "docs").glob("*.md")), ROOT.parent / "benchmarks" / "README.md"]:
        for line in path.read_text(encoding="utf-8").splitlines():
            current = None
            for m in re.finditer(r"(test_[a-z0-9_]+\.py)?::(test_[a-z0-9_]+)", line):
                current = m.group(1) or current
                if current is None:
                    continue
                cited += 1
                source = ROOT.parent / "tests" / current
                if not source.is_file() or not re.search(rf"^def {m.group(2)}\(", source.read_text(encoding="utf-8"), re.M):
                    missing.append(f"{path.name}: {current}::{m.group(2)}")
    assert cited > 10, "no test citations found"
    assert not missing, missing


#: The floors of the house, bottom up: a module imports only from its own package or from packages on lower floors.
#: builders/ is installed as ``vhx.builders``; ``metrics/``, ``recipes/`` and ``hub_cards/`` sit with the entry points.
FLOORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ground", ("vhx", "vhx.errors", "vhx.schema", "vhx.cases", "vhx.runtime", "vhx.locking", "vhx.jsonl", "vhx.images",
                "vhx.api_client", "vhx.parsing")),
    ("text and pixels", ("vhx.negation", "vhx.perturbations")),
    ("models", ("vhx.models", "vhx.llm", "vhx.judge")),
    ("benchmarks", ("vhx.builders",)),
    ("folders", ("vhx.hub",)),
    ("runs", ("vhx.predict", "vhx.run_state")),
    ("attacks", ("vhx.adversarial",)),
    ("scores", ("vhx.scoring",)),
    ("reports", ("vhx.report", "vhx.gallery", "vhx.review", "vhx.lmms_export")),
    ("expansion", ("vhx.pipeline",)),
    ("training", ("vhx.finetune",)),
    ("offline world", ("vhx.mini",)),
    ("study", ("vhx.replicate",)),
    ("entry", ("vhx.plugins", "vhx.cli", "vhx.metrics", "vhx.recipes", "vhx.hub_cards")),
)
FLOOR = {package: i for i, (_, packages) in enumerate(FLOORS) for package in packages}
CHECKOUT = ROOT.parent
#: Folders of the checkout installed inside the vhx namespace (pyproject's package-dir).
INSTALLED_AS = {"builders": "vhx.builders", "metrics": "vhx.metrics", "recipes": "vhx.recipes", "hub_cards": "vhx.hub_cards"}


def library_files(checkout: Path = CHECKOUT) -> dict[str, Path]:
    """Every library module by its installed name: vhx/ and builders/ (as vhx.builders)."""
    files = {_module_name(p, checkout / "vhx"): p for p in (checkout / "vhx").rglob("*.py")}
    for p in (checkout / "builders").rglob("*.py"):
        parts = ("vhx", *p.relative_to(checkout).with_suffix("").parts)
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return files


def imports_of(name: str, path: Path) -> list[tuple[int, str, list[str]]]:
    """``(line, module, names)`` of every import of ``path`` (module ``name``), inside functions too, relative ones
    resolved, ``builders`` read as ``vhx.builders``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            out.append((node.lineno, module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name, []) for a in node.names]
    return [(line, INSTALLED_AS.get(m.split(".")[0], m.split(".")[0]) + m[len(m.split(".")[0]):], names)
            for line, m, names in out]


def package_of(module: str) -> str:
    return ".".join(module.split(".")[:2])


def floor_breaks(checkout: Path = CHECKOUT) -> list[str]:
    """Each import that reaches up a floor (or into a package no floor holds), as ``file:line: a (floor) imports b (floor)``."""
    breaks = []
    for name, path in sorted(library_files(checkout).items()):
        for line, module, _ in imports_of(name, path):
            if module.split(".")[0] != "vhx" or package_of(module) == package_of(name):
                continue
            a, b = package_of(name), package_of(module)
            where = f"{path.relative_to(checkout)}:{line}: {name}"
            if a not in FLOOR or b not in FLOOR:
                breaks.append(f"{where} imports {module}: a package no floor holds (add it to FLOORS)")
            elif FLOOR[b] > FLOOR[a]:
                breaks.append(f"{where} ({FLOORS[FLOOR[a]][0]}) imports {module} ({FLOORS[FLOOR[b]][0]}), a floor above")
    return breaks


def test_floor_check_names_an_import_that_reaches_up(tmp_path: Path):
    (tmp_path / "vhx" / "models").mkdir(parents=True)
    (tmp_path / "builders").mkdir()
    (tmp_path / "vhx" / "__init__.py").write_text("")
    (tmp_path / "vhx" / "models" / "__init__.py").write_text("")
    (tmp_path / "vhx" / "models" / "loading.py").write_text("def f():\n    from vhx.mini.zoo import resolve_model\n")
    (tmp_path / "builders" / "pope.py").write_text("from ..hub import write_hub_folder\nfrom vhx.schema import ORIGINAL\n")
    assert floor_breaks(tmp_path) == [
        "builders/pope.py:1: vhx.builders.pope (benchmarks) imports vhx.hub (folders), a floor above",
        "vhx/models/loading.py:2: vhx.models.loading (models) imports vhx.mini.zoo (offline world), a floor above",
    ]


def test_every_import_follows_the_floors():
    """Data flows up: no package of vhx imports one on a floor above it, at the top of a module or inside a function,
    builders/ included; so no two packages can import each other."""
    assert floor_breaks() == []
    assert set(FLOOR) >= {package_of(m) for m in library_files()}, "a package no floor holds"


#: Package faces (``__init__.py``) name what the package offers; past this many lines one holds a program.
FACE_LINES = 150


def test_package_faces_are_thin():
    faces = {p: len(p.read_text(encoding="utf-8").splitlines()) for p in [*ROOT.rglob("__init__.py"), *(CHECKOUT / "builders").glob("__init__.py")]}
    assert {str(p.relative_to(CHECKOUT)): n for p, n in faces.items() if n > FACE_LINES} == {}


#: Private names another module may import, each with its reason (at most 20).
PRIVATE_IMPORTS_ALLOWED: dict[tuple[str, str], str] = {}


def test_private_names_stay_home():
    """A name another module needs is public in its home module; the few exceptions are listed with a reason."""
    found = set()
    for name, path in library_files().items():
        for _, module, names in imports_of(name, path):
            if module.split(".")[0] == "vhx" and module != name:
                found |= {(name, f"{module}.{n}") for n in names if n.startswith("_") and not n.startswith("__")}
    assert len(PRIVATE_IMPORTS_ALLOWED) <= 20
    assert sorted(found - set(PRIVATE_IMPORTS_ALLOWED)) == []
