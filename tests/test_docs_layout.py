"""docs/development.md's Layout names every module of gputop/ and its job (docs drift check)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "gputop"


DEVELOPMENT = ROOT / "docs" / "development.md"


def _layout() -> str:
    """The Layout section: from its heading to the next heading of its level (or the end)."""
    text = DEVELOPMENT.read_text(encoding="utf-8")
    start = text.index("\n## Layout\n")
    end = text.find("\n## ", start + 1)
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
    assert not missing, f"docs/development.md Layout does not name: {missing}"


def test_the_layout_names_no_module_that_is_gone() -> None:
    layout = _layout()
    named = set(re.findall(r"`((?:[a-z_]+/)*[a-z_]+\.py)`", layout))
    files = [
        p.relative_to(ROOT).as_posix()
        for top in ("gputop", "tests", "scripts")
        for p in (ROOT / top).rglob("*.py")
    ]
    gone = [n for n in sorted(named) if not any(f == n or f.endswith("/" + n) for f in files)]
    assert not gone, f"docs/development.md Layout names modules that do not exist: {gone}"


def test_the_check_sees_a_new_module(tmp_path: Path) -> None:
    layout = _layout()
    assert not _covered("engine/brand_new.py", layout, _rows(layout))


def test_the_layout_is_the_whole_module_map() -> None:
    """The section holds the table itself (a heading moved or renamed would make it empty)."""
    layout = _layout()
    assert "| module | its job |" in layout
    assert len(_rows(layout)) > 20


# An install command whose package argument is the bare name `gputop` (with or without extras,
# quoted or not) fetches the unrelated project of that name from PyPI.
_OTHER_PROJECT = re.compile(
    r"""(?:pip|pipx|uv tool|uv pip)\s+install\b[^\n#]*?\s['"]?gputop(?:\[|['"\s]|$)"""
)


def _code_blocks(text: str) -> list[str]:
    return re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.S | re.M)


def test_the_readme_is_a_shop_window() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    assert "make run" in readme and "make test" in readme and ".venv/bin" in readme


def test_no_install_command_fetches_the_other_gputop() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    bad = [
        f"{page.relative_to(ROOT)}: {line.strip()}"
        for page in pages
        for block in _code_blocks(page.read_text(encoding="utf-8"))
        for line in block.splitlines()
        if _OTHER_PROJECT.search(line)
    ]
    assert not bad, f"install commands that would fetch PyPI's unrelated gputop: {bad}"


def test_the_install_check_sees_the_other_project() -> None:
    for line in ("pip install gputop", "pipx install 'gputop[export]'", "uv tool install gputop"):
        assert _OTHER_PROJECT.search(line), line
    for line in ("pip install '.[export]'", "pipx install gputop-nv", "uv tool install ./gputop"):
        assert not _OTHER_PROJECT.search(line), line
