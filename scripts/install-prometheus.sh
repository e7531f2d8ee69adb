#!/bin/sh
# Best effort: install Debian's `prometheus` package so tests/export/test_prometheus.py can run a
# real Prometheus server on loopback. Never fails the build: when it cannot install, it says why
# and exits 0 (the integration test then skips with the reason).
# Set GPUTOP_SKIP_PROMETHEUS=1 to skip it.

say() { echo "install-prometheus: $*"; }

if [ -n "${GPUTOP_SKIP_PROMETHEUS:-}" ]; then
    say "skipped (GPUTOP_SKIP_PROMETHEUS is set)"; exit 0
fi
if command -v prometheus >/dev/null 2>&1 || [ -x /usr/bin/prometheus ]; then
    say "already installed ($(command -v prometheus || echo /usr/bin/prometheus))"; exit 0
fi
if [ "$(id -u)" != "0" ]; then
    say "skipped: not root (as root: apt-get install prometheus)"; exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    say "skipped: no apt-get on this system (install Prometheus by hand to run its test)"; exit 0
fi
say "installing Debian's prometheus package (for the exporter's integration test)"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get update -qq >/dev/null 2>&1; then
    say "skipped: apt-get update failed"; exit 0
fi
# --no-install-recommends: the server binary only; no service is started where there is no systemd.
if ! apt-get install -y -qq --no-install-recommends prometheus >/dev/null 2>&1; then
    say "skipped: apt-get install prometheus failed"; exit 0
fi
# The package enables a server on :9090 (all interfaces) where systemd runs; gputop's test starts
# its own on loopback, so stop and disable the one we just installed.
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    systemctl disable --now prometheus >/dev/null 2>&1 && say "disabled the prometheus service it enabled"
fi
say "installed $(prometheus --version 2>&1 | head -n 1)"
exit 0
