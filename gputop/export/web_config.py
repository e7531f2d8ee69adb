"""``--web-config-file``: TLS, basic auth, headers and a rate limit for the exporter's HTTP server.

The file has the format of the Prometheus exporter-toolkit (``--web.config.file`` of
node_exporter, dcgm-exporter...): ``tls_server_config``, ``http_server_config``,
``basic_auth_users`` (bcrypt hashes) and ``rate_limit``, as documented in its
docs/web-configuration.md and read by its web/tls_config.go and web/handler.go. Like the toolkit,
an unknown or duplicate key, a value of the wrong type, an unknown TLS version, cipher or curve,
a password that is not a bcrypt hash or a certificate that does not load is refused, here with
one line before anything listens. Unlike the toolkit, the file is read once, at start: a
renewed certificate needs a restart.

Where Python's ssl module cannot do what Go's crypto/tls does, the file is refused rather than
served otherwise: client_auth_type RequestClientCert and RequireAnyClientCert (a client
certificate taken without checking it), more than one curve in curve_preferences. A client
certificate is verified only against client_ca_file (or client_ca), never the system's CAs.

PyYAML and bcrypt are imported only here, only when the option is used (the ``export`` extra).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import importlib
import ipaddress
import os
import re
import secrets
import ssl
import stat
import threading
import time
from base64 import b64decode
from binascii import Error as Base64Error
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from gputop.engine.sanitize import clean
from gputop.errors import UsageError

MAX_FILE_BYTES = 1 << 20  # the config, a certificate, a key or a CA bundle: far above any real one

TLS_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
# Go's tls.CipherSuites() (the names the toolkit accepts) -> OpenSSL's names. TLS 1.3 suites are
# accepted and, as in Go, not configurable (None).
CIPHERS: dict[str, str | None] = {
    "TLS_AES_128_GCM_SHA256": None,
    "TLS_AES_256_GCM_SHA384": None,
    "TLS_CHACHA20_POLY1305_SHA256": None,
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
}
CURVES = {
    "CurveP256": "prime256v1",
    "CurveP384": "secp384r1",
    "CurveP521": "secp521r1",
    "X25519": "X25519",
}
CLIENT_AUTH = {
    "": ssl.CERT_NONE,
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
UNVERIFIED_CLIENT_AUTH = ("RequestClientCert", "RequireAnyClientCert", "RequireClientCert")
# The toolkit's extraHTTPHeaders (web/handler.go): the only headers it lets a file set, and the
# values it allows where it checks them.
HEADERS: dict[str, tuple[str, ...]] = {
    "Strict-Transport-Security": (),
    "X-Content-Type-Options": ("nosniff",),
    "X-Frame-Options": ("deny", "sameorigin"),
    "X-XSS-Protection": (),
    "Content-Security-Policy": (),
}
_TOP_KEYS = ("tls_server_config", "http_server_config", "basic_auth_users", "rate_limit")
_TLS_KEYS = (
    "cert",
    "key",
    "client_ca",
    "cert_file",
    "key_file",
    "client_auth_type",
    "client_ca_file",
    "client_allowed_sans",
    "min_version",
    "max_version",
    "cipher_suites",
    "prefer_server_cipher_suites",
    "curve_preferences",
)
_TLS_TURNS_ON = _TLS_KEYS[:7]  # a tls_server_config that sets one of these serves TLS
# $2a$/$2b$/$2y$ (what htpasswd -B and Go's bcrypt write), a two-digit cost, 22+31 characters.
_BCRYPT = re.compile(r"\$2[aby]?\$(\d\d)\$[./A-Za-z0-9]{53}")
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_DURATION = re.compile(r"(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+|0")
_DURATION_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0}
_DURATION_UNIT_S |= {"m": 60.0, "h": 3600.0}
AUTH_CACHE_SIZE = 100  # as the toolkit's web/cache.go
AUTH_CACHE_S = 300.0  # a checked password is checked again after this (Prometheus: every 15-60 s)


@dataclass(frozen=True, slots=True)
class WebConfig:
    """What a --web-config-file asks of the HTTP server (an empty file asks nothing)."""

    tls: ssl.SSLContext | None = None
    allowed_sans: frozenset[str] | None = None  # client_allowed_sans: a client cert needs one
    headers: tuple[tuple[str, str], ...] = ()  # added to every answer
    auth: BasicAuth | None = None
    limiter: RateLimiter | None = None

    def san_allowed(self, peer_cert: dict[str, Any] | None) -> bool:
        """Whether a verified client certificate carries one of client_allowed_sans (always
        true without that setting)."""
        if self.allowed_sans is None:
            return True
        for kind, value in (peer_cert or {}).get("subjectAltName", ()):
            if kind == "IP Address":  # as Go's net.IP.String() writes it
                with contextlib.suppress(ValueError):
                    value = ipaddress.ip_address(value.strip()).compressed
            if kind in ("DNS", "IP Address", "email", "URI") and value in self.allowed_sans:
                return True
        return False


class BasicAuth:
    """basic_auth_users: checks an ``Authorization`` header against bcrypt hashes.

    An unknown user is checked against a real user's hash (the costliest), so that the answer
    takes as long as for a known one and does not tell which users exist. Checks run one at a
    time (bcrypt is slow on purpose: parallel checks would take every CPU) and their results are
    cached for ``AUTH_CACHE_S`` under a keyed hash of user and password (never the password),
    so a scrape every 15 s costs one bcrypt check every few minutes.
    """

    def __init__(self, users: dict[str, bytes], checkpw: Callable[[bytes, bytes], bool]) -> None:
        self._users = users
        self._decoy = max(users.values(), key=lambda h: int(h[4:6]))
        self._checkpw = checkpw
        self._key = secrets.token_bytes(32)
        self._cache: dict[bytes, tuple[bool, float]] = {}
        self._cache_lock = threading.Lock()
        self._bcrypt_lock = threading.Lock()

    def check(self, authorization: str | None) -> bool:
        """True when the header names a user with the right password."""
        credentials = _basic_credentials(authorization)
        if credentials is None:
            return False
        user, password = credentials
        key = hmac.digest(self._key, b"%d:%s%s" % (len(user), user, password), hashlib.sha256)
        now = time.monotonic()
        with self._cache_lock:
            cached = self._cache.get(key)
        if cached is not None and cached[1] > now:
            return cached[0]
        hashed = self._users.get(user.decode("utf-8", "replace"))
        with self._bcrypt_lock:
            try:
                matches = self._checkpw(password, hashed or self._decoy)
            except ValueError:  # e.g. a password over bcrypt's 72 bytes: bcrypt 5 refuses it
                matches = False
        ok = matches and hashed is not None
        with self._cache_lock:
            self._cache.pop(key, None)
            while len(self._cache) >= AUTH_CACHE_SIZE:
                del self._cache[next(iter(self._cache))]  # the oldest
            self._cache[key] = (ok, now + AUTH_CACHE_S)
        return ok


def _basic_credentials(authorization: str | None) -> tuple[bytes, bytes] | None:
    """(user, password) from ``Basic base64(user:password)``, or None."""
    if authorization is None:
        return None
    scheme, _, encoded = authorization.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = b64decode(encoded.strip(), validate=True)
    except (Base64Error, ValueError):
        return None
    user, sep, password = decoded.partition(b":")
    return (user, password) if sep else None


class RateLimiter:
    """rate_limit: a token bucket (Go's rate.Limiter): ``burst`` requests at once, then one
    every ``interval_s``."""

    def __init__(self, interval_s: float, burst: int) -> None:
        self._interval_s = interval_s
        self._burst = burst
        self._tokens = float(burst)
        self._at = time.monotonic()
        self._lock = threading.Lock()

    def allow(self) -> bool:
        """Take a token if one is left."""
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self._burst, self._tokens + (now - self._at) / self._interval_s)
            self._at = now
            if self._tokens < 1:
                return False
            self._tokens -= 1
            return True


def load_web_config(path: str) -> WebConfig:
    """Read and check a web config file; UsageError (one line) on anything wrong with it."""
    where = f"--web-config-file {_show(path)}"
    yaml = _import("yaml", "PyYAML", where)
    text = _read_text(path, where)
    try:
        _no_duplicate_keys(yaml.compose(text, Loader=yaml.SafeLoader), where, set())
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "cannot parse"
        raise UsageError(f"{where}: not valid YAML: {problem}{line}") from None
    top = _mapping(data, _TOP_KEYS, where, "the file")
    base = os.path.dirname(os.path.abspath(path))
    tls, sans = _tls(
        _mapping(top.get("tls_server_config"), _TLS_KEYS, where, "tls_server_config"), base, where
    )
    return WebConfig(
        tls=tls,
        allowed_sans=sans,
        headers=_headers(top.get("http_server_config"), where),
        auth=_auth(top.get("basic_auth_users"), where),
        limiter=_limiter(top.get("rate_limit"), where),
    )


def _import(module: str, package: str, where: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise UsageError(f"{where}: needs the {package} package: pip install {package}") from None


def _show(text: str) -> str:
    return clean(text)


def _read_bytes(path: str, where: str, what: str) -> bytes:
    """The bytes of a regular file of at most MAX_FILE_BYTES. Opened non-blocking and checked
    before any read: a FIFO would block until a writer comes, a device might never end."""
    if what != "the file":  # the config file itself: its path is already in ``where``
        what = f"{what} {_show(path)}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise UsageError(f"{where}: cannot read {what}: {_strerror(exc)}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(f"{where}: {what} is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as file:
            data = file.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"{where}: cannot read {what}: {_strerror(exc)}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        raise UsageError(f"{where}: {what} is over {MAX_FILE_BYTES >> 20} MiB")
    return data


def _strerror(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _read_text(path: str, where: str) -> str:
    data = _read_bytes(path, where, "the file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{where}: not UTF-8 text") from None


def _no_duplicate_keys(node: Any, where: str, seen: set[int]) -> None:
    """Refuse a key given twice in one mapping (PyYAML keeps the last one silently; the
    toolkit's strict decoding refuses it): a second password for a user is a mistake."""
    if node is None or id(node) in seen:  # an alias: its node is walked once
        return
    seen.add(id(node))
    if node.id == "mapping":
        keys: set[str] = set()
        for key, value in node.value:
            if key.id == "scalar":
                if key.value in keys:
                    line = key.start_mark.line + 1
                    raise UsageError(
                        f"{where}: {_show(str(key.value))!r} given twice (line {line})"
                    )
                keys.add(key.value)
            _no_duplicate_keys(value, where, seen)
    elif node.id == "sequence":
        for item in node.value:
            _no_duplicate_keys(item, where, seen)


def _mapping(value: object, keys: tuple[str, ...], where: str, what: str) -> dict[str, Any]:
    """A mapping whose keys are all in ``keys`` (None: empty, as the toolkit reads a bare key)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UsageError(f"{where}: {what} must be a mapping of keys to values")
    for key in value:
        if key not in keys:
            raise UsageError(
                f"{where}: unknown key {_show(str(key))!r} in {what} (known: {', '.join(keys)})"
            )
    return value


def _string(section: dict[str, Any], key: str, where: str, what: str) -> str:
    value = section.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise UsageError(f"{where}: {what}.{key} must be a string")
    return value


def _strings(section: dict[str, Any], key: str, where: str, what: str) -> list[str] | None:
    value = section.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise UsageError(f"{where}: {what}.{key} must be a list of strings")
    return value


def _tls(
    section: dict[str, Any], base: str, where: str
) -> tuple[ssl.SSLContext | None, frozenset[str] | None]:
    """The server's SSLContext, or None when the section turns nothing on (as the toolkit's
    TLSConfig.IsEnabled: a certificate, key, client CA or client_auth_type)."""
    what = "tls_server_config"
    s = {
        key: _string(section, key, where, what)
        for key in _TLS_KEYS
        if key
        not in (
            "client_allowed_sans",
            "cipher_suites",
            "curve_preferences",
            "prefer_server_cipher_suites",
        )
    }
    enabled = any(s[key] for key in _TLS_TURNS_ON)
    sans = _strings(section, "client_allowed_sans", where, what)
    ciphers = _strings(section, "cipher_suites", where, what)
    curves = _strings(section, "curve_preferences", where, what)
    prefer = section.get("prefer_server_cipher_suites", True)
    if not isinstance(prefer, bool):
        raise UsageError(f"{where}: {what}.prefer_server_cipher_suites must be true or false")
    if not enabled:
        return None, None
    for inline, file in (
        ("cert", "cert_file"),
        ("key", "key_file"),
        ("client_ca", "client_ca_file"),
    ):
        if s[inline] and s[file]:
            raise UsageError(f"{where}: {what}: give {inline} or {file}, not both")
    if not s["cert"] and not s["cert_file"]:
        raise UsageError(f"{where}: {what}: missing one of cert or cert_file")
    if not s["key"] and not s["key_file"]:
        raise UsageError(f"{where}: {what}: missing one of key or key_file")
    auth = s["client_auth_type"]
    if auth in UNVERIFIED_CLIENT_AUTH:
        raise UsageError(
            f"{where}: {what}.client_auth_type {auth} takes any client certificate without "
            "checking it, which gputop does not do: use RequireAndVerifyClientCert"
            " (or VerifyClientCertIfGiven) with client_ca_file"
        )
    if auth not in CLIENT_AUTH:
        raise UsageError(
            f"{where}: {what}.client_auth_type: unknown {_show(auth)!r} (known: NoClientCert, "
            "VerifyClientCertIfGiven, RequireAndVerifyClientCert)"
        )
    has_ca = bool(s["client_ca"] or s["client_ca_file"])
    verify = CLIENT_AUTH[auth]
    if has_ca and verify == ssl.CERT_NONE:
        raise UsageError(
            f"{where}: {what}: client CA's have been configured without a "
            "client_auth_type (use RequireAndVerifyClientCert)"
        )
    if verify != ssl.CERT_NONE and not has_ca:
        raise UsageError(
            f"{where}: {what}.client_auth_type {auth} needs client_ca_file or "
            "client_ca (the CA that signs the clients' certificates)"
        )
    if sans is not None and verify == ssl.CERT_NONE:
        raise UsageError(
            f"{where}: {what}.client_allowed_sans needs client_auth_type RequireAndVerifyClientCert"
        )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _versions(ctx, s["min_version"] or "TLS12", s["max_version"] or "TLS13", where)
    if prefer:
        ctx.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    else:
        ctx.options &= ~ssl.OP_CIPHER_SERVER_PREFERENCE
    if ciphers:
        _ciphers(ctx, ciphers, where)
    if curves:
        _curve(ctx, curves, where)
    with (
        _pem_path(s["cert"], s["cert_file"], base, where, "cert_file") as cert,
        _pem_path(s["key"], s["key_file"], base, where, "key_file") as key,
    ):
        try:
            ctx.load_cert_chain(cert, key, password=_no_password)
        except _EncryptedKey:
            raise UsageError(
                f"{where}: {what}: the key is encrypted; give it unencrypted (as "
                "the toolkit needs too), readable only by gputop's user"
            ) from None
        except ssl.SSLError as exc:
            raise UsageError(
                f"{where}: {what}: cannot load the certificate and key: {_ssl_reason(exc)}"
            ) from None
    if has_ca:
        ctx.verify_mode = verify
        if s["client_ca_file"]:
            ca = _read_bytes(_join(base, s["client_ca_file"]), where, "client_ca_file")
        else:
            ca = s["client_ca"].encode()
        try:
            ctx.load_verify_locations(cadata=ca.decode("ascii", "replace"))
        except ssl.SSLError as exc:
            raise UsageError(
                f"{where}: {what}: cannot load the client CA: {_ssl_reason(exc)}"
            ) from None
    return ctx, None if sans is None else frozenset(sans)


def _versions(ctx: ssl.SSLContext, low: str, high: str, where: str) -> None:
    for key, name in (("min_version", low), ("max_version", high)):
        if name not in TLS_VERSIONS:
            raise UsageError(
                f"{where}: tls_server_config.{key}: unknown TLS version "
                f"{_show(name)!r} (known: {', '.join(TLS_VERSIONS)})"
            )
    if TLS_VERSIONS[low] > TLS_VERSIONS[high]:
        raise UsageError(
            f"{where}: tls_server_config: min_version {low} is above max_version {high}"
        )
    ctx.minimum_version = TLS_VERSIONS[low]
    ctx.maximum_version = TLS_VERSIONS[high]


def _ciphers(ctx: ssl.SSLContext, names: list[str], where: str) -> None:
    openssl = []
    for name in names:
        if name not in CIPHERS:
            raise UsageError(
                f"{where}: tls_server_config.cipher_suites: unknown cipher "
                f"{_show(name)!r} (Go's names, e.g. "
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)"
            )
        if (mapped := CIPHERS[name]) is not None:
            openssl.append(mapped)
    if not openssl:  # TLS 1.3 suites only: nothing to set, as in Go
        return
    try:
        ctx.set_ciphers(":".join(openssl))
    except ssl.SSLError:
        raise UsageError(
            f"{where}: tls_server_config.cipher_suites: this OpenSSL offers none of them"
        ) from None


def _curve(ctx: ssl.SSLContext, names: list[str], where: str) -> None:
    for name in names:
        if name not in CURVES:
            raise UsageError(
                f"{where}: tls_server_config.curve_preferences: unknown curve "
                f"{_show(name)!r} (known: {', '.join(CURVES)})"
            )
    if len(names) > 1:
        # Python's ssl sets one curve (SSLContext.set_ecdh_curve): a list would be served as
        # its first curve alone, which is not what it says.
        raise UsageError(
            f"{where}: tls_server_config.curve_preferences: gputop can use one curve only; give one"
        )
    try:
        ctx.set_ecdh_curve(CURVES[names[0]])
    except (ValueError, ssl.SSLError):
        raise UsageError(
            f"{where}: tls_server_config.curve_preferences: this OpenSSL has no {names[0]}"
        ) from None


def _join(base: str, path: str) -> str:
    """A path relative to the config file's folder, as the toolkit's SetDirectory."""
    return os.path.join(base, path)


@contextlib.contextmanager
def _pem_path(inline: str, file: str, base: str, where: str, what: str) -> Iterator[str]:
    """A path load_cert_chain can read: the file (checked to be readable first), or the inline
    PEM in an anonymous memory file (a key never touches the disk)."""
    if file:
        path = _join(base, file)
        _read_bytes(path, where, what)
        yield path
        return
    try:
        fd = os.memfd_create("gputop-web-config", 0)
    except (AttributeError, OSError):
        raise UsageError(f"{where}: inline PEM needs memfd_create: use {what}") from None
    try:
        os.write(fd, inline.encode())
        yield f"/proc/self/fd/{fd}"
    finally:
        os.close(fd)


class _EncryptedKey(Exception):
    """The key asks for a password: gputop has none to give (and must never prompt)."""


def _no_password() -> bytes:
    raise _EncryptedKey


def _ssl_reason(exc: ssl.SSLError) -> str:
    """OpenSSL's reason in words: "KEY_VALUES_MISMATCH" -> "key values mismatch"."""
    reason = exc.reason
    if not reason or reason in ("PEM lib", "SSL"):
        return "not a PEM certificate and its key"
    return str(reason).lower().replace("_", " ")


def _headers(value: object, where: str) -> tuple[tuple[str, str], ...]:
    section = _mapping(value, ("http2", "headers"), where, "http_server_config")
    http2 = section.get("http2", True)
    if not isinstance(http2, bool):  # accepted, as the toolkit: this server speaks HTTP/1 only
        raise UsageError(f"{where}: http_server_config.http2 must be true or false")
    headers = _mapping(section.get("headers"), tuple(HEADERS), where, "http_server_config.headers")
    out = []
    for name, text in headers.items():
        if not isinstance(text, str) or not text.isprintable() or not text.isascii():
            raise UsageError(
                f"{where}: http_server_config.headers.{name} must be one line of printable ASCII"
            )
        allowed = HEADERS[name]
        if allowed and text not in allowed:
            raise UsageError(
                f"{where}: http_server_config.headers.{name}: {_show(text)!r} is "
                f"not one of {', '.join(allowed)}"
            )
        if text:  # blank: unset, as the toolkit documents
            out.append((name, text))
    return tuple(out)


def _auth(value: object, where: str) -> BasicAuth | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise UsageError(f"{where}: basic_auth_users must be a mapping of users to bcrypt hashes")
    users: dict[str, bytes] = {}
    for user, hashed in value.items():
        if not isinstance(user, str) or not user or ":" in user or not user.isprintable():
            # RFC 7617: a user-id cannot hold a colon, so such a user could never log in
            raise UsageError(
                f"{where}: basic_auth_users: {_show(str(user))!r} is not a usable "
                "user name (printable, no colon)"
            )
        if (
            not isinstance(hashed, str)
            or _BCRYPT.fullmatch(hashed) is None
            or not (4 <= int(hashed[4:6]) <= 31)
        ):
            raise UsageError(
                f"{where}: basic_auth_users.{_show(user)}: not a bcrypt hash "
                "(make one with: htpasswd -nBC 10 \"\" | tr -d ':\\n')"
            )
        users[user] = hashed.encode()
    if not users:
        return None
    bcrypt = _import("bcrypt", "bcrypt", where)
    return BasicAuth(users, bcrypt.checkpw)


def _limiter(value: object, where: str) -> RateLimiter | None:
    section = _mapping(value, ("interval", "burst"), where, "rate_limit")
    interval = section.get("interval", 0)
    burst = section.get("burst", 0)
    if isinstance(burst, bool) or not isinstance(burst, int) or burst < 0:
        raise UsageError(f"{where}: rate_limit.burst must be a whole number")
    interval_s = _duration(interval, where)
    if interval_s == 0:
        return None
    if burst < 1:
        # Go's rate.Limiter with burst 0 allows nothing: every scrape would get 429
        raise UsageError(f"{where}: rate_limit.burst must be at least 1")
    return RateLimiter(interval_s, burst)


def _duration(value: object, where: str) -> float:
    """Seconds in a Go duration ("1s", "1m30s", "250ms", 0)."""
    if value == 0 and not isinstance(value, bool):
        return 0.0
    if not isinstance(value, str) or _DURATION.fullmatch(value) is None:
        raise UsageError(
            f"{where}: rate_limit.interval: {_show(str(value))!r} is not a duration such as "
            "1s, 500ms or 1m"
        )
    return sum(
        float(number) * _DURATION_UNIT_S[unit] for number, unit in _DURATION_PART.findall(value)
    )
