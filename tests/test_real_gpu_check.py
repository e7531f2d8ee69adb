"""scripts/real-gpu-check.sh: the real-hardware check, run for real against a fake nvidia-smi.

The fake nvidia-smi (a script written per test) answers from gputop's simulator, so the whole
comparison runs end to end with no GPU; one variant changes a value or a format on its side,
which the report must call FAIL. No torch here (or --demo): the process steps SKIP, with why.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHECKER = ROOT / "scripts" / "real_gpu_check.py"
WRAPPER = ROOT / "scripts" / "real-gpu-check.sh"

# Answers -L, --help-query-gpu, --query-gpu=... --format=csv,noheader and dmon from the
# simulator. FAKE_SMI_CHANGE: {"field": new text} for GPU 0's row; FAKE_SMI_DMON_DASH: the
# dmon column (by header name) whose values it prints as "-".
FAKE_SMI = """#!{python}
import json, os, re, subprocess, sys
GPUTOP = [sys.executable, "-m", "gputop"]
DEMO = "--demo=" + os.environ["FAKE_SMI_DEMO"]
args = sys.argv[1:]
if os.environ.get("FAKE_SMI_BROKEN"):
    print("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
    sys.exit(9)
if args == ["-L"]:
    out = subprocess.run(
        [*GPUTOP, "query", DEMO, "--query-gpu=index,name,uuid", "--format=csv,noheader"],
        capture_output=True, text=True, check=True,
    ).stdout
    for line in out.splitlines():
        index, name, uuid = line.split(", ")
        print(f"GPU {{index}}: {{name}} (UUID: {{uuid}})")
    sys.exit(0)
if args[:1] == ["dmon"]:
    done = subprocess.run([*GPUTOP, "dmon", DEMO, *args[1:]], capture_output=True, text=True)
    dash = os.environ.get("FAKE_SMI_DMON_DASH")
    lines = done.stdout.splitlines()
    if dash and dash in lines[0].split():
        column = lines[0].split().index(dash) - 1  # "#" and "gpu" are one column
        for i, line in enumerate(lines):
            if not line.startswith("#"):
                start, end = list(re.finditer(r"\\S+", line))[column].span()
                lines[i] = line[:start] + "-".rjust(end - start) + line[end:]
    print("\\n".join(lines))
    sys.exit(done.returncode)
if args == ["--help-query-gpu"]:
    sys.exit(subprocess.run([*GPUTOP, "query", DEMO, "--help-query-gpu"]).returncode)
fields = args[0].split("=", 1)[1].split(",")
done = subprocess.run([*GPUTOP, "query", DEMO, *args], capture_output=True, text=True)
lines = done.stdout.splitlines()
for name, text in json.loads(os.environ.get("FAKE_SMI_CHANGE", "{{}}")).items():
    if name in fields and lines:
        cells = lines[0].split(", ") if len(fields) > 1 else [lines[0]]
        cells[fields.index(name)] = text
        lines[0] = ", ".join(cells)
print("\\n".join(lines))
sys.stderr.write(done.stderr)
sys.exit(done.returncode)
"""


def fake_smi(folder: Path) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / "nvidia-smi"
    path.write_text(FAKE_SMI.format(python=sys.executable), encoding="utf-8")
    path.chmod(0o755)
    return folder


def check(
    tmp_path: Path, bin_dir: Path, *, wrapper: bool = False, **fake: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Run the checker (the .py, or the shell wrapper) with only ``bin_dir`` before /usr/bin."""
    report = tmp_path / "report.txt"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAKE_SMI", "GPUTOP"))}
    env.update(PATH=f"{bin_dir}:/usr/bin:/bin", FAKE_SMI_DEMO="demo", **fake)
    if wrapper:
        env["GPUTOP_PYTHON"] = sys.executable
        argv = ["sh", str(WRAPPER), "-o", str(report), "--demo", "demo"]
    else:
        argv = [sys.executable, str(CHECKER), "-o", str(report), "--demo", "demo"]
    done = subprocess.run(
        argv, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=240, check=False
    )
    return done, report


def lines_of(report: Path, verdict: str) -> list[str]:
    return [line for line in report.read_text().splitlines() if line.startswith(verdict)]


def test_without_nvidia_smi_it_says_so_in_one_line_and_exits_2(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    done, report = check(tmp_path, empty)
    assert done.returncode == 2
    assert done.stdout.count("\n") == 1 and "no nvidia-smi" in done.stdout
    assert done.stderr == ""
    assert not report.exists()


def test_a_driver_nvidia_smi_cannot_reach_is_no_gpu_exit_2(tmp_path: Path) -> None:
    done, report = check(tmp_path, fake_smi(tmp_path / "bin"), FAKE_SMI_BROKEN="1")
    assert done.returncode == 2
    assert done.stdout.count("\n") == 1 and "cannot see the driver" in done.stdout
    assert "exit 9" in done.stdout and "Traceback" not in done.stderr
    assert not report.exists()


def _skip_reason() -> str:
    return "torch is not installed" if importlib.util.find_spec("torch") is None else "--demo"


def test_gputop_against_itself_passes_end_to_end(tmp_path: Path) -> None:
    done, report = check(tmp_path, fake_smi(tmp_path / "bin"), wrapper=True)
    assert done.returncode == 0, report.read_text() if report.exists() else done.stderr
    assert done.stdout.strip() == f"real-gpu-check: PASS: report in {report}"
    text = report.read_text()
    assert lines_of(report, "FAIL") == []
    # Every field both list was compared: the simulator's list, all of it.
    match = re.search(r"^PASS  query-gpu: (\d+) of (\d+) fields agree", text, re.MULTILINE)
    assert match is not None and match.group(1) == match.group(2)
    assert int(match.group(2)) > 200
    assert len([line for line in lines_of(report, "PASS") if " dmon " in line]) == 3
    assert re.search(r"^PASS  dmon -c 2 -s pucvmet: .*4 GPUs", text, re.MULTILINE)
    skips = lines_of(report, "SKIP")
    assert len(skips) == 1 and skips[0].startswith("SKIP  processes: ")
    assert _skip_reason() in skips[0]
    assert "GPU: 0, NVIDIA A100-SXM4-80GB, 550.54.15, 00000000:07:00.0" in text
    assert re.search(r"^summary: \d+ PASS, 0 FAIL, 1 SKIP in [\d.]+ s$", text, re.MULTILINE)


def test_a_value_or_format_nvidia_smi_prints_otherwise_is_a_fail(tmp_path: Path) -> None:
    change = {
        "vbios_version": "92.00.45.00.07",  # a static field: exactly
        "power.draw": "341.2 W",  # a moving field: its format (two decimals) differs
        "temperature.gpu": "99",  # moving, same format, beyond its 5 degree tolerance
    }
    done, report = check(
        tmp_path,
        fake_smi(tmp_path / "bin"),
        FAKE_SMI_CHANGE=json.dumps(change),
        FAKE_SMI_DMON_DASH="mclk",
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout.strip() == f"real-gpu-check: FAIL: report in {report}"
    fails = lines_of(report, "FAIL")
    by_name = {line.split(":")[0].split(None, 1)[1]: line for line in fails}
    assert set(by_name) == {
        "query-gpu",
        "query-gpu vbios_version",
        "query-gpu power.draw",
        "query-gpu temperature.gpu",
        "dmon -c 2",
        "dmon -c 2 -s pucvmet",
    }
    # -s mu has no mclk column: nothing of it differs.
    assert any(line.startswith("PASS  dmon -c 2 -s mu:") for line in lines_of(report, "PASS"))
    agree = re.search(r"(\d+) of (\d+) fields agree", by_name["query-gpu"])
    assert agree is not None and int(agree.group(1)) == int(agree.group(2)) - 3
    assert re.search(
        r'nvidia-smi "92\.00\.45\.00\.07" \| gputop "[^"]+" \(value differs\)',
        by_name["query-gpu vbios_version"],
    )
    assert '"341.2 W" | gputop "' in by_name["query-gpu power.draw"]
    assert "(format differs)" in by_name["query-gpu power.draw"]
    assert "differs by more than 5" in by_name["query-gpu temperature.gpu"]
    assert "GPU 0 (00000000:07:00.0)" in by_name["query-gpu vbios_version"]
    # The changed fields are on GPU 0 only: one line each, none for the other three GPUs.
    text = report.read_text()
    assert "GPU 1 (" not in text
    assert re.search(
        r'GPU 0 mclk: nvidia-smi "-" ends at (\d+), gputop "\d+" at \1$', by_name["dmon -c 2"]
    )


def test_report_is_not_written_through_a_symlink(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep\n")
    (tmp_path / "report.txt").symlink_to(target)
    done, _ = check(tmp_path, fake_smi(tmp_path / "bin"))
    assert done.returncode == 2 and "cannot write" in done.stdout
    assert target.read_text() == "keep\n"


@pytest.mark.parametrize("bad", [["--nope"], ["-o"]])
def test_bad_usage_is_one_line_exit_2(bad: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, str(CHECKER), *bad], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and done.stdout == ""
