"""What a user gets: the sdist and wheel that ``python -m build`` makes, checked by twine, and the
wheel installed into a fresh venv with no dev extras, where ``gputop`` must run.

The build needs no network (``--no-isolation``: build and hatchling are dev extras); installing the
wheel fetches its dependencies from the package index (pip's cache makes that quick). One build
and one venv serve every test of the module.
"""

from __future__ import annotations

import contextlib
import email.message
import email.parser
import os
import re
import signal
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gputop import sim
from gputop.version import __version__

ROOT = Path(__file__).resolve().parent.parent
DIST_NAME = "gputop_nv"  # gputop-nv, normalised as in the file names
MAN_PAGE = ROOT / "man" / "gputop.1"
MAN_IN_WHEEL = f"{DIST_NAME}-{__version__}.data/data/share/man/man1/gputop.1"


@dataclass(frozen=True)
class Built:
    sdist: Path
    wheel: Path


def _env() -> dict[str, str]:
    """This environment less what would point a child at the repository's venv or sources."""
    drop = {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PIP_REQUIRE_VIRTUALENV"}
    return {k: v for k, v in os.environ.items() if k not in drop} | {"NO_COLOR": "1"}


def _run(args: list[str | Path], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"{result.args}\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The sdist and the wheel (built from the sdist, as build does) of the working tree."""
    out = tmp_path_factory.mktemp("dist")
    _ok(_run([sys.executable, "-m", "build", "--no-isolation", "--outdir", out], ROOT, 600))
    sdists = list(out.glob(f"{DIST_NAME}-{__version__}.tar.gz"))
    wheels = list(out.glob(f"{DIST_NAME}-{__version__}-py3-none-any.whl"))
    assert len(sdists) == len(wheels) == 1, sorted(p.name for p in out.iterdir())
    return Built(sdists[0], wheels[0])


@dataclass(frozen=True)
class Venv:
    root: Path
    work: Path  # the folder commands run in: not the repository, so nothing is imported from it

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def gputop(self) -> Path:
        return self.root / "bin" / "gputop"

    def run(self, *args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return _run([*args], self.work, timeout)

    def pip_install(self, *requirements: str) -> None:
        _ok(self.run(self.python, "-m", "pip", "install", "--quiet", *requirements, timeout=600))


@pytest.fixture(scope="module")
def venv(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """A fresh venv with the wheel alone installed (no extras)."""
    root = tmp_path_factory.mktemp("venv")
    made = Venv(root / "venv", tmp_path_factory.mktemp("work"))
    _ok(made.run(sys.executable, "-m", "venv", made.root))
    made.pip_install(str(built.wheel))
    return made


def _metadata(text: str) -> email.message.Message:
    return email.parser.Parser().parsestr(text)


def test_twine_check_strict_passes_on_the_sdist_and_the_wheel(built: Built) -> None:
    out = _ok(
        _run([sys.executable, "-m", "twine", "check", "--strict", *vars(built).values()], ROOT, 120)
    )
    assert out.count("PASSED") == 2, out


def test_the_metadata_names_the_distribution_and_carries_the_short_description(
    built: Built,
) -> None:
    with zipfile.ZipFile(built.wheel) as wheel:
        meta = _metadata(wheel.read(f"{DIST_NAME}-{__version__}.dist-info/METADATA").decode())
    assert meta["Name"] == "gputop-nv"
    assert meta["Version"] == __version__
    assert meta["License-Expression"] == "MIT"
    assert meta["Description-Content-Type"] == "text/markdown"
    assert meta.get_all("Provides-Extra") == ["dev", "export", "web"]
    description = meta.get_payload()
    assert isinstance(description, str)
    assert description.strip() == (ROOT / "PYPI.md").read_text().strip()
    assert len(description) < 4000, "the index page is a summary: the README is for the clone"
    # An index page shows no file of the repository: no relative image or link may be there.
    targets = re.findall(r"\]\(([^)]*)\)", description)
    assert [t for t in targets if not t.startswith("https://")] == []


def test_the_wheel_holds_the_package_the_licence_and_the_man_page_only(built: Built) -> None:
    with zipfile.ZipFile(built.wheel) as wheel:
        names = wheel.namelist()
    tops = {name.split("/", 1)[0] for name in names}
    dist_info = f"{DIST_NAME}-{__version__}.dist-info"
    data = f"{DIST_NAME}-{__version__}.data"
    assert tops <= {"gputop", dist_info, data}, tops  # no tests/, docs/, bench/, scripts/
    assert f"{dist_info}/licenses/LICENSE" in names
    assert {f"gputop/sim/scenarios/{name}.toml" for name in sim.SHIPPED} <= set(names)
    assert "gputop/py.typed" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    if MAN_PAGE.exists():  # scripts/gen_reference.py writes it
        assert MAN_IN_WHEEL in names
        with zipfile.ZipFile(built.wheel) as wheel:
            assert wheel.read(MAN_IN_WHEEL) == MAN_PAGE.read_bytes()
    else:
        assert data not in tops


def test_the_sdist_holds_the_licence_and_no_caches(built: Built) -> None:
    with tarfile.open(built.sdist) as sdist:
        names = [name.split("/", 1)[1] for name in sdist.getnames() if "/" in name]
    for needed in ("LICENSE", "PKG-INFO", "pyproject.toml", "PYPI.md", "README.md"):
        assert needed in names
    assert {f"gputop/sim/scenarios/{name}.toml" for name in sim.SHIPPED} <= set(names)
    if MAN_PAGE.exists():
        assert "man/gputop.1" in names  # the wheel is built from the sdist
    hidden = {name.split("/", 1)[0] for name in names if name.startswith(".")}
    assert hidden <= {".gitignore"}, hidden  # no .venv, .grimp_cache, .mypy_cache, .ci...


def test_the_installed_wheel_runs_with_no_dev_extras(venv: Venv) -> None:
    where = _ok(venv.run(venv.python, "-c", "import gputop; print(gputop.__file__)"))
    assert Path(where.strip()).is_relative_to(venv.root), where  # not the repository's copy
    installed = _ok(venv.run(venv.python, "-m", "pip", "list", "--format=freeze")).lower()
    for dev_tool in ("pytest", "ruff", "mypy", "mkdocs", "ipython"):
        assert f"\n{dev_tool}==" not in f"\n{installed}", installed

    assert _ok(venv.run(venv.gputop, "--version")).strip() == f"gputop {__version__}"

    once = _ok(venv.run(venv.gputop, "--demo", "--once"))
    header, *gpus = once.splitlines()
    assert "DEMO" in header
    names = [gpu.name for gpu in sim.load_scenario("demo").gpus]
    assert len(gpus) == len(names), once
    for line, name in zip(gpus, names, strict=True):
        assert name in line, once


def test_the_exporter_says_what_it_needs_then_runs_with_the_export_extra(
    venv: Venv, built: Built
) -> None:
    textfiles = venv.work / "textfile"
    textfiles.mkdir(exist_ok=True)
    missing = venv.run(venv.gputop, "export", "--demo", "--textfile", textfiles)
    assert missing.returncode == 2, missing
    assert len(missing.stderr.splitlines()) == 1
    assert "prometheus-client" in missing.stderr
    assert "Traceback" not in missing.stderr

    venv.pip_install(f"{built.wheel}[export]")
    prom = textfiles / "gputop.prom"
    with _exporter(venv, textfiles) as exporter:
        deadline = time.monotonic() + 60
        while not prom.exists() and exporter.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        if not prom.exists():
            exporter.kill()
            pytest.fail(f"no {prom.name} from the exporter: {exporter.communicate(timeout=30)}")
        exporter.send_signal(signal.SIGTERM)
        _, stderr = exporter.communicate(timeout=30)
        assert exporter.returncode == 0, stderr  # SIGTERM: a clean stop
    text = prom.read_text()
    assert "gputop_driver_up 1.0" in text
    utils = [line for line in text.splitlines() if line.startswith("DCGM_FI_DEV_GPU_UTIL{")]
    assert len(utils) == len(sim.load_scenario("demo").gpus), text


@contextlib.contextmanager
def _exporter(venv: Venv, textfiles: Path) -> Iterator[subprocess.Popen[str]]:
    """``gputop export --demo --textfile DIR`` of the venv, killed if a check fails."""
    args = [venv.gputop, "export", "--demo", "--textfile", textfiles, "--interval", "1"]
    process = subprocess.Popen(
        [str(a) for a in args],
        cwd=venv.work,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=30)
