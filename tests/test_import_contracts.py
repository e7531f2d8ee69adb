"""The import-linter contracts in pyproject.toml (run by `make test` as `lint-imports`).

They name every part of gputop, and they break on an import that crosses them: checked on a copy
of gputop with one import planted, by the real `lint-imports`.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "gputop"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def contracts() -> dict[str, dict[str, Any]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return {contract["id"]: contract for contract in config["contracts"]}


def test_every_part_of_gputop_is_in_one_layer() -> None:
    layers = contracts()["layers"]["layers"]
    named = [part.strip() for layer in layers for part in re.split(r"[|:]", layer)]
    parts = {
        path.stem
        for path in PACKAGE.iterdir()
        if (path.suffix == ".py" and path.name != "__init__.py") or (path / "__init__.py").exists()
    }
    assert sorted(named) == sorted(parts)


def lint_imports(tree: Path, contract: str) -> str:
    """`lint-imports` on the gputop in ``tree`` (a copy), checking one contract."""
    done = subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--contract", contract],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr
    return done.stdout


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of gputop and its pyproject.toml, to plant imports in."""
    shutil.copytree(PACKAGE, tmp_path / "gputop", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    return tmp_path


# (contract, module that gets the import, the import, what the report names): each one a
# contract must refuse
PLANTED = [
    ("layers", "engine/probes.py", "import gputop.ui", "gputop.engine.probes -> gputop.ui"),
    ("layers", "engine/probes.py", "import gputop.sources", "gputop.engine.probes -> gputop.so"),
    ("layers", "export/feed.py", "from gputop import cli", "gputop.export.feed -> gputop.cli"),
    ("sim-composed", "commands/schedule.py", "import gputop.sim.clock", "gputop.commands.sch"),
    ("sim-sees-the-model", "sim/devices.py", "import gputop.engine.enrich", "gputop.sim.devices"),
    ("clean-only", "fleet/bounds.py", "import gputop.engine.kill", "gputop.fleet.bounds ->"),
    ("ui-not-the-driver", "ui/text.py", "import pynvml", "gputop.ui.text -> pynvml"),
    ("textual-in-ui", "engine/probes.py", "import textual", "gputop.engine.probes -> textual"),
    ("pynvml-at-the-boundary", "engine/probes.py", "import pynvml", "gputop.engine.probes ->"),
    ("no-circle", "ui/widgets/__init__.py", "import gputop.ui.screens.main", ".widgets -> ."),
]


@pytest.mark.parametrize(("contract", "module", "line", "reported"), PLANTED)
def test_a_planted_import_breaks_its_contract(
    tree: Path, contract: str, module: str, line: str, reported: str
) -> None:
    assert contract in contracts()
    before = lint_imports(tree, contract)
    with (tree / "gputop" / module).open("a") as out:
        out.write(f"\n{line}  # planted\n")
    after = lint_imports(tree, contract)
    # named in the broken contract's report (today's own breaks, if any, are in both)
    assert reported not in before
    assert reported in after.partition("Broken contracts")[2]
