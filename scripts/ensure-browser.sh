#!/usr/bin/env bash
# Provide the Chromium that tests/test_explorer_browser.py drives (called by `make test`).
#
# Usage: scripts/ensure-browser.sh [PYTHON]   (PYTHON: the venv's python with Playwright; default .venv/bin/python)
#
# In order, the first that works:
#   1. a browser is already there: $MEMORYQUEST_CHROMIUM, `chromium` or `chromium-browser` on PATH,
#      /usr/bin/chromium, or Playwright's own Chromium -> nothing to do;
#   2. apt-get, and root or passwordless sudo -> Debian's chromium from apt;
#   3. `PYTHON -m playwright install chromium` (Playwright's download, in the user's cache).
# Exit status 0 when a browser is there; otherwise one line on stderr saying what to install, status 1.
#
# Only builtins and the commands above are used, so tests can run it with a PATH of stub commands.
# MEMORYQUEST_CHROMIUM_CANDIDATES (space-separated, default /usr/bin/chromium) exists for those tests.
set -uo pipefail

python="${1:-.venv/bin/python}"
candidates="${MEMORYQUEST_CHROMIUM_CANDIDATES-/usr/bin/chromium}"
apt_packages=(chromium)

say() { echo "ensure-browser: $*"; }
give_up() {
  echo "ensure-browser: $*; the explorer's browser tests will fail" >&2
  exit 1
}

if [ -n "${MEMORYQUEST_CHROMIUM:-}" ]; then
  # The tests use this path before any other, so nothing else would help.
  [ -x "$MEMORYQUEST_CHROMIUM" ] && exit 0
  give_up "MEMORYQUEST_CHROMIUM=$MEMORYQUEST_CHROMIUM is not an executable: point it at a Chromium or unset it"
fi

system_chromium() {
  command -v chromium >/dev/null 2>&1 && return 0
  command -v chromium-browser >/dev/null 2>&1 && return 0
  local candidate
  for candidate in $candidates; do
    [ -x "$candidate" ] && return 0
  done
  return 1
}

playwright_chromium() {
  [ -x "$python" ] || return 1
  "$python" -c '
import os, sys
from playwright.sync_api import sync_playwright
with sync_playwright() as playwright:
    path = playwright.chromium.executable_path
sys.exit(0 if os.path.isfile(path) else 1)
' >/dev/null 2>&1
}

system_chromium && exit 0
playwright_chromium && exit 0

if command -v apt-get >/dev/null 2>&1; then
  can_install=no
  sudo=()
  if [ "$(id -u 2>/dev/null)" = 0 ]; then
    can_install=yes
    export DEBIAN_FRONTEND=noninteractive
  elif command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1; then
    can_install=yes
    sudo=(sudo -n)
  fi
  if [ "$can_install" = yes ]; then
    say "installing Debian's chromium with apt-get (for the explorer's browser tests)"
    if ${sudo[@]+"${sudo[@]}"} apt-get update \
      && ${sudo[@]+"${sudo[@]}"} apt-get install -y --no-install-recommends "${apt_packages[@]}" \
      && system_chromium; then
      exit 0
    fi
    say "apt-get could not install chromium; trying Playwright's Chromium"
  fi
fi

if [ -x "$python" ]; then
  say "installing Playwright's Chromium (for the explorer's browser tests)"
  "$python" -m playwright install chromium && exit 0
fi

give_up "no Chromium and none could be installed: install Debian's chromium (apt-get install chromium) or run '$python -m playwright install chromium', or set MEMORYQUEST_CHROMIUM"
