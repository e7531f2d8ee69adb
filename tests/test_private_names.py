"""Private names of dependencies live in one module per dependency, nowhere else in gputop/.

A dependency's private name (one starting with ``_``) may change in any release; keeping each
dependency's in one module, feature-tested there with a public fallback, keeps that risk in one
place. Found here: an import of a private module or name, ``Dep._x`` and ``getattr(Dep, "_x")``
on a name imported from a dependency, ``self._x`` in a subclass of a dependency's class where
``_x`` is that class's own, and ``obj._x`` where ``_x`` is a dependency's private that gputop
never defines itself (a Strip's slots, a Screen's fields, a parser's timeout).
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import inspect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "gputop"
DEPENDENCIES = (
    "textual",
    "rich",
    "psutil",
    "prometheus_client",
    "plotext",
    "pynvml",
    "textual_serve",
    "aiohttp",
)
ACCESSORS = ("getattr", "hasattr", "setattr", "delattr")


def allowed(dependency: str, path: Path) -> bool:
    """Whether ``path`` (relative to the repository) is ``dependency``'s one private module."""
    where = path.as_posix()
    if dependency == "textual":
        return where == "gputop/ui/textual_private.py"
    if dependency == "pynvml":
        # The driver layer's one module, and the simulator's install (it is the fake of
        # pynvml's library boundary: it swaps pynvml's library and its resolved symbols, and may
        # not import the driver layer).
        return where in ("gputop/engine/nvml/pynvml_private.py", "gputop/sim/__init__.py")
    return False  # rich, psutil, prometheus_client, plotext: none is needed


def private(name: str) -> bool:
    """``_x``; not ``__x__`` (Python's) nor ``_x_`` (ctypes' public names, such as ``_fields_``)."""
    return name.startswith("_") and not name.startswith("__") and not name.endswith("_")


def sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


@cache
def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


@cache
def dependency_privates() -> dict[str, frozenset[str]]:
    """Every private attribute, function and class name each dependency's own code uses."""
    found: dict[str, frozenset[str]] = {}
    for dependency in DEPENDENCIES:
        spec = importlib.util.find_spec(dependency)
        if spec is None or spec.origin is None:
            continue
        origin = Path(spec.origin)
        files = origin.parent.rglob("*.py") if spec.submodule_search_locations else [origin]
        names: set[str] = set()
        for file in files:
            for node in ast.walk(ast.parse(file.read_bytes())):
                if isinstance(node, ast.Attribute) and private(node.attr):
                    names.add(node.attr)
                elif isinstance(node, ast.FunctionDef | ast.ClassDef) and private(node.name):
                    names.add(node.name)
        found[dependency] = frozenset(names)
    return found


@cache
def gputop_defines() -> frozenset[str]:
    """Private names gputop gives things of its own: ``self._x = ...``, ``def _x``, ``_x: T``."""
    names: set[str] = set()
    for path in sources():
        for node in ast.walk(tree(path)):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                    names.add(node.attr)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
            elif isinstance(node, ast.Assign):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return frozenset(name for name in names if private(name))


@dataclass(frozen=True)
class Use:
    path: Path  # relative to the repository
    line: int
    dependency: str
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what} ({self.dependency})"


def _imported_from(module: ast.Module) -> dict[str, str]:
    """Local name -> the dependency it was imported from."""
    bound: dict[str, str] = {}
    for node in ast.walk(module):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top in DEPENDENCIES:
                    bound[alias.asname or top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            top = node.module.split(".")[0]
            if top in DEPENDENCIES:
                for alias in node.names:
                    bound[alias.asname or alias.name] = top
    return bound


def _root(node: ast.expr) -> ast.expr:
    while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def _attribute_uses(node: ast.AST) -> Iterator[tuple[ast.expr, str, int, str]]:
    """(object, private name, line, as written) for ``obj._x`` and ``getattr(obj, "_x")``."""
    if isinstance(node, ast.Attribute) and private(node.attr):
        yield node.value, node.attr, node.lineno, f"{ast.unparse(node.value)}.{node.attr}"
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ACCESSORS
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
        and private(node.args[1].value)
    ):
        obj, name = node.args[0], node.args[1].value
        yield obj, name, node.lineno, f'{node.func.id}({ast.unparse(obj)}, "{name}")'


def static_uses(module: ast.Module, relative: Path) -> Iterator[Use]:
    """Private dependency names one module (at ``relative``) names, read from its source alone."""
    bound = _imported_from(module)
    owners = dependency_privates()
    ours = gputop_defines()
    for node in ast.walk(module):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names]
            modules = names if isinstance(node, ast.Import) else [node.module or ""]
            for name in modules:
                top = name.split(".")[0]
                if top in DEPENDENCIES and not node.__dict__.get("level"):
                    if any(private(part) for part in name.split(".")):
                        yield Use(relative, node.lineno, top, f"import {name}")
                    elif isinstance(node, ast.ImportFrom):
                        for imported in filter(private, names):
                            yield Use(relative, node.lineno, top, f"from {name} import {imported}")
        for obj, name, line, written in _attribute_uses(node):
            root = _root(obj)
            if isinstance(root, ast.Name) and root.id in bound:
                yield Use(relative, line, bound[root.id], written)
            elif not (isinstance(obj, ast.Name) and obj.id in ("self", "cls")) and name not in ours:
                # Only for the dependencies this module imports: a dependency's objects are
                # handled where its names are (and another library's ``_obj`` is not its own).
                for dependency in set(bound.values()):
                    if name in owners.get(dependency, ()):
                        yield Use(relative, line, dependency, written)


def _inherited_privates(cls: type) -> dict[str, str]:
    """Private name -> dependency, for what ``cls``'s dependency base classes hold of their own."""
    names: dict[str, str] = {}
    for base in cls.__mro__:
        dependency = base.__module__.split(".")[0]
        if dependency not in DEPENDENCIES:
            continue
        slots = base.__dict__.get("__slots__", ())
        own = {*base.__dict__, *([slots] if isinstance(slots, str) else slots)}
        with contextlib.suppress(OSError, TypeError):  # no source (a C type): dict and slots
            own.update(re.findall(r"self\.(_\w+)", inspect.getsource(base)))
        names.update((name, dependency) for name in own if private(name))
    return names


def _self_uses(node: ast.ClassDef) -> Iterator[tuple[str, int]]:
    """Private names a class body reaches on ``self``/``cls`` (or via ``super()``)."""
    for child in ast.walk(node):
        for obj, name, line, _ in _attribute_uses(child):
            is_self = isinstance(obj, ast.Name) and obj.id in ("self", "cls")
            is_super = (
                isinstance(obj, ast.Call)
                and isinstance(obj.func, ast.Name)
                and obj.func.id == "super"
            )
            if is_self or is_super:
                yield name, line


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _imports_a_dependency(path: Path) -> bool:
    return bool(_imported_from(tree(path)))


def subclass_uses() -> Iterator[Use]:
    """``self._x`` in gputop classes (mixins included) where ``_x`` is a dependency base's own."""
    bodies: dict[tuple[str, str], tuple[Path, ast.ClassDef]] = {}
    for path in sources():
        for node in ast.walk(tree(path)):
            if isinstance(node, ast.ClassDef):
                bodies[_module_name(path), node.name] = (path.relative_to(ROOT), node)
    seen: set[tuple[Path, int, str]] = set()
    for path in sources():
        if not _imports_a_dependency(path):
            continue
        module = importlib.import_module(_module_name(path))
        for cls in vars(module).values():
            if not (inspect.isclass(cls) and cls.__module__ == module.__name__):
                continue
            inherited = _inherited_privates(cls)
            if not inherited:
                continue
            for klass in cls.__mro__:
                body = bodies.get((klass.__module__, klass.__qualname__))
                if body is None:
                    continue
                where, node = body
                for name, line in _self_uses(node):
                    dependency = inherited.get(name)
                    if dependency is not None and (where, line, name) not in seen:
                        seen.add((where, line, name))
                        yield Use(where, line, dependency, f"self.{name} in {cls.__name__}")


def outside_their_module(uses: Iterator[Use]) -> list[str]:
    return [str(use) for use in uses if not allowed(use.dependency, use.path)]


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_private_dependency_name_outside_its_one_module(path: Path) -> None:
    assert outside_their_module(static_uses(tree(path), path.relative_to(ROOT))) == []


def test_no_subclass_reaches_its_dependency_bases_private_fields() -> None:
    assert outside_their_module(subclass_uses()) == []


PLANTED = """
from textual._xterm_parser import XTermParser
from textual.widget import Widget, _private_helper
import textual
import pynvml as nv

Widget._set_dirty(widget)
getattr(Widget, "_set_dirty", None)
textual.widget.Widget._compositor
nv._nvmlGetFunctionPointer_cache.clear()
strip._segments = []
screen._dirty_widgets.add(widget)
self._own_field = 1
ours._own_field
"""


def test_the_checks_find_each_kind_of_use() -> None:
    """The static check finds planted uses (so a green run above means something)."""
    found = {use.what for use in static_uses(ast.parse(PLANTED), Path("gputop/ui/x.py"))}
    assert found == {
        "import textual._xterm_parser",
        "from textual.widget import _private_helper",
        "Widget._set_dirty",
        'getattr(Widget, "_set_dirty")',
        "textual.widget.Widget._compositor",
        "nv._nvmlGetFunctionPointer_cache",
        "strip._segments",
        "screen._dirty_widgets",
    }, found


def test_only_the_one_module_per_dependency_is_allowed() -> None:
    assert allowed("textual", Path("gputop/ui/textual_private.py"))
    assert not allowed("textual", Path("gputop/ui/paint/driver.py"))
    assert not allowed("rich", Path("gputop/ui/textual_private.py"))
    assert allowed("pynvml", Path("gputop/engine/nvml/pynvml_private.py"))
    assert not allowed("pynvml", Path("gputop/engine/nvml/calls.py"))
    assert not allowed("pynvml", Path("gputop/sim/library.py"))
