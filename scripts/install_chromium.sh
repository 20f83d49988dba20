#!/usr/bin/env bash
# Install Debian's Chromium for the browser tests and the demo's screenshots, where it is
# missing. Playwright drives this system browser: nothing downloads a browser at run time.
# Exit 0 when Chromium is there afterwards, 1 (with one line saying why) when it is not.
set -uo pipefail
CHROMIUM="${MNEMORAY_CHROMIUM:-/usr/bin/chromium}"
if [ -x "$CHROMIUM" ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "chromium: not installed and no apt-get here; install Chromium and set MNEMORAY_CHROMIUM" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
  if sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    echo "chromium: not installed, and installing it needs root (apt-get install chromium)" >&2
    exit 1
  fi
fi
echo "installing Debian's chromium (apt-get) for the browser tests..." >&2
export DEBIAN_FRONTEND=noninteractive
if ! $SUDO apt-get install -y -q --no-install-recommends chromium >/tmp/mnemoray-apt.log 2>&1; then
  # A fresh machine may have no package lists yet.
  $SUDO apt-get update -q >>/tmp/mnemoray-apt.log 2>&1
  $SUDO apt-get install -y -q --no-install-recommends chromium >>/tmp/mnemoray-apt.log 2>&1
fi
if [ -x "$CHROMIUM" ]; then
  exit 0
fi
echo "chromium: apt-get install failed (log: /tmp/mnemoray-apt.log)" >&2
exit 1
