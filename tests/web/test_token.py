"""The token of `gputop web`: made fresh, compared in constant time, kept in a private file."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from gputop.commands.web import dashboard_argv
from gputop.errors import UsageError
from gputop.ui.web.token import TOKEN_SHAPE, new_token, token_from_file, token_matches


def test_a_new_token_is_random_and_url_safe() -> None:
    tokens = {new_token() for _ in range(100)}
    assert len(tokens) == 100
    assert all(TOKEN_SHAPE.fullmatch(t) and len(t) >= 43 for t in tokens)


@pytest.mark.parametrize("given", [None, "", "x", "é" * 43, "\udcff", "a" * 10_000])
def test_anything_else_is_no_match(given: str | None) -> None:
    token = new_token()
    assert not token_matches(given, token)
    assert token_matches(token, token)
    assert not token_matches(token[:-1], token)


def test_a_missing_token_file_is_created_private(tmp_path: Path) -> None:
    path = tmp_path / "token"
    token = token_from_file(str(path))
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.read_text() == token + "\n"
    assert token_from_file(str(path)) == token  # and read back the next time


def refused(path: Path) -> str:
    with pytest.raises(UsageError) as caught:
        token_from_file(str(path))
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"--token-file: {path}")
    return message


def test_a_link_is_refused_and_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    link = tmp_path / "token"
    link.symlink_to(target)
    assert "is a symbolic link" in refused(link)
    assert not target.exists()  # not created through the link


def test_a_token_file_others_may_read_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(new_token())
    path.chmod(0o644)
    assert "may be read by others (mode 0644; chmod 600 it)" in refused(path)


def test_what_is_no_regular_file_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    assert "is not a regular file" in refused(fifo)  # and no hang on a FIFO nobody writes


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"short\n", "a token is 16 to 256 of"),
        (b"spaces are not allowed here\n", "a token is 16 to 256 of"),
        (b"\xff" * 20, "a token is ASCII text"),
        (b"x" * 5000, "too large for a token"),
    ],
)
def test_a_file_without_a_usable_token_is_refused(tmp_path: Path, content: bytes, why: str) -> None:
    path = tmp_path / "token"
    path.write_bytes(content)
    path.chmod(0o600)
    assert why in refused(path)


def web_args(**options: object) -> argparse.Namespace:
    defaults = {"web_interval": 1.0, "web_theme": None, "allow_kill": False, "web_audit_log": None}
    return argparse.Namespace(**{**defaults, **options})


def test_the_served_dashboard_is_read_only_unless_allow_kill() -> None:
    assert dashboard_argv(web_args(demo="dgx")) == ["--demo=dgx", "--interval", "1.0", "--readonly"]
    assert "--readonly" not in dashboard_argv(web_args(allow_kill=True))
    argv = dashboard_argv(web_args(allow_kill=True, web_audit_log="k.log", web_theme="nord"))
    assert argv[-4:] == ["--theme", "nord", "--audit-log", os.path.abspath("k.log")]
    with pytest.raises(UsageError, match="only with --allow-kill"):
        dashboard_argv(web_args(web_audit_log="k.log"))
