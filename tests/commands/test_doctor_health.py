"""doctor and the GPU health verdict: a GPU that needs a reset, a reboot or replacing is named
with its evidence and the safe sequence, and makes doctor exit 1 even with nothing stuck."""

from __future__ import annotations

import pytest

from gputop import exits
from gputop.cli import main


def test_doctor_names_every_gpu_that_needs_more_than_a_kill(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["doctor", "--demo=sick"]) == exits.EXIT_STUCK
    out = capsys.readouterr().out
    assert "Health verdicts (what no signal can fix):" in out
    assert "GPU 2 (NVIDIA H100 80GB HBM3): RESET NEEDED" in out
    assert "nvidia-smi --gpu-reset -i 2" in out
    assert "GPU 3 (NVIDIA H100 80GB HBM3): REBOOT NEEDED" in out
    assert "GPU 4 (NVIDIA H100 80GB HBM3): REPLACE" in out
    assert out.rstrip().endswith("GPUs 2, 3, 4 need a reset, a reboot or replacing.")
    assert "OK: nothing stuck." not in out


def test_a_healthy_box_has_no_health_section(capsys: pytest.CaptureFixture[str]) -> None:
    main(["doctor", "--demo=dgx"])
    out = capsys.readouterr().out
    assert "Health verdicts" not in out
    assert "need a reset" not in out and "needs a reset" not in out
