#!/usr/bin/env bash
# Installs the real applications the browser tests run behind the gateway,
# from Debian's packages, when they are missing and this machine can (root
# with apt-get): Jupyter Notebook with a Python kernel, phpMyAdmin with
# MariaDB and PHP's built-in server. Otherwise it says what is needed; the
# tests then fail with the same message rather than skip.
set -euo pipefail
need=()
for pkg in jupyter-notebook python3-ipykernel phpmyadmin mariadb-server php-cli php-mysql; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
((${#need[@]})) || exit 0
if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
  echo "installing ${need[*]} for the browser tests (apt-get) ..." >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
  exit 0
fi
echo "the browser tests need Debian packages ${need[*]}; install them and retry" >&2
exit 1
