"""The library's structure: no import cycle between vhx modules, deferred imports included."""

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
