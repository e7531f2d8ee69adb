"""Layering: the engine never loads Textual; only the driver layer and the sim touch pynvml."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gputop"
ENGINE_MODULES = [
    "gputop",
    "gputop.engine.model",
    "gputop.engine.nvml",
    "gputop.engine.source",
    "gputop.engine.sampler",
    "gputop.engine.enrich",
    "gputop.engine.kill",
    "gputop.engine.procs",
    "gputop.engine.holders",
    "gputop.engine.history",
    "gputop.units",
    "gputop.engine.cuda_index",
    "gputop.commands.once",
    "gputop.commands.json_out",
    "gputop.commands.doctor",
    "gputop.commands.query",
    "gputop.commands.dmon",
    "gputop.commands.export",
    "gputop.api",
]


def loaded_after_import(module: str) -> set[str]:
    code = f"import sys, {module}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return set(out.stdout.split())


@pytest.mark.parametrize("module", ENGINE_MODULES)
def test_engine_never_loads_textual(module: str) -> None:
    loaded = loaded_after_import(module)
    assert "textual" not in loaded, f"{module} pulls in Textual"


def test_plain_import_gputop_is_light() -> None:
    loaded = loaded_after_import("gputop")
    assert "pynvml" not in loaded and "textual" not in loaded


def imported_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_only_the_driver_layer_imports_pynvml() -> None:
    offenders = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if "pynvml" in imported_names(path)
        and path.name != "nvml.py"
        and "sim" not in path.relative_to(PACKAGE).parts
    ]
    assert offenders == []


def test_ui_never_touches_the_driver() -> None:
    ui = PACKAGE / "ui"
    for path in ui.rglob("*.py"):
        text = path.read_text()
        assert "pynvml" not in imported_names(path), path
        assert "gputop.engine.nvml" not in text, path
