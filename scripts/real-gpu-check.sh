#!/bin/sh
# Compare gputop with nvidia-smi and real GPU processes on this box; write one report.
# Usage: scripts/real-gpu-check.sh [-o REPORT]   (default ./gputop-real-gpu-check.txt)
# The Python that runs it is the gputop checked: $GPUTOP_PYTHON, else this checkout's .venv,
# else python3. Exit 0: all passed; 1: some check failed; 2: no NVIDIA GPU/nvidia-smi here.
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd) || exit 2
python=${GPUTOP_PYTHON:-}
if [ -z "$python" ]; then
    if [ -x "$here/../.venv/bin/python" ]; then python=$here/../.venv/bin/python; else python=python3; fi
fi
exec "$python" "$here/real_gpu_check.py" "$@"
