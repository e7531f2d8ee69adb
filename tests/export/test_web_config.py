"""--web-config-file, read: the exporter-toolkit's format, and one line for whatever is wrong.

Certificates come from `openssl req` run with fixed arguments (skipped without openssl).
"""

from __future__ import annotations

import base64
import os
import shutil
import ssl
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from gputop.errors import UsageError
from gputop.export import web_config
from gputop.export.web_config import BasicAuth, RateLimiter, WebConfig, load_web_config

bcrypt = pytest.importorskip("bcrypt")
pytest.importorskip("yaml")

PASSWORD = "s3cret pass"
# cost 4: the lowest bcrypt allows, so the tests stay fast (the check itself is bcrypt's)
HASH = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()


@dataclass(frozen=True)
class Certs:
    """PEM files in ``folder``: a server cert for localhost/127.0.0.1 (its own CA), two client
    certs (SANs scraper.example and intruder.example) and a bundle of both to trust them."""

    folder: Path
    cert: Path
    key: Path
    client: Path
    client_key: Path
    intruder: Path
    intruder_key: Path
    client_cas: Path


def _self_signed(folder: Path, name: str, cn: str, san: str) -> tuple[Path, Path]:
    cert, key = folder / f"{name}.pem", folder / f"{name}-key.pem"
    # fixed arguments only: names and SANs are the test's own constants
    fixed = ["req", "-x509", "-nodes", "-days", "2", "-newkey", "ec"]
    fixed += ["-pkeyopt", "ec_paramgen_curve:prime256v1"]
    names = ["-subj", f"/CN={cn}", "-addext", f"subjectAltName={san}"]
    files = ["-keyout", str(key), "-out", str(cert)]
    subprocess.run(["openssl", *fixed, *names, *files], check=True, capture_output=True, timeout=30)
    return cert, key


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    if shutil.which("openssl") is None:
        pytest.skip("no openssl to make test certificates")
    folder = tmp_path_factory.mktemp("certs")
    cert, key = _self_signed(folder, "server", "localhost", "DNS:localhost,IP:127.0.0.1")
    client, client_key = _self_signed(folder, "client", "scraper", "DNS:scraper.example")
    intruder, intruder_key = _self_signed(folder, "intruder", "intruder", "DNS:intruder.example")
    client_cas = folder / "client-cas.pem"
    client_cas.write_bytes(client.read_bytes() + intruder.read_bytes())
    return Certs(folder, cert, key, client, client_key, intruder, intruder_key, client_cas)


def write_config(folder: Path, text: str, name: str = "web.yml") -> str:
    path = folder / name
    path.write_text(text)
    return str(path)


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def _refused(folder: Path, text: str) -> str:
    with pytest.raises(UsageError) as caught:
        load_web_config(write_config(folder, text))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("--web-config-file ")
    return message


# The file as a whole


def test_an_empty_file_turns_nothing_on(tmp_path: Path) -> None:
    assert load_web_config(write_config(tmp_path, "")) == WebConfig()
    assert load_web_config(write_config(tmp_path, "tls_server_config:\n")) == WebConfig()


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("tls_config:\n  cert_file: x\n", "unknown key 'tls_config' in the file"),
        ("tls_server_config:\n  certfile: x\n", "unknown key 'certfile' in tls_server_config"),
        ("http_server_config:\n  http3: true\n", "unknown key 'http3' in http_server_config"),
        ("rate_limit:\n  rate: 1\n", "unknown key 'rate' in rate_limit"),
        ("- a\n- b\n", "the file must be a mapping"),
        ("basic_auth_users: [alice]\n", "basic_auth_users must be a mapping"),
        ("tls_server_config:\n  cert_file: [a]\n", "tls_server_config.cert_file must be a string"),
        ("a: [\n", "not valid YAML"),
        ("basic_auth_users:\n  alice: x\n  alice: y\n", "'alice' given twice (line 3)"),
    ],
)
def test_what_the_toolkit_refuses_is_refused_in_one_line(
    tmp_path: Path, text: str, words: str
) -> None:
    assert words in _refused(tmp_path, text)


def test_a_missing_file_a_folder_and_a_fifo_are_refused_without_blocking(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read the file: No such file"):
        load_web_config(str(tmp_path / "nope.yml"))
    with pytest.raises(UsageError, match="is not a regular file"):
        load_web_config(str(tmp_path))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    done = threading.Event()

    def load() -> None:
        with pytest.raises(UsageError, match="not a regular file"):
            load_web_config(str(fifo))
        done.set()

    threading.Thread(target=load, daemon=True).start()
    assert done.wait(5), "reading a FIFO blocked"


def test_a_path_with_control_characters_is_shown_escaped(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as caught:
        load_web_config(str(tmp_path / "evil\x1b[2Jname"))
    assert "\x1b" not in str(caught.value)


# basic_auth_users


def test_a_password_that_is_not_a_bcrypt_hash_is_refused(tmp_path: Path) -> None:
    message = _refused(tmp_path, "basic_auth_users:\n  alice: plaintext\n")
    assert "basic_auth_users.alice: not a bcrypt hash" in message
    assert "plaintext" not in message  # a secret is never echoed


def test_a_user_name_with_a_colon_is_refused(tmp_path: Path) -> None:
    assert "not a usable user name" in _refused(tmp_path, f"basic_auth_users:\n  'a:b': '{HASH}'\n")


def test_users_with_hashes_check_a_basic_header(tmp_path: Path) -> None:
    config = load_web_config(write_config(tmp_path, f"basic_auth_users:\n  alice: '{HASH}'\n"))
    assert config.auth is not None
    assert config.auth.check(basic("alice", PASSWORD))
    assert config.auth.check(basic("alice", PASSWORD).replace("Basic", "basic"))
    for header in (
        None,
        "",
        basic("alice", "wrong"),
        basic("bob", PASSWORD),
        "Bearer " + basic("alice", PASSWORD)[6:],
        "Basic !!!notbase64",
        "Basic " + base64.b64encode(b"alice").decode(),  # no colon
        basic("alice", "x" * 100),  # over bcrypt's 72 bytes: bcrypt 5 raises, a 401 here
    ):
        assert not config.auth.check(header), header


class _Recorder:
    """A checkpw that records what it was asked (and answers as bcrypt would)."""

    def __init__(self) -> None:
        self.calls: list[bytes] = []

    def __call__(self, password: bytes, hashed: bytes) -> bool:
        self.calls.append(hashed)
        result: bool = bcrypt.checkpw(password, hashed)
        return result


def test_an_unknown_user_costs_a_bcrypt_check_against_the_costliest_hash() -> None:
    cheap = bcrypt.hashpw(b"a", bcrypt.gensalt(rounds=4))
    dear = bcrypt.hashpw(b"b", bcrypt.gensalt(rounds=5))
    recorder = _Recorder()
    auth = BasicAuth({"cheap": cheap, "dear": dear}, recorder)
    assert not auth.check(basic("mallory", "a"))
    assert recorder.calls == [dear]  # as long as a known user's check: no user enumeration
    # ... and a known user's right password does not open an unknown user's door
    assert not auth.check(basic("nobody", "b"))


def test_checks_are_cached_briefly_by_user_and_password(monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = _Recorder()
    auth = BasicAuth({"alice": HASH.encode()}, recorder)
    assert auth.check(basic("alice", PASSWORD))
    assert auth.check(basic("alice", PASSWORD))
    assert len(recorder.calls) == 1  # the second scrape costs no bcrypt check
    assert not auth.check(basic("alice", "wrong"))
    assert not auth.check(basic("alice", "wrong"))
    assert len(recorder.calls) == 2  # a wrong password is not "cached as right"
    now = web_config.time.monotonic()
    monkeypatch.setattr(web_config.time, "monotonic", lambda: now + web_config.AUTH_CACHE_S + 1)
    assert auth.check(basic("alice", PASSWORD))
    assert len(recorder.calls) == 3  # expired: checked again


def test_the_cache_holds_no_password_and_stays_bounded() -> None:
    auth = BasicAuth({"alice": HASH.encode()}, lambda _p, _h: False)
    for i in range(web_config.AUTH_CACHE_SIZE + 50):
        auth.check(basic("alice", f"guess-{i}"))
    cache = auth._cache
    assert len(cache) == web_config.AUTH_CACHE_SIZE
    assert not any(b"guess" in key for key in cache)


# tls_server_config


def _tls(certs: Certs, extra: str = "") -> str:
    return f"tls_server_config:\n  cert_file: {certs.cert}\n  key_file: {certs.key}\n{extra}"


def test_a_certificate_and_key_make_a_server_context(certs: Certs) -> None:
    config = load_web_config(write_config(certs.folder, _tls(certs)))
    assert isinstance(config.tls, ssl.SSLContext)
    assert config.tls.minimum_version == ssl.TLSVersion.TLSv1_2  # the toolkit's default
    assert config.tls.verify_mode == ssl.CERT_NONE


def test_relative_paths_are_read_from_the_config_files_folder(certs: Certs) -> None:
    text = "tls_server_config:\n  cert_file: server.pem\n  key_file: server-key.pem\n"
    path = write_config(certs.folder, text, "relative.yml")
    assert load_web_config(path).tls is not None


def test_inline_cert_and_key_are_loaded(certs: Certs) -> None:
    cert = certs.cert.read_text().replace("\n", "\n    ")
    key = certs.key.read_text().replace("\n", "\n    ")
    text = f"tls_server_config:\n  cert: |\n    {cert}\n  key: |\n    {key}\n"
    assert load_web_config(write_config(certs.folder, text, "inline.yml")).tls is not None


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ("  min_version: TLS14\n", "unknown TLS version 'TLS14'"),
        ("  min_version: TLS13\n  max_version: TLS12\n", "min_version TLS13 is above max_version"),
        ("  cipher_suites: [TLS_FOO]\n", "unknown cipher 'TLS_FOO'"),
        ("  curve_preferences: [CurveP999]\n", "unknown curve 'CurveP999'"),
        ("  curve_preferences: [X25519, CurveP256]\n", "one curve only"),
        ("  client_auth_type: Sometimes\n", "unknown 'Sometimes'"),
        ("  client_auth_type: RequireAnyClientCert\n", "without checking it"),
        ("  client_auth_type: RequireAndVerifyClientCert\n", "needs client_ca_file"),
        ("  client_allowed_sans: [a]\n", "client_allowed_sans needs client_auth_type"),
        ("  prefer_server_cipher_suites: maybe\n", "must be true or false"),
    ],
)
def test_bad_tls_settings_are_refused(certs: Certs, extra: str, words: str) -> None:
    assert words in _refused(certs.folder, _tls(certs, extra))


def test_a_client_ca_without_a_client_auth_type_is_refused(certs: Certs) -> None:
    text = _tls(certs, f"  client_ca_file: {certs.client_cas}\n")
    assert "without a client_auth_type" in _refused(certs.folder, text)


def test_tls_settings_the_toolkit_documents_are_applied(certs: Certs) -> None:
    extra = (
        "  min_version: TLS13\n  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]\n"
        "  curve_preferences: [CurveP256]\n  prefer_server_cipher_suites: false\n"
        f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {certs.client_cas}\n"
        "  client_allowed_sans: [scraper.example]\n"
    )
    config = load_web_config(write_config(certs.folder, _tls(certs, extra)))
    assert config.tls is not None
    assert config.tls.minimum_version == ssl.TLSVersion.TLSv1_3
    assert config.tls.verify_mode == ssl.CERT_REQUIRED
    assert not config.tls.options & ssl.OP_CIPHER_SERVER_PREFERENCE
    tls12 = [c["name"] for c in config.tls.get_ciphers() if c["protocol"] == "TLSv1.2"]
    assert tls12 == ["ECDHE-ECDSA-AES128-GCM-SHA256"]
    assert config.allowed_sans == frozenset({"scraper.example"})


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ("missing", "cannot read cert_file"),
        ("garbage", "cannot load the certificate and key"),
        ("mismatch", "cannot load the certificate and key: key values mismatch"),
        ("encrypted", "the key is encrypted"),
        ("no key", "missing one of key or key_file"),
    ],
)
def test_a_bad_certificate_or_key_is_refused(
    certs: Certs, tmp_path: Path, change: str, words: str
) -> None:
    cert, key = str(certs.cert), str(certs.key)
    if change == "missing":
        cert = str(tmp_path / "missing.pem")
    elif change == "garbage":
        cert = write_config(tmp_path, "not a certificate\n", "garbage.pem")
    elif change == "mismatch":
        key = str(certs.client_key)
    elif change == "encrypted":
        key = str(tmp_path / "encrypted.pem")
        encrypt = ["pkey", "-in", str(certs.key), "-aes256", "-passout", "pass:test"]
        subprocess.run(
            ["openssl", *encrypt, "-out", key], check=True, capture_output=True, timeout=30
        )
    text = f"tls_server_config:\n  cert_file: {cert}\n"
    if change != "no key":
        text += f"  key_file: {key}\n"
    assert words in _refused(tmp_path, text)


def test_a_client_ca_that_holds_no_certificate_is_refused(certs: Certs, tmp_path: Path) -> None:
    bad = write_config(tmp_path, "nothing here\n", "ca.pem")
    extra = f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {bad}\n"
    assert "cannot load the client CA" in _refused(tmp_path, _tls(certs, extra))


def test_allowed_sans_match_a_certificates_dns_or_ip_names() -> None:
    config = WebConfig(allowed_sans=frozenset({"scraper.example", "2001:db8::1"}))
    assert config.san_allowed({"subjectAltName": (("DNS", "scraper.example"),)})
    # Python writes IPv6 SANs in full and upper case; the toolkit compares Go's short form
    assert config.san_allowed({"subjectAltName": (("IP Address", "2001:DB8:0:0:0:0:0:1"),)})
    assert not config.san_allowed({"subjectAltName": (("DNS", "intruder.example"),)})
    assert not config.san_allowed({})
    assert WebConfig().san_allowed({})


# http_server_config and rate_limit


def test_headers_are_the_toolkits_and_checked(tmp_path: Path) -> None:
    text = (
        "http_server_config:\n  http2: false\n  headers:\n    X-Frame-Options: deny\n"
        "    Strict-Transport-Security: max-age=31536000\n    X-XSS-Protection: ''\n"
    )
    config = load_web_config(write_config(tmp_path, text))
    assert config.headers == (
        ("X-Frame-Options", "deny"),
        ("Strict-Transport-Security", "max-age=31536000"),
    )  # a blank value is unset
    bad_value = "http_server_config:\n  headers:\n    X-Frame-Options: allow\n"
    assert "'allow' is not one of deny, sameorigin" in _refused(tmp_path, bad_value)
    other = "http_server_config:\n  headers:\n    Set-Cookie: a=b\n"
    assert "unknown key 'Set-Cookie'" in _refused(tmp_path, other)
    injected = 'http_server_config:\n  headers:\n    Content-Security-Policy: "a\\r\\nX: y"\n'
    assert "one line of printable ASCII" in _refused(tmp_path, injected)


@pytest.mark.parametrize(
    ("interval", "seconds"), [("1s", 1.0), ("250ms", 0.25), ("1m30s", 90.0), ("1.5h", 5400.0)]
)
def test_rate_limit_reads_go_durations(tmp_path: Path, interval: str, seconds: float) -> None:
    config = load_web_config(
        write_config(tmp_path, f"rate_limit:\n  interval: {interval}\n  burst: 3\n")
    )
    assert config.limiter is not None
    assert config.limiter._interval_s == pytest.approx(seconds)


def test_rate_limit_zero_is_off_and_bad_values_are_refused(tmp_path: Path) -> None:
    for off in ("rate_limit:\n  interval: 0\n", "rate_limit:\n  interval: '0'\n  burst: 5\n"):
        assert load_web_config(write_config(tmp_path, off)).limiter is None
    assert "not a duration" in _refused(tmp_path, "rate_limit:\n  interval: 1 second\n  burst: 1\n")
    assert "not a duration" in _refused(tmp_path, "rate_limit:\n  interval: -1s\n  burst: 1\n")
    assert "at least 1" in _refused(tmp_path, "rate_limit:\n  interval: 1s\n")
    assert "whole number" in _refused(tmp_path, "rate_limit:\n  interval: 1s\n  burst: many\n")


def test_the_rate_limiter_allows_a_burst_then_one_per_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [100.0]
    monkeypatch.setattr(web_config.time, "monotonic", lambda: now[0])
    limiter = RateLimiter(2.0, 3)
    assert [limiter.allow() for _ in range(4)] == [True, True, True, False]
    now[0] += 1.0
    assert not limiter.allow()
    now[0] += 1.0
    assert limiter.allow()
    assert not limiter.allow()
