#!/usr/bin/env bash
# Builds code-server 4.99.4 (VS Code in the browser) from the npm registry
# into the user cache, once, for the browser tests' real-app suite, and
# prints its directory. 4.99.4 is the last release that runs on node 20.
#
# Its own install script downloads ripgrep and native-module headers from
# GitHub, which machines without GitHub access cannot reach, so this does
# its postinstall by hand: Debian's ripgrep stands in for the download, and
# the native modules (kerberos, argon2) compile from source.
set -euo pipefail
VERSION=4.99.4
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/userland
DIR=$CACHE/code-server-$VERSION-r2
if [[ -x $DIR/node_modules/.bin/code-server && -f $DIR/.complete ]]; then
  echo "$DIR"
  exit 0
fi
need=()
for pkg in ripgrep libkrb5-dev libsecret-1-dev libx11-dev libxkbfile-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if ((${#need[@]})); then
  if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    echo "code-server needs Debian packages ${need[*]}; install them and retry" >&2
    exit 1
  fi
  echo "installing ${need[*]} for code-server (apt-get) ..." >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
fi
echo "building code-server $VERSION into $DIR (about 3 minutes, once) ..." >&2
rm -rf "$DIR.tmp"
mkdir -p "$DIR.tmp"
cd "$DIR.tmp"
export npm_config_unsafe_perm=true npm_config_yes=true npm_config_fund=false npm_config_audit=false npm_config_loglevel=error
npm init -y >/dev/null
npm install "code-server@$VERSION" --ignore-scripts >&2
# code-server's own native module (argon2, for password hashing) builds
# from source once its prebuilt download fails. (Not a plain rebuild: that
# would run code-server's postinstall, which downloads from GitHub.)
npm rebuild argon2 >&2
CS=$DIR.tmp/node_modules/code-server
cd "$CS/lib/vscode"
npm install --omit=dev --ignore-scripts >&2
mkdir -p node_modules/@vscode/ripgrep/bin
cp "$(command -v rg)" node_modules/@vscode/ripgrep/bin/rg
npm rebuild >&2
# The rest of code-server's postinstall.sh (vscode_install).
ln -sfn node_modules node_modules.asar
ln -sfn code-linux.sh bin/remote-cli/code-server
ln -sfn browser-linux.sh bin/helpers/browser.sh
(cd extensions && npm install --omit=dev --ignore-scripts >&2)
cd "$DIR.tmp"
touch .complete
rm -rf "$DIR"
mv "$DIR.tmp" "$DIR"
echo "$DIR"
