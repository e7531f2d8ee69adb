"""`gputop export --web-config-file`: served over TLS with basic auth by the real command, and
a bad file refused in one line (exit 2) before anything listens."""

from __future__ import annotations

import os
import re
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.export.conftest import REPO, stop_process
from tests.export.test_web_config import HASH, PASSWORD, Certs, basic, certs, write_config

__all__ = ["certs"]  # the fixture, imported to be used here

SERVING = re.compile(r"serving (https?)://(\S+)/metrics")


def _export(*extra: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "gputop", "export", "--demo", "--listen", "127.0.0.1:0", *extra]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_the_exporter_serves_https_with_basic_auth(certs: Certs) -> None:
    text = (
        f"tls_server_config:\n  cert_file: {certs.cert}\n  key_file: {certs.key}\n"
        f"basic_auth_users:\n  alice: '{HASH}'\n"
    )
    proc = _export("--interval", "1", "--web-config-file", write_config(certs.folder, text))
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 30
        match = None
        while match is None:
            line = proc.stdout.readline()
            if not line:
                pytest.fail(f"exporter exited: {proc.stderr.read() if proc.stderr else ''}")
            assert time.monotonic() < deadline, "the exporter did not say where it serves"
            match = SERVING.search(line)
        assert match.group(1) == "https"
        port = match.group(2).rpartition(":")[2]
        request = urllib.request.Request(f"https://localhost:{port}/metrics")
        request.add_header("Authorization", basic("alice", PASSWORD))
        context = ssl.create_default_context(cafile=str(certs.cert))
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            body = response.read().decode()
        assert "DCGM_FI_DEV_GPU_UTIL{" in body
    finally:
        stop_process(proc)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("tls_server_config:\n  cert_file: /nonexistent/c.pem\n  key_file: k.pem\n", "cert_file"),
        ("basic_auth_users:\n  alice: hunter2\n", "not a bcrypt hash"),
        ("tls_config: {}\n", "unknown key 'tls_config'"),
    ],
)
def test_a_bad_web_config_is_one_line_and_exit_2_before_listening(
    tmp_path: Path, text: str, words: str
) -> None:
    proc = _export("--web-config-file", write_config(tmp_path, text))
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        stop_process(proc)
    assert proc.returncode == 2
    assert "serving" not in out
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("gputop: --web-config-file ")
    assert words in lines[0]
    assert "hunter2" not in err
