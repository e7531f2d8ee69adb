"""Each test's kind, worked out from what it uses, so no test file has to say it.

Kinds (registered in pyproject.toml): ``pty`` drives a real pseudo-terminal, ``real_process``
starts real processes (the CLI, a driver process, fork), ``prometheus`` needs the prometheus
binary, ``unit`` is everything else (in this process: Pilot, the simulator, fakes). ``slow`` is
not a kind: it marks the tests listed in tests/slow_tests.txt (2 s or more in a ``--durations=0``
run), so ``pytest -m "not slow"`` is the quick loop.

A test is of a kind when its own function, a fixture it requests or a helper it uses does what
makes that kind (``USES``), followed through helpers that use helpers. Names resolve as Python and
pytest resolve them: a module's own definitions, what it imports from tests/ (``helpers.name``
too), and the fixtures of the conftest files above it; every file under tests/ is read once with
``ast``. A process started only through an object's method counts where the class is named.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
SLOW_LIST = TESTS / "slow_tests.txt"
KINDS = ("unit", "pty", "real_process", "prometheus")

# What in a function's own source makes it (and whatever uses it) of a kind.
USES: dict[str, re.Pattern[str]] = {
    "pty": re.compile(r"\bpty\.(?:openpty|fork)\b|\btmux\b"),
    "real_process": re.compile(
        r"\bsubprocess\.|\bPopen\b|\bos\.fork\b|\bmultiprocessing\b|\bsys\.executable\b"
        r"|\bIsolatedSource\b|\bopen_source\(|\bactors=True\b|\"--demo\""  # demo: its actors
        r"|\bKernelManager\b"  # a Jupyter kernel
    ),
    "prometheus": re.compile(r"\bprometheus_binary\(|\"promtool\""),
}


@dataclass(frozen=True)
class _Module:
    defs: dict[str, ast.AST]  # its module-level functions and classes (a class: its methods too)
    names: dict[str, tuple[str, str | None]]  # imported: local name -> (module, name or None)


# gputop's own entry points that start a process (a driver process, the demo's actors) when a
# test calls them in its own process: the command line's main, a source opened the usual way.
STARTS_PROCESSES = {
    ("gputop.cli", "main"),
    ("gputop.sources", "open_source"),
    ("gputop.engine.source", "open_source"),
    ("gputop.engine.isolated", "IsolatedSource"),
}


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(TESTS.parent).with_suffix("").parts)


def _read(path: Path) -> tuple[_Module, str]:
    text = path.read_text()
    tree = ast.parse(text, str(path))
    defs: dict[str, ast.AST] = {}
    names: dict[str, tuple[str, str | None]] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defs[node.name] = node
        elif isinstance(node, ast.Assign | ast.AnnAssign):  # a table of helpers: PLANTS = [...]
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    defs[target.id] = node
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            ("tests", "gputop")
        ):
            for alias in node.names:
                names[alias.asname or alias.name] = (node.module or "", alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("tests."):
                    names[alias.asname or alias.name] = (alias.name, None)
    return _Module(defs, names), text


@cache
def _modules() -> dict[str, tuple[_Module, str]]:
    return {
        _module_name(path): _read(path)
        for path in sorted(TESTS.rglob("*.py"))
        if "__snapshots__" not in path.parts
    }


def _conftests(module: str) -> list[str]:
    """The conftest modules whose fixtures a module sees, nearest first."""
    parts = module.split(".")[:-1]
    return [".".join([*parts[:n], "conftest"]) for n in range(len(parts), 0, -1)]


def _resolve(module: str, name: str, fixture: bool = True) -> tuple[str, str] | None:
    """Where the ``name`` a module mentions is defined under tests/, if it is."""
    modules = _modules()
    if module not in modules:
        return None
    found, _ = modules[module]
    if name in found.defs:
        return module, name
    if name in found.names:
        source, imported = found.names[name]
        if imported is not None and (source, imported) in STARTS_PROCESSES:
            return source, imported
        if imported is None or not source.startswith("tests"):
            return None  # a module (its attributes: _mentions), or gputop's own
        if f"{source}.{imported}" in modules:
            return None  # ``from tests import processes``: a module too
        return _resolve(source, imported, fixture=False)
    if fixture:
        for conftest in _conftests(module):
            if conftest != module and conftest in modules:
                where = _resolve(conftest, name, fixture=False)
                if where is not None:
                    return where
    return None


def _mentions(module: str, node: ast.AST) -> set[tuple[str, str]]:
    """The definitions under tests/ that a function or class uses: names it calls or passes,
    fixtures it requests, and ``helpers.name`` through an imported test module."""
    modules = _modules()
    found = modules[module][0] if module in modules else _Module({}, {})
    local = {  # imported inside the function: ``from tests.fresh import modules_after``
        alias.asname or alias.name: (sub.module or "", alias.name)
        for sub in ast.walk(node)
        if isinstance(sub, ast.ImportFrom) and (sub.module or "").startswith("tests")
        for alias in sub.names
    }
    out: set[tuple[str, str]] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in local:
            where = _resolve(*local[sub.id], fixture=False)
        elif isinstance(sub, ast.Name):
            where = _resolve(module, sub.id)
        elif isinstance(sub, ast.arg):
            where = _resolve(module, sub.arg)
        elif isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name):
            source, imported = found.names.get(sub.value.id, ("", None))
            if imported is not None:
                source = f"{source}.{imported}"
            if (source, sub.attr) in STARTS_PROCESSES:  # cli.main([...])
                where = source, sub.attr
            else:
                where = _resolve(source, sub.attr, fixture=False) if source else None
        else:
            continue
        if where is not None:
            out.add(where)
    return out


def _direct(source: str) -> set[str]:
    return {kind for kind, pattern in USES.items() if pattern.search(source)}


@cache
def _kinds_by_definition() -> dict[tuple[str, str], frozenset[str]]:
    """Every module-level function, fixture and class under tests/ -> the kinds it gives."""
    kinds: dict[tuple[str, str], set[str]] = {}
    uses: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for module, (found, text) in _modules().items():
        for name, node in found.defs.items():
            kinds[module, name] = _direct(ast.get_source_segment(text, node) or "")
            uses[module, name] = _mentions(module, node) - {(module, name)}
    kinds.update({key: {"real_process"} for key in STARTS_PROCESSES})
    changed = True
    while changed:  # a helper of a helper: until nothing more is learnt
        changed = False
        for key, used in uses.items():
            before = len(kinds[key])
            for other in used:
                kinds[key] |= kinds.get(other, set())
            changed |= len(kinds[key]) != before
    return {key: frozenset(found) for key, found in kinds.items()}


def kinds_of(test: Callable[..., object], path: Path, fixture_names: Iterable[str]) -> set[str]:
    """The kinds of a test: what its own function and its fixtures use (``unit`` when none)."""
    module = _module_name(path)
    source = textwrap.dedent(inspect.getsource(test))
    found = _direct(source)
    table = _kinds_by_definition()
    used = _mentions(module, ast.parse(source))
    used |= {w for n in fixture_names if (w := _resolve(module, n)) is not None}
    for where in used:
        found |= table.get(where, frozenset())
    return found or {"unit"}


@cache
def _slow() -> frozenset[str]:
    """The node ids and module paths tests/slow_tests.txt lists."""
    lines = SLOW_LIST.read_text().splitlines()
    return frozenset(line.split("\t", 1)[1] for line in lines if line and line[0] != "#")


def is_slow(nodeid: str) -> bool:
    """Whether tests/slow_tests.txt lists the test, or its whole module."""
    slow = _slow()
    return nodeid in slow or nodeid.split("::", 1)[0] in slow


def pytest_collection_finish(session: pytest.Session) -> None:
    """With ``-p tests.markers`` only: print each collected test's markers (tests/test_markers)."""
    for item in session.items:
        names = sorted({mark.name for mark in item.iter_markers()} - {"parametrize"})
        print(f"MARKS\t{item.nodeid}\t{' '.join(names)}")
