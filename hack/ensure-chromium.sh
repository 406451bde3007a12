#!/usr/bin/env bash
# Installs Debian's chromium for the browser tests when it is missing and
# this machine can (root with apt-get). Otherwise it says what is needed;
# the browser tests then fail with the same message rather than skip.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || [[ -x "${USERLAND_CHROMIUM:-/nonexistent}" ]]; then
  exit 0
fi
if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
  echo "installing chromium for the browser tests (apt-get) ..." >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >&2
  exit 0
fi
echo "chromium is missing and cannot be installed here: install Debian's 'chromium' package, or set USERLAND_CHROMIUM to a Chromium binary" >&2
