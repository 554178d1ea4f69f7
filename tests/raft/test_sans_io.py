"""The node core must know nothing of asyncio, sockets, files or the clock (BRIEF §3.1)."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PURE_PACKAGES = [ROOT / "node" / "raft", ROOT / "node" / "protocol", ROOT / "node" / "metadata"]
FORBIDDEN_MODULES = {
    "asyncio",
    "socket",
    "selectors",
    "ssl",
    "os",
    "io",
    "pathlib",
    "shutil",
    "tempfile",
    "time",
    "datetime",
    "threading",
    "multiprocessing",
    "subprocess",
    "signal",
    "fcntl",
    "mmap",
    "trio",
}
FORBIDDEN_CALLS = {"open", "input", "print", "breakpoint"}


def _sources() -> list[pathlib.Path]:
    return sorted(p for package in PURE_PACKAGES for p in package.rglob("*.py"))


def _imports(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_core_module_does_no_io(path: pathlib.Path) -> None:
    tree = ast.parse(path.read_text(), filename=str(path))
    assert not (_imports(tree) & FORBIDDEN_MODULES), f"{path.name} imports I/O or clock modules"
    calls = {node.func.id for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    assert not (calls & FORBIDDEN_CALLS), f"{path.name} calls {calls & FORBIDDEN_CALLS}"


def test_the_guard_itself_catches_an_io_import() -> None:
    tree = ast.parse("import asyncio\nfrom time import monotonic\nimport os.path\n")
    assert _imports(tree) & FORBIDDEN_MODULES == {"asyncio", "time", "os"}


def test_guard_covers_the_core() -> None:
    names = {p.name for p in _sources()}
    assert {"node.py", "log.py", "records.py", "messages.py"} <= names
