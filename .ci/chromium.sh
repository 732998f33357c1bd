#!/usr/bin/env bash
# Make Debian's Chromium available for the explorer's browser tests (tests/e2e/explorer).
#
# Idempotent: does nothing when the browser is already there, so CI and the README's test
# command can run it every time. Playwright's own browser download cannot work on these
# machines (no route to its CDN); the tests point Playwright at this system Chromium instead.
#
# Variables: AGENTENV_CHROMIUM (default /usr/bin/chromium, the path the tests launch).
set -euo pipefail

CHROMIUM="${AGENTENV_CHROMIUM:-/usr/bin/chromium}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

say() { printf '[chromium.sh] %s\n' "$*"; }

if [ -x "$CHROMIUM" ]; then
    exit 0
fi
say "apt-get install chromium"
$SUDO apt-get update -qq >/dev/null
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium fonts-liberation >/dev/null
say "$("$CHROMIUM" --version)"
