"""The README's Layout names every module of gputop/ and what it is for (docs drift check)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "gputop"


def _layout() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("### Layout")
    end = text.find("\n## ", start)
    return text[start:] if end < 0 else text[start:end]


def _rows(layout: str) -> dict[str, str]:
    """Table rows by the first path their first cell names (``engine/nvml/``, ``sim/``...)."""
    rows: dict[str, str] = {}
    for line in layout.splitlines():
        first = re.match(r"\|\s*`([^`]+)`", line)
        if first:
            rows.setdefault(first[1], line)
    return rows


def _covered(rel: str, layout: str, rows: dict[str, str]) -> bool:
    """Named with its path, or a row for one of its folders names it (or the folder under it
    that holds it)."""
    if f"`{rel}`" in layout:
        return True
    parts = rel.split("/")
    for depth in range(1, len(parts)):
        row = rows.get("/".join(parts[:depth]) + "/")
        if row is None:
            continue
        below = parts[depth]
        if f"`{below}`" in row or f"`{below}/`" in row:
            return True
    return False


def _modules() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*")):
        if "__pycache__" in path.parts or path.name == "__init__.py" or path.name == "py.typed":
            continue
        if path.is_file() and path.suffix in (".py", ".tcss") and "scenarios" not in path.parts:
            found.append(path.relative_to(PACKAGE).as_posix())
    return found


def test_the_layout_names_every_module() -> None:
    layout = _layout()
    rows = _rows(layout)
    missing = [rel for rel in _modules() if not _covered(rel, layout, rows)]
    assert not missing, f"README Layout does not name: {missing}"


def test_the_layout_names_no_module_that_is_gone() -> None:
    layout = _layout()
    named = set(re.findall(r"`((?:[a-z_]+/)*[a-z_]+\.py)`", layout))
    files = [
        p.relative_to(ROOT).as_posix()
        for top in ("gputop", "tests", "scripts")
        for p in (ROOT / top).rglob("*.py")
    ]
    gone = [n for n in sorted(named) if not any(f == n or f.endswith("/" + n) for f in files)]
    assert not gone, f"README Layout names modules that do not exist: {gone}"


def test_the_check_sees_a_new_module(tmp_path: Path) -> None:
    layout = _layout()
    assert not _covered("engine/brand_new.py", layout, _rows(layout))
