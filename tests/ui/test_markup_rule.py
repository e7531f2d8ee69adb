"""One rule for text in the UI: nothing that did not come from gputop's source is read as markup.

Every module under gputop/ui is read with ``ast``. A *sink* is a place where Textual or Rich
parse a ``str`` as markup:

- the first argument (or ``content=``, ``label=``, ...) of Static, Label, Button, RadioButton,
  Checkbox, Tooltip and the like, unless the call says ``markup=False``;
- ``x.update(one_argument)`` (Static.update), ``x.notify(message)`` (unless ``markup=False``),
  ``x.print(...)`` (a Rich console, unless ``markup=False``);
- every cell of ``add_row(...)`` and the header of ``add_column(...)`` (a Rich Table and a
  DataTable both parse a str cell), ``from_markup(...)``, and a Binding's ``tooltip=``;
- an assignment to ``.border_title``, ``.border_subtitle``, ``.label`` or ``.tooltip``.

A sink may only get a *safe* value: a string literal without placeholders; ``None``; a Text,
Content or Rich Table built in place (``Text(...)``, ``Text.assemble(...)``, ``Content(...)``,
``plain(...)`` from gputop.ui.plain, ``Table.grid()``: a table's cells are sinks themselves); a
call of a gputop function annotated to return one of those; ``a if c else b`` with both safe; a
list of safe values; or a name that is annotated so (mypy --strict keeps it so) or is given only
safe values in its function (or module). Anything else fails: f-strings, ``+``, ``%``,
``.format()``, ``str(...)``, attributes and names of unknown type. ``x.update(...)`` is also
dict.update and set.update: an argument that cannot be text (a generator, a comprehension, a
display, ``zip()``) passes.

A value that is gputop's own text but cannot be shown to be (a Binding's tooltip must be a str)
may carry the comment ``# markup: source`` on its line, which a reviewer then vouches for.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "gputop"
UI = PACKAGE / "ui"
PRAGMA = "# markup: source"

WIDGETS = frozenset(
    {
        "Static",
        "Label",
        "Button",
        "RadioButton",
        "Checkbox",
        "ToggleButton",
        "Tooltip",
        "Link",
        "Option",
        "Tab",
        "TabPane",
        "Collapsible",
    }
)
WIDGET_KEYWORDS = frozenset({"content", "renderable", "label", "prompt", "title"})
TEXT_ATTRIBUTES = frozenset({"border_title", "border_subtitle", "label", "tooltip"})
# Types whose values are never parsed as markup (Table and Group: their parts are checked).
SAFE_TYPES = frozenset({"Text", "Content", "Table", "Group"})
CONTAINERS = frozenset({"list", "tuple", "Sequence", "Iterable", "Iterator", "None"})
SAFE_BUILDERS = frozenset({"Text", "Content", "plain", "Table"})  # a Table's cells: add_row
SAFE_METHODS = frozenset({"assemble", "styled", "from_rich_text", "grid"})  # Text.assemble ...
NOT_TEXT_CALLS = frozenset({"zip", "dict", "set", "map", "enumerate"})


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    sink: str
    value: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.sink} gets {self.value}"


def _is_false(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def _markup_off(call: ast.Call) -> bool:
    return any(k.arg == "markup" and _is_false(k.value) for k in call.keywords)


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _annotation_names(node: ast.expr) -> set[str]:
    names: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            names.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            names.add(sub.attr)
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):  # "Text"
            names |= _annotation_names(ast.parse(sub.value, mode="eval").body)
    return names


def safe_annotation(node: ast.expr | None) -> bool:
    """An annotation that names only Text-like types (and containers of them)."""
    if node is None:
        return False
    names = _annotation_names(node) - {"rich", "text", "textual", "content", "table", "console"}
    return bool(names & SAFE_TYPES) and names <= SAFE_TYPES | CONTAINERS


def text_functions(trees: list[ast.Module]) -> frozenset[str]:
    """Names of the functions and methods every definition of which returns a Text-like type."""
    verdicts: dict[str, bool] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                ok = safe_annotation(node.returns)
                verdicts[node.name] = verdicts.get(node.name, True) and ok
    return frozenset(name for name, ok in verdicts.items() if ok)


@cache
def project_text_functions() -> frozenset[str]:
    trees = [ast.parse(p.read_text(), str(p)) for p in sorted(PACKAGE.rglob("*.py"))]
    return text_functions(trees)


def _names(target: ast.AST | None) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)} if target else set()


def _values_given(node: ast.AST, name: str) -> list[ast.expr | bool]:
    """What ``node`` assigns to ``name``: its value, True (annotated safe), False (unknown)."""
    if isinstance(node, ast.Assign):
        return [
            node.value if isinstance(t, ast.Name) else False
            for t in node.targets
            if name in _names(t)
        ]
    if isinstance(node, ast.AnnAssign | ast.AugAssign | ast.NamedExpr):
        if not (isinstance(node.target, ast.Name) and node.target.id == name):
            return []
        if isinstance(node, ast.AnnAssign):
            return [safe_annotation(node.annotation) or node.value or False]
        return [node.value]
    if isinstance(node, ast.ExceptHandler):
        return [False] if node.name == name else []
    if isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
        return [False] if name in _names(node.target) else []
    if isinstance(node, ast.withitem):
        return [False] if name in _names(node.optional_vars) else []
    if isinstance(node, ast.Import | ast.ImportFrom):
        bound = {(a.asname or a.name).split(".")[0] for a in node.names}
        return [False] if name in bound else []
    return []


class Checker:
    """The sinks of one module and whether each value is safe."""

    def __init__(self, source: str, path: str, text_funcs: frozenset[str]) -> None:
        self.tree = ast.parse(source, path)
        self.lines = source.splitlines()
        self.path = path
        self.text_funcs = text_funcs | text_functions([self.tree])
        self.scope_of: dict[ast.AST, ast.AST] = {}
        self._index_scopes(self.tree, self.tree)

    def _index_scopes(self, node: ast.AST, scope: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            self.scope_of[child] = scope
            inner = child if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else scope
            self._index_scopes(child, inner)

    # -- where markup is parsed -------------------------------------------------------------
    def sinks(self) -> Iterator[tuple[ast.AST, str, ast.expr]]:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call):
                yield from self._call_sinks(node)
            elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    text = isinstance(target, ast.Attribute) and target.attr in TEXT_ATTRIBUTES
                    if text and node.value is not None:
                        yield node, f".{target.attr} =", node.value

    def _call_sinks(self, call: ast.Call) -> Iterator[tuple[ast.AST, str, ast.expr]]:
        name = _called_name(call)
        method = isinstance(call.func, ast.Attribute)
        keywords = {k.arg: k.value for k in call.keywords if k.arg is not None}
        args = list(call.args)
        if name in WIDGETS and not _markup_off(call):
            if args:
                yield call, f"{name}()", args[0]
            for key in WIDGET_KEYWORDS & keywords.keys():
                yield call, f"{name}({key}=)", keywords[key]
        elif name == "notify" and method and not _markup_off(call):
            if args:
                yield call, "notify()", args[0]
            if "message" in keywords:
                yield call, "notify(message=)", keywords["message"]
        elif name == "update" and method:
            if len(args) == 1 and set(keywords) <= {"layout"}:
                yield call, ".update()", args[0]
            if "content" in keywords:
                yield call, ".update(content=)", keywords["content"]
        elif name == "print" and method and not _markup_off(call):
            for arg in args:
                yield call, ".print()", arg
        elif name == "add_row" and method:
            for arg in args:
                yield call, "add_row()", arg
            if "label" in keywords:
                yield call, "add_row(label=)", keywords["label"]
        elif name == "add_column" and method:
            if args:
                yield call, "add_column()", args[0]
            for key in {"label", "header"} & keywords.keys():
                yield call, f"add_column({key}=)", keywords[key]
        elif name in ("from_markup", "render_markup"):
            for arg in args[:1]:
                yield call, f"{name}()", arg
        elif name == "Binding" and "tooltip" in keywords:
            yield call, "Binding(tooltip=)", keywords["tooltip"]

    # -- what is safe -----------------------------------------------------------------------
    def safe(self, node: ast.expr, seen: frozenset[str] = frozenset()) -> bool:
        if isinstance(node, ast.Constant):
            return node.value is None or isinstance(node.value, str)
        if isinstance(node, ast.JoinedStr):
            return not any(isinstance(v, ast.FormattedValue) for v in node.values)
        if isinstance(node, ast.IfExp):
            return self.safe(node.body, seen) and self.safe(node.orelse, seen)
        if isinstance(node, ast.Starred):
            return self._safe_cells(node.value, seen)
        if isinstance(node, ast.List | ast.Tuple):  # parts += [Text(...), table]
            return all(self.safe(e, seen) for e in node.elts)
        if isinstance(node, ast.Call):
            return self._safe_call(node, seen)
        if isinstance(node, ast.Name):
            return self._safe_name(node, seen)
        return False

    def _safe_cells(self, node: ast.expr, seen: frozenset[str]) -> bool:
        """``*cells``: each of them safe."""
        if isinstance(node, ast.GeneratorExp | ast.ListComp):
            return self.safe(node.elt, seen)
        if isinstance(node, ast.List | ast.Tuple):
            return all(self.safe(e, seen) for e in node.elts)
        return self.safe(node, seen)  # a name annotated as a container of Text

    def _safe_call(self, call: ast.Call, seen: frozenset[str]) -> bool:
        func = call.func
        if isinstance(func, ast.Name):
            if func.id in SAFE_BUILDERS or func.id in self.text_funcs:
                return True
            if func.id == "Group":
                return all(self.safe(a, seen) for a in call.args)
            return False
        if isinstance(func, ast.Attribute):
            owner = func.value
            if isinstance(owner, ast.Name) and owner.id in ("Text", "Content", "Table"):
                return func.attr in SAFE_METHODS
            if func.attr == "join":  # Text("\n").join(...)
                return isinstance(owner, ast.Call) and self._safe_call(owner, seen)
            return func.attr in self.text_funcs
        return False

    def _safe_name(self, name: ast.Name, seen: frozenset[str]) -> bool:
        if name.id in seen:  # x = x + ...: decided by x's other values
            return True
        seen = seen | {name.id}
        scope = self.scope_of.get(name, self.tree)
        while True:
            values = self._bindings(scope, name.id)
            if values is not None:
                return bool(values) and all(v is True or self.safe(v, seen) for v in values)
            if scope is self.tree:
                return False
            scope = self.scope_of.get(scope, self.tree)

    def _bindings(self, scope: ast.AST, name: str) -> list[ast.expr | bool] | None:
        """Every value ``name`` is given in ``scope`` (True: annotated safe; False: unknown),
        or None when the scope never binds it."""
        found: list[ast.expr | bool] = []
        if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
            a = scope.args
            every = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
            found += [safe_annotation(x.annotation) for x in every if x and x.arg == name]
        for node in self._own_nodes(scope):
            found += _values_given(node, name)
        return found or None

    def _own_nodes(self, scope: ast.AST) -> Iterator[ast.AST]:
        """The nodes of ``scope`` outside the functions defined in it."""
        todo = list(ast.iter_child_nodes(scope))
        while todo:
            node = todo.pop()
            yield node
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                todo.extend(ast.iter_child_nodes(node))

    def _not_text(self, sink: str, value: ast.expr) -> bool:
        if sink != ".update()":
            return False
        if isinstance(value, ast.GeneratorExp | ast.ListComp | ast.SetComp | ast.DictComp):
            return True
        if isinstance(value, ast.Dict | ast.Set | ast.List | ast.Tuple):
            return True
        return isinstance(value, ast.Call) and _called_name(value) in NOT_TEXT_CALLS

    def _vouched(self, value: ast.expr) -> bool:
        end = value.end_lineno or value.lineno
        return any(PRAGMA in self.lines[n - 1] for n in range(value.lineno, end + 1))

    def findings(self) -> list[Finding]:
        found = []
        for node, sink, value in self.sinks():
            if self.safe(value) or self._not_text(sink, value) or self._vouched(value):
                continue
            line = getattr(node, "lineno", 0)
            found.append(Finding(self.path, line, sink, ast.unparse(value)))
        return sorted(found, key=lambda f: f.line)


def check(source: str, path: str = "<snippet>") -> list[Finding]:
    return Checker(source, path, project_text_functions()).findings()


def test_nothing_from_outside_reaches_a_widget_as_markup() -> None:
    found = [
        str(f)
        for path in sorted(UI.rglob("*.py"))
        for f in check(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert found == []


def test_the_rule_sees_the_ui() -> None:
    # A lint that finds no sink checks nothing: the UI has dozens, of every kind.
    kinds: set[str] = set()
    for path in sorted(UI.rglob("*.py")):
        checker = Checker(path.read_text(), str(path), project_text_functions())
        kinds |= {sink.split("(")[0] for _, sink, _ in checker.sinks()}
    assert {"Static", "Button", ".update", "notify", "add_row", ".border_title ="} <= kinds
    assert {"add_column", "RadioButton", "Checkbox", ".label =", "Binding"} <= kinds


# Each a hostile name reaching a sink in one of the forms the rule must refuse.
BAD = {
    "f-string": "Static(f'user {name}')",
    "concatenation": "Label('user ' + name)",
    "percent": "Static('user %s' % name)",
    "format": "Static('user {}'.format(name))",
    "str()": "Static(str(name))",
    "bare name": "widget.update(name)",
    "attribute": "widget.update(self.error)",
    "subscript": "widget.update(cells['USER'])",
    "notify": "app.notify(f'killed {name}')",
    "notify message=": "app.notify(message=name, title='x')",
    "notify markup=True": "app.notify(name, markup=True)",
    "border title": "box.border_title = f'GPU {gpu.model}'",
    "border subtitle": "box.border_subtitle = name",
    "button label": "send.label = 'Send ' + name",
    "tooltip": "widget.tooltip = name",
    "Button": "Button(name, id='b')",
    "RadioButton label=": "RadioButton(label=name)",
    "Checkbox": "Checkbox(name)",
    "Tooltip": "Tooltip(name)",
    "rich table cell": "table.add_row(str(pid), user, Text(command))",
    "starred cells": "table.add_row(*(c for c in cells))",
    "datatable label=": "table.add_row(Text('x'), label=name)",
    "column header": "table.add_column(name, key=name)",
    "console print": "console.print(name)",
    "from_markup": "Text.from_markup(name)",
    "Content.from_markup": "Content.from_markup(name)",
    "Content.from_text": "widget.update(Content.from_text(name))",
    "Binding tooltip": "Binding('k', 'kill', 'Kill', tooltip=f'signal {whom}')",
    "one bad value of two": "text = 'none'\nif x:\n    text = name\nwidget.update(text)",
    "parameter of str": "def show(w, name: str) -> None:\n    w.update(name)",
    "unannotated parameter": "def show(w, name):\n    w.update(name)",
    "loop variable": "for key, desc in rows:\n    table.add_row(key, desc)",
    "half an if": "widget.update(Text(a) if x else a)",
    "Group of str": "Static(Group(name))",
    "str function": "def words() -> str:\n    return 'x'\n\nwidget.update(words())",
    "update content=": "widget.update(content=name)",
    "Static content=": "Static(content=name)",
}

GOOD = {
    "literal": "Static('read-only: signals are sent on the box')",
    "literal update": "title.update('Processes: reading…')",
    "Text": "Static(Text(name))",
    "Text.assemble": "Static(Text.assemble((key, 'bold'), name))",
    "plain": "widget.update(plain(error))",
    "markup off": "Static(name, markup=False)",
    "notify markup off": "app.notify(f'killed {name}', markup=False)",
    "Text variable": "t = Text(name)\nt.append(more)\nwidget.update(t)",
    "annotated parameter": "def show(w, t: Text) -> None:\n    w.update(t)",
    "Text function": "def head() -> Text:\n    return Text('x')\n\nwidget.update(head())",
    "Text method": "def f(self) -> Text:\n    return Text()\n\nwidget.update(self.f())",
    "either Text": "def f() -> Text:\n    return Text()\n\nwidget.update(f() if x else Text(a))",
    "dict update": "rows.update(zip(keys, news))",
    "dict update generator": "panels.update((p.index, p) for p in new)",
    "two-argument update": "sparks.update(self.history, width)",
    "cells": "table.add_row(*(Text(c) for c in cells))",
    "annotated list": "parts: list[Text | Table] = []\nStatic(Group(*parts))",
    "vouched": "Binding('k', 'kill', 'Kill', tooltip=f'signal {whom}')  # markup: source",
    "title None": "box.border_title = None",
    "module constant": "NOTE = 'no GPUs'\n\ndef f(w):\n    w.update(NOTE)",
}


@pytest.mark.parametrize("snippet", BAD.values(), ids=BAD.keys())
def test_the_rule_refuses_each_bad_form(snippet: str) -> None:
    assert len(check(snippet)) >= 1


@pytest.mark.parametrize("snippet", GOOD.values(), ids=GOOD.keys())
def test_the_rule_lets_text_objects_pass(snippet: str) -> None:
    assert check(snippet) == []
