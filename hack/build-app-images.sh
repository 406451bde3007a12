#!/usr/bin/env bash
# build-app-images.sh builds the real apps' images for the real-node tests
# (issue 34) without a registry or a container engine, and prints the path
# of their manifest (a JSON list of {ref, archive, replaces}) on the last
# line of stdout; progress goes to stderr.
#
# Each app under hack/appimage/apps/NAME has image.json (its Debian
# packages, user, entrypoint, environment, and the public images it stands
# in for), setup.sh (run in the image's root filesystem after the
# packages) and rootfs/ (files copied over it). An image is:
#   - Debian's minimal system (debootstrap --variant=minbase, this
#     machine's release and mirror, from its apt sources), built once and
#     kept as the base;
#   - a copy of it with the app's packages installed by apt-get in a
#     chroot (no service is started: policy-rc.d), setup.sh and rootfs/;
#   - for code-server, hack/ensure-code-server.sh's build with the node.js
#     that built it (its native modules match that node; Debian's is older
#     than code-server needs);
#   - packed as one layer into an OCI archive by hack/appimage
#     (go-containerregistry), tagged userland.local/NAME:KEY.
# KEY hashes everything the image is made from: this script, the packer,
# the app's folder, the Debian release and, for code-server, its build and
# node's version. An image whose archive exists is not built again.
# Downloaded packages are kept (debs/) so that a rebuild downloads nothing.
#
# Arguments name the apps to build (default: all of them); the manifest
# then lists only those.
#
# Needs root (debootstrap, chroot) and debootstrap, installed with apt-get
# when missing. Everything lives under $XDG_CACHE_HOME/userland/app-images.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/userland/app-images
apps_dir=$root/hack/appimage/apps
base_revision=1

if [[ $(id -u) != 0 ]]; then
  echo "build-app-images: building images from Debian's packages needs root (debootstrap, chroot)" >&2
  exit 1
fi
if ! command -v debootstrap >/dev/null 2>&1; then
  echo "build-app-images: installing debootstrap (apt-get)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends debootstrap >&2
fi
. /etc/os-release
suite=${VERSION_CODENAME:?build-app-images: no VERSION_CODENAME in /etc/os-release (a Debian release is needed)}
# The mirror this machine's apt uses for its release (deb822 or one-line
# sources).
mirror=$(awk -v s="$suite" '
  /^URIs:/ {u=$2} /^Suites:/ {for (i=2; i<=NF; i++) if ($i==s && u!="") {print u; exit}}
' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
if [[ -z $mirror ]]; then
  mirror=$(awk -v s="$suite" '$1=="deb" && $3==s {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
fi
if [[ -z $mirror ]]; then
  echo "build-app-images: found no apt source for Debian $suite in /etc/apt" >&2
  exit 1
fi

mkdir -p "$cache/debs"
exec 9>"$cache/.lock"
flock 9

hash_of() { sha256sum | cut -c1-16; }
# The app's folder: every file's path, mode and content.
hash_dir() {
  (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -I{} sh -c 'stat -c "%n %a" "{}"; cat "{}"')
}

packer=$cache/.appimage
(cd "$root" && CGO_ENABLED=0 go build -trimpath -o "$packer" ./hack/appimage)

mounted=()
cleanup() {
  for m in "${mounted[@]}"; do umount "$m" 2>/dev/null || true; done
}
trap cleanup EXIT

# chroot_run ROOTFS CMD...: runs in the image's root filesystem with /proc.
chroot_run() {
  local rootfs=$1
  shift
  mount -t proc proc "$rootfs/proc"
  mounted+=("$rootfs/proc")
  local rc=0
  chroot "$rootfs" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 "$@" || rc=$?
  umount "$rootfs/proc"
  unset 'mounted[${#mounted[@]}-1]'
  return $rc
}

# remove_tree DIR, refusing while anything is mounted below it.
remove_tree() {
  if grep -q " $1/" /proc/self/mounts; then
    echo "build-app-images: $1 still has mounts; not removing it" >&2
    return 1
  fi
  rm -rf "$1"
}

base_key=$(printf '%s\n' "$suite" "$mirror" minbase "$base_revision" | hash_of)
base=$cache/base-$suite-$base_key
if [[ ! -f $base/.complete ]]; then
  start=$SECONDS
  echo "app-images: debootstrap --variant=minbase $suite into $base" >&2
  remove_tree "$base.tmp" && mkdir -p "$base.tmp"
  log=$cache/debootstrap.log
  if ! debootstrap --variant=minbase --cache-dir="$cache/debs" "$suite" "$base.tmp" "$mirror" >"$log" 2>&1; then
    echo "app-images: debootstrap failed (log: $log):" >&2
    tail -20 "$log" >&2
    exit 1
  fi
  # apt in the image uses this machine's sources (the release and its
  # updates and security suites).
  rm -f "$base.tmp/etc/apt/sources.list"
  cp /etc/apt/sources.list.d/*.sources "$base.tmp/etc/apt/sources.list.d/" 2>/dev/null ||
    cp /etc/apt/sources.list "$base.tmp/etc/apt/sources.list"
  touch "$base.tmp/.complete"
  remove_tree "$base" && mv "$base.tmp" "$base"
  echo "app-images: base $suite built in $((SECONDS - start))s" >&2
fi

entries=()
if (($# == 0)); then
  set -- $(cd "$apps_dir" && ls)
fi
for app in "$@"; do
  app_dir=$apps_dir/$app/
  if [[ ! -f $app_dir/image.json ]]; then
    echo "build-app-images: no app $app (hack/appimage/apps: $(cd "$apps_dir" && echo *))" >&2
    exit 2
  fi
  extra=""
  if [[ $app == code-server ]]; then
    code_server=$("$root/hack/ensure-code-server.sh")
    node=$(readlink -f "$(command -v node)")
    extra="$(basename "$code_server") $(sha256sum "$node" | cut -c1-64)"
  fi
  key=$({ cat "$0" "$root/hack/appimage/main.go"; hash_dir "$app_dir"; echo "$base_key $extra"; } | hash_of)
  archive=$cache/$app-$key.tar
  entries+=("$cache/$app-$key.json")
  if [[ -f $archive && -f $cache/$app-$key.json ]]; then
    echo "app-images: $app cached ($archive)" >&2
    continue
  fi
  start=$SECONDS
  work=$cache/work-$app
  remove_tree "$work"
  mkdir -p "$work"
  rootfs=$work/rootfs
  cp -a "$base" "$rootfs"
  rm -f "$rootfs/.complete"
  cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
  printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
  chmod 755 "$rootfs/usr/sbin/policy-rc.d"
  # Earlier downloads, hard-linked in and taken back out after.
  cp -l "$cache/debs/"*.deb "$rootfs/var/cache/apt/archives/" 2>/dev/null || true
  mapfile -t packages < <(python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["packages"]))' "$app_dir/image.json")
  log=$work/apt.log
  echo "app-images: $app: apt-get install ${packages[*]}" >&2
  if ! chroot_run "$rootfs" sh -c 'apt-get update -qq && apt-get install -y -qq --no-install-recommends "$@"' sh "${packages[@]}" >"$log" 2>&1; then
    echo "app-images: $app: apt-get failed (log: $log):" >&2
    tail -30 "$log" >&2
    exit 1
  fi
  for deb in "$rootfs/var/cache/apt/archives/"*.deb; do
    [[ -e $cache/debs/$(basename "$deb") ]] || cp -l "$deb" "$cache/debs/" 2>/dev/null || cp "$deb" "$cache/debs/"
  done
  if [[ -f $app_dir/setup.sh ]]; then
    cp "$app_dir/setup.sh" "$rootfs/setup.sh"
    chroot_run "$rootfs" sh -eux /setup.sh >>"$log" 2>&1 || { echo "app-images: $app: setup.sh failed (log: $log)" >&2; tail -20 "$log" >&2; exit 1; }
    rm -f "$rootfs/setup.sh"
  fi
  cp -a "$app_dir/rootfs/." "$rootfs/"
  if [[ $app == code-server ]]; then
    # Its contents, not the path: a cache directory that is a symlink
    # (a shared or moved cache) would otherwise become a symlink in the
    # image pointing at this machine, and code-server would not start.
    mkdir -p "$rootfs/usr/lib/code-server"
    cp -a "$code_server/." "$rootfs/usr/lib/code-server/"
    if [[ ! -e $rootfs/usr/lib/code-server/node_modules/.bin/code-server ]]; then
      echo "app-images: code-server: nothing to run under /usr/lib/code-server after copying $code_server" >&2
      exit 1
    fi
    cp "$node" "$rootfs/usr/bin/node"
  fi
  rm -f "$rootfs/usr/sbin/policy-rc.d"
  rm -rf "$rootfs/var/cache/apt/archives/"*.deb "$rootfs/var/lib/apt/lists/"* "$rootfs/var/cache/apt/"*.bin
  : >"$rootfs/etc/resolv.conf"
  tar --numeric-owner --xattrs -C "$rootfs" -cf "$work/layer.tar" --exclude=./proc/* --exclude=./sys/* --exclude=./dev/* .
  ref=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["name"])' "$app_dir/image.json"):$key
  "$packer" pack -layer "$work/layer.tar" -config "$app_dir/image.json" -ref "$ref" -out "$archive"
  remove_tree "$work"
  # Earlier builds of this app are superseded.
  for f in "$cache/$app"-*.tar "$cache/$app"-*.json; do
    [[ $f == "$cache/$app-$key".* ]] || rm -f "$f"
  done
  echo "app-images: $app built in $((SECONDS - start))s: $ref ($(du -h "$archive" | cut -f1))" >&2
done

manifest=$cache/manifest-$(cat "${entries[@]}" | hash_of).json
{
  echo "["
  for i in "${!entries[@]}"; do
    ((i == 0)) || echo ","
    cat "${entries[$i]}"
  done
  echo "]"
} >"$manifest"
echo "$manifest"
