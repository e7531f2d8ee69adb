"""Real Jupyter kernels driven by nbclient, as a notebook server would drive them.

One kernel per test (ipykernel's own ``python3`` spec: this interpreter), over IPC sockets in a
temporary runtime folder, with an empty IPython profile: nothing of the user's Jupyter or IPython
set-up is read, and nothing is written outside the test's folder.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import nbformat
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

CELL_TIMEOUT_S = 60
MARK = "@json "  # begins the line value() reads back (gputop prints its own after it)


class Kernel:
    """A running kernel: ``run(cell)`` executes one cell and returns what it printed."""

    def __init__(self, client: NotebookClient, nb: Any) -> None:
        self._client = client
        self._nb = nb

    def run(self, source: str, *, allow_error: bool = False) -> str:
        """Execute ``source`` as the notebook's next cell; its stdout (and error name, if any)."""
        cell = nbformat.v4.new_code_cell(source)
        self._nb.cells.append(cell)
        index = len(self._nb.cells) - 1
        self._client.allow_errors = allow_error
        self._client.execute_cell(cell, index)
        text = []
        for out in cell.outputs:
            if out.get("output_type") == "stream" and out.get("name") == "stdout":
                text.append(out["text"])
            elif out.get("output_type") == "error":
                text.append(f"!{out['ename']}\n")
        return "".join(text)

    def value(self, expression: str) -> Any:
        """The JSON value of ``expression`` evaluated in the kernel."""
        out = self.run(f"import json as _j; print({MARK!r} + _j.dumps({expression}))")
        return json.loads(next(x for x in out.splitlines() if x.startswith(MARK))[len(MARK) :])

    def gputop_lines(self, source: str, *, allow_error: bool = False) -> list[str]:
        """Run a cell; the ``[gputop]`` lines it printed."""
        out = self.run(source, allow_error=allow_error)
        return [line for line in out.splitlines() if line.startswith("[gputop]")]


@contextmanager
def kernel(folder: Path, **env: str) -> Iterator[Kernel]:
    """A fresh kernel with ``env`` added to its environment (GPUTOP_DEMO=... and the like)."""
    runtime = folder / "runtime"
    ipython = folder / "ipython"
    runtime.mkdir(exist_ok=True)
    ipython.mkdir(exist_ok=True)
    environ = {
        **os.environ,
        "IPYTHONDIR": str(ipython),
        "JUPYTER_RUNTIME_DIR": str(runtime),
        "JUPYTER_PLATFORM_DIRS": "1",
        **env,
    }
    manager = KernelManager(
        kernel_name="python3",
        transport="ipc",
        connection_file=str(runtime / "kernel.json"),
        ip=str(runtime / "kernel"),
    )
    nb = nbformat.v4.new_notebook()
    client = NotebookClient(
        nb, km=manager, timeout=CELL_TIMEOUT_S, kernel_name="python3", resources={}
    )
    with client.setup_kernel(env=environ, cwd=str(folder)):
        yield Kernel(client, nb)
