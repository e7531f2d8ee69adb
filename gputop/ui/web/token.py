"""The token every request to `gputop web` must carry: made fresh, or kept in a file of its own.

The token is the only thing between another user of the box (or a web page the browser has open)
and the dashboard, so: made by :func:`secrets.token_urlsafe`, compared in constant time, and a
token file is treated as an SSH key is: a regular file of ours that no other user can read (a
symbolic link, a FIFO, a file another user could read or swap are refused, one line each). A
token file that does not exist yet is created, 0600 and never through a link, with a new token.
"""

from __future__ import annotations

import errno
import hmac
import os
import re
import secrets
import stat

from gputop.engine.private_file import UnsafeFile, create_new
from gputop.engine.sanitize import clean
from gputop.errors import UsageError

TOKEN_BYTES = 32  # 43 characters of base64url: far beyond guessing over HTTP
MAX_TOKEN_FILE_BYTES = 4096
# What a token may be: it travels in a URL (?token=) and a cookie, so URL-safe characters only,
# and long enough that nobody guesses it.
TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_~.-]{16,256}")
_READABLE_BY_OTHERS = stat.S_IRWXG | stat.S_IRWXO


def new_token() -> str:
    """A fresh random token (URL-safe)."""
    return secrets.token_urlsafe(TOKEN_BYTES)


def token_matches(given: str | None, token: str) -> bool:
    """Whether ``given`` (from a hostile request, perhaps None or not ASCII) is ``token``; in
    constant time, so its answer times say nothing of how much of it was right."""
    if given is None:
        return False
    # compare_digest refuses non-ASCII str: bytes compare anything (a wrong length is no match).
    return hmac.compare_digest(given.encode("utf-8", "replace"), token.encode("ascii"))


def token_from_file(path: str, *, option: str = "--token-file") -> str:
    """The token in ``path``, or a new one written there when nothing is; UsageError (one line)
    for a file that is not a private regular file of ours or holds no usable token."""
    where = f"{option}: {clean(path)}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        return _create(path, where)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UsageError(f"{where} is a symbolic link (give the file itself)") from None
        raise UsageError(f"{where}: {exc.strerror or exc}") from None
    try:
        data = _read_private(fd, where)
    finally:
        os.close(fd)
    try:
        token = data.decode("ascii").strip()
    except UnicodeDecodeError:
        raise UsageError(f"{where}: a token is ASCII text") from None
    if TOKEN_SHAPE.fullmatch(token) is None:
        raise UsageError(
            f"{where}: a token is 16 to 256 of A-Z a-z 0-9 _ ~ . - "
            "(e.g. python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    return token


def _read_private(fd: int, where: str) -> bytes:
    """The bytes of a regular file of ours that only we can read; UsageError otherwise."""
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"{where} is not a regular file")
        if info.st_uid != os.geteuid():
            raise UsageError(f"{where} belongs to another user (uid {info.st_uid})")
        if info.st_mode & _READABLE_BY_OTHERS:
            mode = stat.S_IMODE(info.st_mode)
            raise UsageError(f"{where} may be read by others (mode {mode:04o}; chmod 600 it)")
        data = os.read(fd, MAX_TOKEN_FILE_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"{where}: {exc.strerror or exc}") from None
    if len(data) > MAX_TOKEN_FILE_BYTES:
        raise UsageError(f"{where} is too large for a token (over {MAX_TOKEN_FILE_BYTES} bytes)")
    return data


def _create(path: str, where: str) -> str:
    """A new token, written to a file created here (0600, O_EXCL, never through a link)."""
    token = new_token()
    try:
        fd = create_new(path)
    except UnsafeFile as exc:
        raise UsageError(f"{where}: cannot create it: {exc.reason}") from None
    try:
        os.write(fd, f"{token}\n".encode("ascii"))
    except OSError as exc:
        raise UsageError(f"{where}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return token


__all__ = ["TOKEN_SHAPE", "new_token", "token_from_file", "token_matches"]
