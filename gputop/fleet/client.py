"""A small Prometheus HTTP API client: instant and range queries (``/api/v1/query``,
``/api/v1/query_range``), urllib only.

Every failure is one :class:`PrometheusError` line that says what to do: a bad URL, a refused
connection, an unknown host, a timeout, a TLS failure, HTTP 401/403, a redirect, an answer that is
not Prometheus's JSON. Credentials come from the environment or a file, never from the command
line (where ``ps`` shows them to every user): ``GPUTOP_PROMETHEUS_TOKEN`` or a token file for a
bearer token, ``GPUTOP_PROMETHEUS_USER`` and ``GPUTOP_PROMETHEUS_PASSWORD`` for basic auth.
Redirects are not followed, so a credential is never sent to another address.

The server is not trusted either: each request has one deadline for all of it (connect, headers,
the whole body; :mod:`gputop.fleet.deadline`), the body is refused as soon as it passes
``max_reply_bytes``, JSON nested past Python's recursion limit is an error line, every label is
cleaned where it enters, and a series whose labels or value cannot be read is skipped and counted
(:attr:`Answer.skipped`) instead of failing the whole answer.
"""

from __future__ import annotations

import base64
import http.client
import json
import math
import os
import socket
import ssl
import stat
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from gputop.engine.sanitize import clean, is_clean
from gputop.errors import GputopError, UsageError
from gputop.fleet.deadline import Watchdog, opener
from gputop.version import __version__

ENV_URL = "GPUTOP_PROMETHEUS"
ENV_TOKEN = "GPUTOP_PROMETHEUS_TOKEN"
ENV_USER = "GPUTOP_PROMETHEUS_USER"
ENV_PASSWORD = "GPUTOP_PROMETHEUS_PASSWORD"
DEFAULT_TIMEOUT_S = 5.0
MAX_REPLY_BYTES = 64 * 1024 * 1024  # far above a real fleet's answer; refused while read
MAX_TOKEN_BYTES = 16 * 1024  # a JWT is a few KiB; /dev/zero is not a token
MAX_ERROR_CHARS = 300  # of a server's error text in our one line
_CHUNK_BYTES = 64 * 1024
# Evaluation times outside this (Unix seconds) are not times: 0 < t < year 5138.
MAX_STAMP = 1e11


class PrometheusError(GputopError):
    """Prometheus could not be asked, or did not answer as Prometheus: exit 1 (an I/O error)."""

    exit_code = 1


def parse_base_url(text: str) -> str:
    """The server's base URL (``http(s)://HOST[:PORT][/PREFIX]``, no trailing slash).

    Refuses anything else with one line, and credentials in the URL (put them in the
    environment: the command line is visible to every user of the host).
    """
    shown = text.strip()
    if not is_clean(shown):
        raise UsageError(f"--prometheus: the URL holds control characters: {shown!r}")
    try:
        parts = urllib.parse.urlsplit(shown)
        port = parts.port
    except ValueError as exc:
        raise UsageError(f"--prometheus: bad URL {shown!r}: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(
            f"--prometheus: expected http://HOST:PORT or https://HOST[:PORT][/PATH], got {shown!r}"
        )
    if parts.username is not None or parts.password is not None:
        raise UsageError(
            f"--prometheus: no credentials in the URL; set {ENV_USER} and {ENV_PASSWORD}, "
            f"or {ENV_TOKEN} (or --token-file)"
        )
    if parts.query or parts.fragment:
        raise UsageError(f"--prometheus: the URL takes no ?query or #fragment: {shown!r}")
    host = parts.hostname
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc += f":{port}"
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


def authorization(env: Mapping[str, str], token_file: str | None = None) -> str | None:
    """The Authorization header value the environment (or ``token_file``) asks for, or None."""
    token = env.get(ENV_TOKEN) or None
    if token_file is not None:
        token = read_token(token_file)
    user = env.get(ENV_USER)
    password = env.get(ENV_PASSWORD)
    if token and (user or password):
        raise UsageError(
            f"a bearer token ({ENV_TOKEN} or --token-file) and basic auth ({ENV_USER}) are both "
            "set: keep one"
        )
    if token:
        if any(c in token for c in "\r\n"):
            raise UsageError("the bearer token holds a line break")
        if not all("!" <= c <= "~" for c in token):
            # RFC 6750's token68 is printable ASCII; anything else makes http.client raise
            raise UsageError("the bearer token holds a space, control or non-ASCII character")
        return f"Bearer {token}"
    if user or password:
        if not user or password is None:
            raise UsageError(f"basic auth needs both {ENV_USER} and {ENV_PASSWORD}")
        pair = f"{user}:{password}".encode()
        return "Basic " + base64.b64encode(pair).decode("ascii")
    return None


def read_token(path: str) -> str:
    """The bearer token in ``path``: a regular file of at most :data:`MAX_TOKEN_BYTES`.

    Opened non-blocking, so a FIFO nobody writes to cannot hang us; /dev/zero, a directory or a
    FIFO is refused before a byte is read, and a file that grows while read is cut at the limit.
    """
    where = f"--token-file: {clean(path)}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as exc:
        raise UsageError(f"{where}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"{where} is not a regular file")
        if info.st_size > MAX_TOKEN_BYTES:
            raise UsageError(f"{where} is too large for a token (over {MAX_TOKEN_BYTES} bytes)")
        data = os.read(fd, MAX_TOKEN_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"{where}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_TOKEN_BYTES:
        raise UsageError(f"{where} is too large for a token (over {MAX_TOKEN_BYTES} bytes)")
    try:
        token = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise UsageError(f"{where}: not a text file") from None
    if not token:
        raise UsageError(f"{where} is empty")
    return token


class Series(NamedTuple):
    """One series of an instant vector: its labels (``__name__`` included when kept).

    A named tuple: a refresh of 4,000 GPUs makes ~24,000 of them, at a third of a frozen
    dataclass's cost each.
    """

    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True, slots=True)
class RangeSeries:
    """One series of a range query: its labels and its (Unix time, value) points, oldest first."""

    labels: Mapping[str, str]
    points: tuple[tuple[float, float], ...]


@dataclass(frozen=True, slots=True)
class RangeAnswer:
    """A range query's answer."""

    series: tuple[RangeSeries, ...]


@dataclass(frozen=True, slots=True)
class Answer:
    """An instant query's answer: the evaluation time (Unix seconds), the series, and how many
    series were skipped (labels that are not strings, a value that is not a finite number)."""

    at: float
    series: tuple[Series, ...]
    skipped: int = 0


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is an HTTPError: a credential is never sent on to another address."""

    def redirect_request(self, *_args: object, **_kwargs: object) -> None:
        return None


def _describe_reason(reason: object) -> str:
    if isinstance(reason, ssl.SSLCertVerificationError):
        return f"TLS certificate not trusted ({reason.verify_message or reason.reason})"
    if isinstance(reason, ssl.SSLError):
        return f"TLS failure ({reason.reason or reason})"
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused (is Prometheus running there?)"
    if isinstance(reason, socket.gaierror):
        return "cannot resolve the host name"
    if isinstance(reason, TimeoutError):
        return "timed out"
    if isinstance(reason, OSError):
        return reason.strerror or str(reason)
    return str(reason)


class PrometheusClient:
    """Instant and range queries to one Prometheus server (thread-safe: it keeps no connection)."""

    def __init__(
        self,
        base_url: str,
        *,
        authorization: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_reply_bytes: int = MAX_REPLY_BYTES,
    ) -> None:
        self.base_url = base_url
        self.timeout_s = timeout_s
        self.max_reply_bytes = max_reply_bytes
        self._authorization = authorization
        self._tls = ssl.create_default_context() if base_url.startswith("https:") else None

    def query(
        self, promql: str, *, at: float | None = None, timeout_s: float | None = None
    ) -> Answer:
        """The instant vector ``promql`` evaluates to at ``at`` (Unix seconds; None: the
        server's now), PrometheusError on any failure.

        The queries of one fleet read all pass the same ``at``: each evaluated at its own "now",
        a GPU's used and free memory came from different scrapes and summed to more than its
        total (issue 38).
        """
        params = {"query": promql}
        if at is not None:
            params["time"] = f"{at:.3f}"
        body = self._get("query", params, timeout_s)
        return self._answer(body, promql)

    def query_range(
        self,
        promql: str,
        *,
        start: float,
        end: float,
        step_s: float,
        timeout_s: float | None = None,
    ) -> RangeAnswer:
        """The range vector ``promql`` evaluates to from ``start`` to ``end`` (Unix seconds)."""
        params = {
            "query": promql,
            "start": f"{start:.3f}",
            "end": f"{end:.3f}",
            "step": f"{step_s:g}",
        }
        body = self._get("query_range", params, timeout_s)
        return self._range_answer(body, promql)

    def _get(self, api: str, params: dict[str, str], timeout_s: float | None) -> bytes:
        """The body of ``/api/v1/API?PARAMS`` within ``timeout_s`` in all (PrometheusError on any
        failure)."""
        url = f"{self.base_url}/api/v1/{api}?" + urllib.parse.urlencode(params)
        headers = {"Accept": "application/json", "User-Agent": f"gputop/{__version__}"}
        if self._authorization is not None:
            headers["Authorization"] = self._authorization
        request = urllib.request.Request(url, headers=headers)
        limit = self.timeout_s if timeout_s is None else timeout_s
        watchdog = Watchdog(time.monotonic() + limit)
        try:
            with opener(watchdog, self._tls, _NoRedirects()).open(request, timeout=limit) as reply:
                return self._read_body(reply, watchdog)
        except urllib.error.HTTPError as exc:
            raise self._http_error(exc) from None
        except urllib.error.URLError as exc:
            if watchdog.fired or isinstance(exc.reason, TimeoutError):
                raise self._timed_out() from None
            raise PrometheusError(
                f"cannot reach Prometheus at {self.base_url}: {_describe_reason(exc.reason)}"
            ) from None
        except (http.client.HTTPException, ssl.SSLError, OSError) as exc:
            if watchdog.fired or isinstance(exc, TimeoutError):
                raise self._timed_out() from None
            raise PrometheusError(
                f"Prometheus at {self.base_url} broke off its answer: "
                f"{_describe_reason(exc) if isinstance(exc, OSError) else type(exc).__name__}"
            ) from None
        finally:
            watchdog.close()

    def _read_body(self, reply: http.client.HTTPResponse, watchdog: Watchdog) -> bytes:
        """The whole body, refused the moment it passes ``max_reply_bytes`` (a Content-Length
        over it: before a byte is read)."""
        length = (reply.headers.get("Content-Length") or "").strip()
        if (
            length.isascii()
            and length.isdigit()
            and (len(length) > 18 or int(length) > self.max_reply_bytes)
        ):
            raise self._too_large()
        chunks: list[bytes] = []
        total = 0
        while chunk := reply.read1(_CHUNK_BYTES):
            total += len(chunk)
            if total > self.max_reply_bytes:
                raise self._too_large()
            chunks.append(chunk)
        if watchdog.fired:  # the shut-down socket read as the end of the body
            raise self._timed_out()
        return b"".join(chunks)

    def _too_large(self) -> PrometheusError:
        return PrometheusError(
            f"Prometheus at {self.base_url}: answer too large (over {self.max_reply_bytes} bytes)"
        )

    def _timed_out(self) -> PrometheusError:
        # the whole read's limit (one query may have been given only what was left of it)
        return PrometheusError(
            f"Prometheus at {self.base_url} did not answer within {self.timeout_s:g} s"
        )

    def _http_error(self, exc: urllib.error.HTTPError) -> PrometheusError:
        code = exc.code
        where = f"Prometheus at {self.base_url}"
        if code in (401, 403):
            hint = (
                "check the credentials"
                if self._authorization is not None
                else f"set {ENV_TOKEN} (or --token-file), or {ENV_USER} and {ENV_PASSWORD}"
            )
            word = "Unauthorized" if code == 401 else "Forbidden"
            return PrometheusError(f"{where} refused access (HTTP {code} {word}): {hint}")
        if 300 <= code < 400:
            target = exc.headers.get("Location", "?") if exc.headers else "?"
            return PrometheusError(
                f"{where} redirects to {_detail(target)} (HTTP {code}): give that URL to "
                "--prometheus"
            )
        detail = ""
        try:
            reply = _json(exc.read(65536))
            if isinstance(reply, dict) and reply.get("error"):
                detail = f": {_detail(reply['error'])}"
        except (OSError, ValueError, http.client.HTTPException):
            pass
        if code == 404 and not detail:
            detail = ": no Prometheus API there (is the URL the server's base address?)"
        return PrometheusError(f"{where} answered HTTP {code}{detail}")

    def _result(self, body: bytes, promql: str, kind: str) -> tuple[list[Any], Labeler]:
        """The answer's result list (of ``kind``: vector or matrix) and its label cleaner."""
        not_prometheus = self._not_prometheus()
        try:
            reply = _json(body)
        except _TooDeep:
            raise PrometheusError(
                f"Prometheus at {self.base_url} answered JSON nested too deeply to read"
            ) from None
        except ValueError:
            raise not_prometheus from None
        if not isinstance(reply, dict) or "status" not in reply:
            raise not_prometheus
        if reply["status"] != "success":
            error = _detail(reply.get("error", "?"))
            raise PrometheusError(f"Prometheus query {promql!r} failed: {error}")
        data = reply.get("data")
        if not isinstance(data, dict) or data.get("resultType") != kind:
            raise not_prometheus
        result = data.get("result") or []
        if not isinstance(result, list):
            raise not_prometheus
        return result, _labeler(body)

    def _not_prometheus(self) -> PrometheusError:
        return PrometheusError(
            f"{self.base_url} did not answer like Prometheus (no query API JSON): "
            "is it the Prometheus server's address?"
        )

    def _answer(self, body: bytes, promql: str) -> Answer:
        """The instant vector; a series that cannot be read, or whose value is not a finite
        number, is skipped and counted (one bad exporter never fails the whole fleet)."""
        result, labeled = self._result(body, promql, "vector")
        series: list[Series] = []
        add, isfinite = series.append, math.isfinite
        at: float | None = None
        skipped = 0
        for item in result:
            try:
                labels = labeled(item["metric"])
                pair = item["value"]
                if type(pair) is not list:
                    raise TypeError("a value that is not [time, text]")
                stamp, text = pair
                value = float(text) if type(text) is str else math.nan
            except (KeyError, TypeError, ValueError, AttributeError):
                skipped += 1
                continue
            if not isfinite(value):
                skipped += 1
                continue
            if at is None and _is_stamp(stamp):
                at = float(stamp)
            add(Series(labels, value))
        return Answer(at=time.time() if at is None else at, series=tuple(series), skipped=skipped)

    def _range_answer(self, body: bytes, promql: str) -> RangeAnswer:
        """The range vector; unreadable series are skipped, points that are not a finite value
        at a real time are left out."""
        result, labeled = self._result(body, promql, "matrix")
        series = []
        isfinite = math.isfinite
        for item in result:
            try:
                labels = labeled(item["metric"])
                points = []
                for stamp, text in item["values"]:
                    value = float(text) if type(text) is str else math.nan
                    if isfinite(value) and _is_stamp(stamp):
                        points.append((float(stamp), value))
            except (KeyError, TypeError, ValueError, AttributeError):
                continue
            series.append(RangeSeries(labels=labels, points=tuple(points)))
        return RangeAnswer(series=tuple(series))


class _TooDeep(ValueError):
    """JSON nested deeper than the decoder's recursion limit."""


def _json(body: bytes) -> Any:
    """``json.loads``, with nesting too deep for it a ValueError instead of a RecursionError.

    The C decoder counts its nesting against Python's recursion limit (about 1,000) and raises
    cleanly there: a body 100,000 deep costs 1,000 steps, not a crash. A Prometheus answer is
    five deep.
    """
    try:
        return json.loads(body)
    except RecursionError:
        raise _TooDeep("nested too deeply") from None


def _is_stamp(value: object) -> bool:
    """A Unix time as Prometheus writes one (a JSON number), within the plausible range."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return 0 < value < MAX_STAMP


def _detail(text: object) -> str:
    """A server's text (an error, a Location) for our one line: cleaned, at most a few hundred
    characters."""
    shown = clean(str(text))
    return shown if len(shown) <= MAX_ERROR_CHARS else shown[: MAX_ERROR_CHARS - 1] + "…"


Labeler = Callable[[Any], dict[str, str]]


def _labeler(body: bytes) -> Labeler:
    """How an answer's label sets are read: as they are, or each string cleaned.

    Label names and values are cleaned here, where they enter: they are written by whoever runs
    an exporter this Prometheus scrapes, and every view prints them. A body of printable ASCII
    without a backslash (JSON escapes every control character, and Prometheus writes non-ASCII
    as UTF-8 or \\u escapes) cannot hold one: at 4,000 GPUs, cleaning each of the ~250,000
    strings of a refresh one by one was a third of its time.
    """
    if body.isascii() and b"\\" not in body and b"\x7f" not in body:
        return _as_they_are
    cleaned: dict[object, str] = {}

    def once(text: object) -> str:
        # the same few strings (jobs, hosts, models) come back thousands of times
        if type(text) is not str:
            raise TypeError("a label that is not a string")
        done = cleaned.get(text)
        if done is None:
            done = cleaned[text] = clean(text)
        return done

    return lambda metric: {once(k): once(v) for k, v in metric.items()}


_TEXT = frozenset({str})


def _as_they_are(metric: Any) -> dict[str, str]:
    """A label set that needs no cleaning, as JSON gave it: checked to be strings only (JSON's
    keys always are), not copied."""
    if not isinstance(metric, dict) or not _TEXT.issuperset(map(type, metric.values())):
        raise TypeError("labels that are not strings")
    return metric


def client_from(
    url: str | None,
    *,
    env: Mapping[str, str] | None = None,
    token_file: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> PrometheusClient:
    """The client for ``url`` (else ``GPUTOP_PROMETHEUS``) with the environment's credentials."""
    env = os.environ if env is None else env
    text = url or env.get(ENV_URL)
    if not text:
        raise UsageError(f"fleet needs the Prometheus server: --prometheus URL or {ENV_URL}=URL")
    return PrometheusClient(
        parse_base_url(text), authorization=authorization(env, token_file), timeout_s=timeout_s
    )
