"""The documentation's Python examples run as written.

Every fenced ```python block right after a line ``<!-- example: runs -->`` in README.md and
docs/guides/*.md runs in a fresh interpreter, in an empty temporary folder, with
GPUTOP_DEMO=dgx (simulated GPUs: no GPU needed). One that raises fails with its file and line:
the block is run with its lines where they are in the file, so the traceback's line numbers are
the Markdown file's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MARKER = "<!-- example: runs -->"
TIMEOUT_S = 120


@dataclass(frozen=True)
class Example:
    path: str  # relative to the repository root
    line: int  # 1-based line of the opening fence
    code: str  # the block, preceded by blank lines so that its line numbers are the file's

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


def examples_in(text: str, path: str) -> list[Example]:
    """The marked python blocks of one Markdown text; a marker without one is an error."""
    lines = text.splitlines()
    found: list[Example] = []
    for i, line in enumerate(lines):
        if line.strip() != MARKER:
            continue
        fence = i + 1
        while fence < len(lines) and not lines[fence].strip():
            fence += 1
        if fence >= len(lines) or lines[fence].strip() != "```python":
            raise ValueError(f"{path}:{i + 1}: {MARKER} is not followed by a ```python block")
        end = fence + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        if end >= len(lines):
            raise ValueError(f"{path}:{fence + 1}: the ```python block is never closed")
        body = lines[fence + 1 : end]
        found.append(Example(path, fence + 1, "\n" * (fence + 1) + "\n".join(body) + "\n"))
    return found


def documented() -> list[Example]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs" / "guides").glob("*.md"))]
    return [
        example
        for file in files
        for example in examples_in(file.read_text(), str(file.relative_to(ROOT)))
    ]


def run_example(example: Example, workdir: Path) -> subprocess.CompletedProcess[str]:
    """Run one example as a user would: a script in an empty folder, simulated GPUs."""
    script = workdir / "example.py"
    script.write_text(example.code)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUTOP_", "CUDA_"))}
    env["GPUTOP_DEMO"] = "dgx"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


def failure(example: Example, run: subprocess.CompletedProcess[str]) -> str | None:
    """None when the example ran; else what to say, beginning with its location."""
    if run.returncode == 0:
        return None
    trace = run.stderr.strip().replace(str(Path(run.args[1])), example.path)
    return f"{example.where}: the example exited with {run.returncode}:\n{trace}"


@pytest.mark.parametrize("example", documented(), ids=lambda e: e.where)
def test_documented_example_runs(example: Example, tmp_path: Path) -> None:
    problem = failure(example, run_example(example, tmp_path))
    if problem is not None:
        pytest.fail(problem, pytrace=False)


# -- the runner itself --------------------------------------------------------------------------
GUIDE = """# A guide

Not run:

```python
raise SystemExit("never run: no marker")
```

<!-- example: runs -->
```python
import gputop
print(len(gputop.Device.all()))
```

<!-- example: runs -->

```python
import gputop

gputop.Device(99)
```
"""


def test_runner_finds_marked_blocks_only_with_their_lines() -> None:
    first, second = examples_in(GUIDE, "docs/guides/x.md")
    assert (first.where, second.where) == ("docs/guides/x.md:10", "docs/guides/x.md:17")
    assert first.code.splitlines()[10] == "import gputop"  # line 11 of the file is line 11 here
    assert "never run" not in first.code + second.code


def test_runner_runs_an_example_on_simulated_gpus(tmp_path: Path) -> None:
    ok, _ = examples_in(GUIDE, "docs/guides/x.md")
    run = run_example(ok, tmp_path)
    assert failure(ok, run) is None
    assert run.stdout == "8\n"  # GPUTOP_DEMO=dgx: eight GPUs


def test_a_failing_example_names_its_file_and_line(tmp_path: Path) -> None:
    _, bad = examples_in(GUIDE, "docs/guides/x.md")
    problem = failure(bad, run_example(bad, tmp_path))
    assert problem is not None
    assert problem.startswith("docs/guides/x.md:17: the example exited with 1:")
    assert 'File "docs/guides/x.md", line 20' in problem  # the Markdown file's own line
    assert problem.rstrip().endswith(
        "DeviceNotFound: no GPU with NVML index 99: this machine has 8 (0-7)"
    )


def test_a_marker_without_a_python_block_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"x.md:1: .* not followed by a ```python block"):
        examples_in(MARKER + "\n\n```sh\nls\n```\n", "x.md")
