#!/bin/sh
# Best effort: install Debian's chromium so tests/web/test_browser.py can drive the web
# dashboard in a headless browser (over the DevTools protocol: no chromedriver needed). Never
# fails the build: when it cannot install, it says why and exits 0 (the browser tests then skip
# with the reason; the HTTP and websocket tests of tests/web still run).
# Set GPUTOP_SKIP_CHROMIUM=1 to skip it.

say() { echo "install-chromium: $*"; }

if [ -n "${GPUTOP_SKIP_CHROMIUM:-}" ]; then
    say "skipped (GPUTOP_SKIP_CHROMIUM is set)"; exit 0
fi
if command -v chromium >/dev/null 2>&1; then
    say "already installed ($(command -v chromium))"; exit 0
fi
if [ "$(id -u)" != "0" ]; then
    say "skipped: not root (as root: apt-get install chromium)"; exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    say "skipped: no apt-get on this system (install Chromium by hand to run the browser tests)"; exit 0
fi
say "installing Debian's chromium package (for the web dashboard's browser tests)"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get update -qq >/dev/null 2>&1; then
    say "skipped: apt-get update failed"; exit 0
fi
if ! apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1; then
    say "skipped: apt-get install chromium failed"; exit 0
fi
say "installed $(chromium --version 2>&1 | head -n 1)"
exit 0
