"""Layering: who may import whom inside gputop, and where Textual and pynvml may be loaded.

Static checks read every .py under gputop/ with ``ast`` (imports inside functions and under
``TYPE_CHECKING`` included). The transitive checks follow only the imports that run when a module
is imported (module level, not under ``TYPE_CHECKING``, plus the parent packages Python runs
first). A few entry points are also imported for real, each in a fresh interpreter.
"""

from __future__ import annotations

import ast
import os
import signal
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from tests.fresh import modules_after

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "gputop"


@dataclass(frozen=True)
class Layer:
    what: str  # what lives there, in a few words
    modules: tuple[str, ...]  # "gputop.engine.*": the package and everything in it
    may_import: tuple[str, ...]  # layers by name, or single modules by their full name
    never: tuple[str, ...] = ()  # modules it must not import all the same


# Who may import whom (docs/development.md's Layout shows the same table). A layer may import
# itself only where it says so: the leaves import nothing from gputop, not even each other.
LAYERS: dict[str, Layer] = {
    "leaves": Layer(
        what="small helpers anyone may use",
        modules=(
            "gputop.version",
            "gputop.errors",
            "gputop.units",
            "gputop.glyphs",
            "gputop.cells",
            "gputop.dcgm",
            "gputop.host_memory",
            "gputop.torch_memory",
        ),
        may_import=(),  # nothing from gputop
    ),
    "shell": Layer(
        what="command-line value types, exit signals and one-line errors",
        modules=("gputop.argtypes", "gputop.exits"),
        may_import=("leaves", "gputop.engine.sanitize"),
    ),
    "engine": Layer(
        what="snapshots, the NVML reader, processes, the sampler",
        modules=("gputop.engine.*",),
        may_import=("engine", "leaves"),  # never the sim, nor the composition that knows it
    ),
    "sim": Layer(
        what="the simulated driver",
        modules=("gputop.sim.*",),
        # of the engine only the public model (and the sanitiser): never the driver layer
        may_import=("sim", "leaves", "gputop.engine.model", "gputop.engine.sanitize"),
    ),
    "composition": Layer(
        what="which source to open (real, simulated, driver process) and the demo frames",
        modules=("gputop.sources", "gputop.demo_frames"),
        may_import=("composition", "engine", "sim", "leaves"),
    ),
    "export": Layer(
        what="metrics as data, Prometheus glue, the HTTP server",
        modules=("gputop.export.*",),
        may_import=("export", "engine", "leaves"),
    ),
    "fleet": Layer(
        what="the fleet from Prometheus: HTTP API client, hosts and GPUs, text and JSON",
        modules=("gputop.fleet.*",),
        # no engine, no driver: it reads Prometheus only (and cleans what it reads)
        may_import=("fleet", "leaves", "gputop.engine.sanitize"),
    ),
    "commands": Layer(
        what="once, json, doctor, query, dmon, export, fleet, web",
        modules=("gputop.commands.*",),
        # gputop.ui.fleet: the fleet overview, started by `gputop fleet` (Textual loaded there)
        # gputop.ui.web.*: `gputop web` and `fleet --web`'s server and token (textual-serve)
        may_import=(
            "commands",
            "engine",
            "export",
            "fleet",
            "leaves",
            "shell",
            "gputop.sources",
            "gputop.ui.fleet",
            "gputop.ui.web.server",
            "gputop.ui.web.token",
        ),
    ),
    "ui": Layer(
        what="the Textual dashboard",
        modules=("gputop.ui.*",),
        # exits: ExitSignals, for its type; fleet: the fleet overview's data (no driver)
        # sources: the dashboard opens its source from the command line
        may_import=("ui", "engine", "fleet", "leaves", "gputop.exits", "gputop.sources"),
        never=("gputop.engine.nvml.*",),  # never the driver itself (nor the sim: not listed)
    ),
    "top": Layer(
        what="the package, the Python API, the IPython extension and the command line",
        modules=(
            "gputop",
            "gputop.__main__",
            "gputop.api",
            "gputop.device",
            "gputop.collector",
            "gputop.tracking",
            "gputop.reclaim",
            "gputop.experiment",
            "gputop.notebook",
            "gputop.cli",
        ),
        may_import=(
            "top",
            "leaves",
            "shell",
            "engine",
            "sim",
            "composition",
            "export",
            "fleet",
            "commands",
            "ui",
        ),
    ),
}

# Imports that break a rule above, accepted for now: (importer, imported) -> why. None today.
ALLOWANCES: dict[tuple[str, str], str] = {}

# The only modules that may import pynvml / Textual, or load it when they are imported.
PYNVML_MODULES = ("gputop.engine.nvml.*", "gputop.sim.*")
TEXTUAL_MODULES = ("gputop.ui.*",)


def matches(module: str, patterns: tuple[str, ...]) -> bool:
    for pattern in patterns:
        if pattern.endswith(".*"):
            package = pattern[:-2]
            if module == package or module.startswith(package + "."):
                return True
        elif module == pattern:
            return True
    return False


def is_textual(top_level_name: str) -> bool:
    """Textual or one of its plugins (textual_plotext)."""
    return top_level_name == "textual" or top_level_name.startswith("textual_")


# -- reading the sources ----------------------------------------------------------------------
def module_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {module_of(p): p for p in sorted(PACKAGE.rglob("*.py"))}


@dataclass(frozen=True)
class Imported:
    name: str  # a gputop module, or an outside package's top-level name
    line: int
    at_import: bool  # runs when the importer is imported (module level, not TYPE_CHECKING)


def _type_checking(test: ast.expr) -> bool:
    return ast.unparse(test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def _targets(importer: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:  # relative: from the importer's package
        package = (
            importer if MODULES[importer].name == "__init__.py" else importer.rpartition(".")[0]
        )
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    # ``from gputop import units`` imports the module gputop.units
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]


@cache
def imports_of(module: str) -> tuple[Imported, ...]:
    tree = ast.parse(MODULES[module].read_text(), str(MODULES[module]))
    found: list[Imported] = []

    def visit(node: ast.AST, at_import: bool) -> None:
        for child in ast.iter_child_nodes(node):
            runs = at_import and not isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
            )
            if isinstance(child, ast.Import | ast.ImportFrom):
                for target in _targets(module, child):
                    name = target if target.startswith("gputop") else target.split(".")[0]
                    found.append(Imported(name, child.lineno, runs))
            if isinstance(child, ast.If) and _type_checking(child.test):
                for stmt in child.body:
                    visit_stmt(stmt, at_import=False)
                for stmt in child.orelse:
                    visit_stmt(stmt, at_import=runs)
                continue
            visit(child, runs)

    def visit_stmt(stmt: ast.stmt, at_import: bool) -> None:
        wrapper = ast.Module(body=[stmt], type_ignores=[])
        visit(wrapper, at_import)

    visit(tree, at_import=True)
    return tuple(found)


def gputop_imports(module: str) -> list[Imported]:
    return [i for i in imports_of(module) if i.name == "gputop" or i.name.startswith("gputop.")]


def outside_imports(module: str) -> list[Imported]:
    return [i for i in imports_of(module) if not i.name.startswith("gputop")]


def layer_of(module: str) -> str | None:
    for name, layer in LAYERS.items():
        if matches(module, layer.modules):
            return name
    return None


def where(module: str, imported: Imported) -> str:
    return f"{MODULES[module].relative_to(ROOT)}:{imported.line}"


# -- static: the layers -----------------------------------------------------------------------
def test_every_module_has_a_layer() -> None:
    assert [m for m in MODULES if layer_of(m) is None] == []


def test_the_layers_are_a_partition_and_name_real_modules() -> None:
    for module in MODULES:
        owners = [n for n, layer in LAYERS.items() if matches(module, layer.modules)]
        assert len(owners) == 1, (module, owners)
    for layer in LAYERS.values():
        for target in (*layer.may_import, *layer.never):
            assert target in LAYERS or target.removesuffix(".*") in MODULES, target
    for importer, imported in ALLOWANCES:
        assert importer in MODULES and imported in MODULES, (importer, imported)


def allowed(importer: str, imported: str) -> bool:
    if (importer, imported) in ALLOWANCES:
        return True
    own = layer_of(importer)
    if own is None:  # test_every_module_has_a_layer names it
        return False
    layer = LAYERS[own]
    if matches(imported, layer.never):
        return False
    return imported in layer.may_import or layer_of(imported) in layer.may_import


def test_each_module_imports_only_what_its_layer_may() -> None:
    broken = [
        f"{where(module, i)}: {module} ({layer_of(module)}) imports {i.name} ({layer_of(i.name)})"
        for module in MODULES
        for i in gputop_imports(module)
        if not allowed(module, i.name)
    ]
    assert broken == []


def test_every_allowance_is_still_needed() -> None:
    used = {(m, i.name) for m in MODULES for i in gputop_imports(m)}
    assert [pair for pair in ALLOWANCES if pair not in used] == []


# -- static: Textual and pynvml ---------------------------------------------------------------
def test_only_ui_imports_textual() -> None:
    offenders = [
        f"{where(module, i)}: {i.name}"
        for module in MODULES
        for i in outside_imports(module)
        if is_textual(i.name) and not matches(module, TEXTUAL_MODULES)
    ]
    assert offenders == []


def test_only_the_nvml_reader_and_the_sim_import_pynvml() -> None:
    offenders = [
        where(module, i)
        for module in MODULES
        for i in outside_imports(module)
        if i.name == "pynvml" and not matches(module, PYNVML_MODULES)
    ]
    assert offenders == []


# -- transitive: what importing a module loads ------------------------------------------------
def parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:n]) for n in range(1, len(parts))]


@cache
def loaded_by(module: str) -> frozenset[str]:
    """The gputop modules importing ``module`` runs (itself included), by module-level imports."""
    seen: set[str] = set()
    todo = [*parents(module), module]
    while todo:
        current = todo.pop()
        if current in seen or current not in MODULES:
            continue
        seen.add(current)
        for i in gputop_imports(current):
            if i.at_import:
                todo += [*parents(i.name), i.name]
    return frozenset(seen)


def path_to(module: str, wanted: str) -> list[str]:
    """One chain of module-level imports from ``module`` to one that imports ``wanted``."""
    chains = [[p] for p in (*parents(module), module)]
    seen: set[str] = set()
    while chains:
        chain = chains.pop(0)
        current = chain[-1]
        if current in seen or current not in MODULES:
            continue
        seen.add(current)
        if any(i.at_import and i.name == wanted for i in outside_imports(current)):
            return [*chain, wanted]
        for i in gputop_imports(current):
            if i.at_import:
                chains += [[*chain, p] for p in (*parents(i.name), i.name)]
    return []


def reaches(module: str, outside: str) -> bool:
    return any(
        i.at_import and i.name == outside for m in loaded_by(module) for i in outside_imports(m)
    )


def test_no_module_but_the_nvml_reader_and_the_sim_loads_pynvml_at_import() -> None:
    offenders = [
        f"{m}: " + " -> ".join(path_to(m, "pynvml"))
        for m in MODULES
        if not matches(m, PYNVML_MODULES) and reaches(m, "pynvml")
    ]
    assert offenders == []


def test_no_module_outside_ui_loads_textual_at_import() -> None:
    offenders = [
        f"{m}: " + " -> ".join(path_to(m, name))
        for m in MODULES
        if not matches(m, TEXTUAL_MODULES)
        for name in sorted({i.name for x in loaded_by(m) for i in outside_imports(x)})
        if is_textual(name) and reaches(m, name)
    ]
    assert offenders == []


# -- runtime: the entry points, each in a fresh interpreter -----------------------------------
ENTRY_POINTS = [
    "gputop",
    "gputop.api",
    "gputop.cli",
    "gputop.engine.sampler",
    "gputop.engine.source",
    "gputop.sources",
    *sorted(
        m for m in MODULES if matches(m, ("gputop.commands.*", "gputop.export.*", "gputop.fleet.*"))
    ),
]


@pytest.mark.parametrize("module", ENTRY_POINTS)
def test_entry_points_load_neither_textual_nor_pynvml(module: str) -> None:
    loaded = {name.split(".")[0] for name in modules_after(f"import {module}")}
    assert "gputop" in loaded
    assert {name for name in loaded if is_textual(name) or name == "pynvml"} == set()


# -- static: no circle ------------------------------------------------------------------------
def _circle() -> list[str] | None:
    """A circle of imports between gputop's modules, if there is one: any import, a function's
    too (a circle through a function-level import is still two modules that need each other);
    a package's own ``__init__`` and the modules under it are not counted."""
    graph = {
        module: sorted(
            {
                i.name
                for i in gputop_imports(module)
                if i.name in MODULES
                and i.name != module
                and not module.startswith(f"{i.name}.")  # a package it lives in
                and not i.name.startswith(f"{module}.")  # a package's own submodule
            }
        )
        for module in MODULES
    }
    done: set[str] = set()

    def walk(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return None
        for target in graph[module]:
            found = walk(target, [*path, module])
            if found:
                return found
        done.add(module)
        return None

    for module in graph:
        found = walk(module, [])
        if found:
            return found
    return None


def test_no_import_circle() -> None:
    """A circle makes import order matter and a layer meaningless (deadline -> source ->
    isolated -> deadline was one: the NOT_RESPONDING stand-in now lives in the model)."""
    assert _circle() is None, " -> ".join(_circle() or ())


# -- runtime: what the dashboard and its driver process hold in memory (issue 42) -------------
# Each of these stays in memory as long as gputop runs (days, on some boxes): none is loaded
# before it is needed. The dashboard's screens and dialogs load when first opened; json when a
# container is named or a kill is logged; the Killer (gputop.engine.kill, 0.65 MiB) at the first
# kill, detail or signal log; ssl never (the dashboard speaks no TLS: gputop.cli
# keeps asyncio from loading it, 4 MiB).
NOT_AT_FIRST_FRAME = (
    "_ssl",
    "gputop.engine.kill",
    "gputop.ui.screens.confirm_kill",
    "gputop.ui.screens.gpu_detail",
    "gputop.ui.screens.help",
    "gputop.ui.screens.process_detail",
    "json",
    "textual.widgets._checkbox",
    "textual.widgets._radio_set",
)
# The driver process reads NVML: no command line, no sockets, no paths, no deadlines, and no
# ctypes.util (pynvml imports it, never calls it: pynvml_private.import_pynvml), which would
# bring subprocess, tempfile, shutil, bz2, lzma and random. Nor the simulator's file readers.
NOT_IN_THE_DRIVER_PROCESS = (
    "argparse",
    "bz2",
    "ctypes.util",
    "gputop.engine.deadline",
    "importlib.resources",
    "json",
    "lzma",
    "pathlib",
    "random",
    "shutil",
    "socket",
    "subprocess",
    "tempfile",
    "tomllib",
    "zipfile",
)
# The simulator (--demo) brings its own: the TOML parser of its scenario file. No actor
# processes on dgx, no JSON file, a shipped file read by its path: nothing else.
SIM_BRINGS = ("tomllib",)

# A sitecustomize for both processes: on SIGUSR1, the names of the modules loaded (None
# entries, which make an import fail, apart) into DIR/PID.json.
_DUMP_ON_SIGNAL = """
import os, signal, sys

def _dump(signum, frame):
    loaded = sorted(n for n, m in sys.modules.items() if m is not None)
    blocked = sorted(n for n, m in sys.modules.items() if m is None)
    path = os.path.join(os.environ["GPUTOP_TEST_MODULES_DIR"], f"{os.getpid()}.json")
    with open(path + ".part", "w") as out:
        out.write(repr((loaded, blocked)))
    os.rename(path + ".part", path)

signal.signal(signal.SIGUSR1, _dump)
"""


def _modules_of(pid: int, folder: Path) -> tuple[set[str], set[str]]:
    """Ask ``pid`` for its modules (see _DUMP_ON_SIGNAL): (loaded, blocked)."""
    os.kill(pid, signal.SIGUSR1)
    path = folder / f"{pid}.json"
    deadline = time.monotonic() + 10
    while not path.exists():
        assert time.monotonic() < deadline, f"process {pid} wrote no module list"
        time.sleep(0.05)
    loaded, blocked = ast.literal_eval(path.read_text())
    return set(loaded), set(blocked)


def test_the_dashboard_and_its_driver_process_load_only_what_the_first_frame_needs(
    tmp_path: Path,
) -> None:
    import psutil

    from tests.pty_terminal import clean_env, on_terminal

    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_DUMP_ON_SIGNAL)
    env = clean_env()
    env["PYTHONPATH"] = f"{hook}{os.pathsep}{env['PYTHONPATH']}"
    env["GPUTOP_TEST_MODULES_DIR"] = str(tmp_path)
    with on_terminal("--demo=dgx", size=(200, 60), env=env) as term:
        term.wait_for(b"Processes")
        term.read_for(1.5)  # a tick or two: the table filled in, its processes named
        ui, ui_blocked = _modules_of(term.proc.pid, tmp_path)
        drivers = [
            p.pid
            for p in psutil.Process(term.proc.pid).children()
            if "gputop.engine.child" in " ".join(p.cmdline())
        ]
        assert len(drivers) == 1
        driver, _ = _modules_of(drivers[0], tmp_path)
        term.type(b"q")
        assert term.read_to_end() == 0
    assert "gputop.ui.screens.main" in ui and "textual.app" in ui  # the dashboard, drawn
    assert "ssl" in ui_blocked  # asyncio's `import ssl` failed, as asyncio allows
    assert sorted(ui & set(NOT_AT_FIRST_FRAME)) == []
    assert "pynvml" in driver and "gputop.engine.nvml.reader" in driver  # the driver process
    assert sorted(driver & set(NOT_IN_THE_DRIVER_PROCESS) - set(SIM_BRINGS)) == []


def test_the_driver_process_on_a_real_driver_loads_none_of_what_it_does_not_need() -> None:
    """What the driver process imports to read NVML (gputop.engine.child's boot, then
    gputop.sources's driver_process_main and the reader), without the simulator."""
    loaded = modules_after("import gputop.engine.child, gputop.sources, gputop.engine.nvml")
    assert "pynvml" in loaded
    assert sorted(loaded & set(NOT_IN_THE_DRIVER_PROCESS)) == []


def test_only_the_dashboard_goes_without_ssl() -> None:
    """gputop.cli keeps ssl out of the plain dashboard; every subcommand (fleet, web and export
    may speak TLS) runs with it. Each subcommand's run() is replaced by one that imports ssl."""
    code = (
        "import argparse, importlib\n"
        "import gputop.cli as cli\n"
        "from gputop.exits import ExitSignals\n"
        "def run(args):\n"
        "    import ssl\n"
        "    return 0 if ssl.SSLContext else 1\n"
        "for name, (module, _help) in cli.SUBCOMMANDS.items():\n"
        "    try:\n"
        "        importlib.import_module(module).run = run\n"
        "    except ModuleNotFoundError:  # an extra that is not installed\n"
        "        continue\n"
        "    assert cli._run(argparse.Namespace(command=name), ExitSignals()) == 0, name\n"
        "    assert sys.modules['ssl'] is not None, name\n"
    )
    assert "ssl" in modules_after(code)
