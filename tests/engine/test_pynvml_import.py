"""pynvml imported without ctypes.util (issue 42): the driver process's 3.4 MiB, each check in a
fresh interpreter (the test process has both loaded long since)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tests.fresh import modules_after


def test_the_driver_layer_loads_pynvml_without_ctypes_util() -> None:
    loaded = modules_after("import gputop.engine.nvml")
    assert "pynvml" in loaded
    assert {"ctypes.util", "subprocess", "tempfile", "shutil"} & loaded == set()


def test_the_driver_process_opens_the_sim_without_ctypes_util() -> None:
    """open_for_driver imports pynvml first, though the simulator's package imports it too."""
    loaded = modules_after(
        "from gputop.engine.messages import DriverConfig\n"
        "from gputop.sources import open_for_driver\n"
        "open_for_driver(DriverConfig(demo='dgx', clock_origin_mono=0.0)).snapshot()\n"
    )
    assert {"pynvml", "gputop.sim.library"} <= loaded
    assert "ctypes.util" not in loaded


def test_pynvml_find_library_still_works() -> None:
    code = (
        "from gputop.engine.nvml.pynvml_private import import_pynvml\n"
        "import pynvml\n"
        "assert import_pynvml() is pynvml\n"
        "assert 'ctypes.util' not in sys.modules\n"
        "found = pynvml.find_library('c')  # the stand-in's: imports the real module\n"
        "import ctypes.util\n"
        "assert found and found == ctypes.util.find_library('c')\n"
    )
    assert "ctypes.util" in modules_after(code)


def test_a_pynvml_that_calls_find_library_at_import_gets_the_real_one(tmp_path: Path) -> None:
    real = importlib.util.find_spec("pynvml")
    assert real is not None and real.origin
    (tmp_path / "pynvml.py").write_text(  # the real one, after a call at import
        "from ctypes.util import find_library, test\n"
        "FOUND = find_library('c')\n"
        f"exec(compile(open({real.origin!r}).read(), {real.origin!r}, 'exec'))\n"
    )
    code = (
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        # pynvml_private alone (the reader needs the real pynvml): its package, not run
        "import os, types, gputop.engine\n"
        "package = types.ModuleType('gputop.engine.nvml')\n"
        "package.__path__ = [os.path.join(gputop.engine.__path__[0], 'nvml')]\n"
        "sys.modules['gputop.engine.nvml'] = package\n"
        "from gputop.engine.nvml.pynvml_private import pynvml\n"
        "import ctypes.util\n"
        "assert pynvml.__file__.startswith(sys.path[0])\n"
        "assert pynvml.FOUND and pynvml.FOUND == ctypes.util.find_library('c')\n"
        "assert ctypes.util.__file__.endswith('util.py')\n"
    )
    assert "ctypes.util" in modules_after(code)


def test_a_later_import_of_ctypes_util_is_the_real_module() -> None:
    code = (
        "import gputop.engine.nvml\n"
        "import ctypes.util\n"
        "assert ctypes.util.__file__.endswith('util.py')\n"
        "assert callable(ctypes.util.find_library) and ctypes.util.test\n"
    )
    assert "ctypes.util" in modules_after(code)


def test_with_ctypes_util_already_loaded_it_is_a_plain_import() -> None:
    code = (
        "import ctypes.util\n"
        "real = ctypes.util.find_library\n"
        "import gputop.engine.nvml, pynvml\n"
        "assert pynvml.find_library is real\n"
    )
    assert "pynvml" in modules_after(code)
