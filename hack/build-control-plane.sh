#!/usr/bin/env bash
# build-control-plane.sh provides the local Kubernetes control plane (kube-apiserver,
# kube-controller-manager, kube-scheduler, etcd, kwok) and Dex, cached per version.
# Kubernetes and etcd come from their official releases when reachable and their
# published SHA-256 matches (hack/fetchrelease); everything else is built from
# source through the Go module proxy. Only missing binaries are fetched or built.
# Prints the cache directory on the last line of stdout.
#
# Usage: build-control-plane.sh [dev]
#   dev: only what `make dev` runs (no Dex: dev mode signs in static users).
# Progress goes to stderr, one line per component with its time and what
# remains; the Go toolchain's output (module downloads) is kept quiet and
# shown only when a build fails.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
k8s_version=v1.37.1
etcd_version=$(awk '/go.etcd.io\/etcd\/server\/v3 /{print $NF; exit}' "$root/hack/tools/etcd/go.mod")
kwok_version=$(awk '/sigs.k8s.io\/kwok /{print $NF; exit}' "$root/hack/tools/kwok/go.mod")
# harness_revision changes when the mains in hack/tools change, so stale
# cached binaries are not reused.
harness_revision=1
dir=${USERLAND_CONTROL_PLANE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/userland/k8s-${k8s_version}-etcd-${etcd_version}-kwok-${kwok_version}-r${harness_revision}}
mkdir -p "$dir"

if ! command -v go >/dev/null 2>&1; then
  echo "build-control-plane: Go is required (https://go.dev/dl), found none on PATH" >&2
  exit 1
fi

export CGO_ENABLED=0 GOFLAGS=-buildvcs=false
minor=${k8s_version#v1.}; minor=${minor%%.*}
kube_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${k8s_version} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${minor} -X k8s.io/component-base/version.gitTreeState=clean"

# Typical first-build times on 2 cores, for the progress lines.
declare -A estimate=([etcd]=50 [kwok]=95 [kube-apiserver]=320 [kube-controller-manager]=105 [kube-scheduler]=10 [dex]=100)
components=(etcd kwok kube-apiserver kube-controller-manager kube-scheduler)
if [[ "${1:-}" != dev ]]; then
  components+=(dex) # the OpenID provider the gateway's sign-in tests run against
fi
missing=()
find_missing() {
  missing=()
  for c in "${components[@]}"; do
    [[ -x "$dir/$c" ]] || missing+=("$c")
  done
}
find_missing
# Official release builds first (Kubernetes and etcd publish SHA-256 sums
# for them), where this machine can reach them: seconds instead of minutes.
# fetchrelease never fails the build; whatever it did not fetch and verify
# is built from source below. USERLAND_RELEASE_DOWNLOADS=off skips it.
fetchable=()
for c in "${missing[@]}"; do
  case $c in etcd | kube-*) fetchable+=("$c") ;; esac
done
if ((${#fetchable[@]} > 0)); then
  (cd "$root" && go run ./hack/fetchrelease -dir "$dir" -kubernetes "$k8s_version" -etcd "$etcd_version" "${fetchable[@]}") ||
    echo "control plane: the release download helper failed; building from source" >&2
  find_missing
fi
if ((${#missing[@]} > 0)); then
  total=0
  for c in "${missing[@]}"; do total=$((total + estimate[$c])); done
  echo "control plane: building ${#missing[@]} component(s) from source into $dir, once (about $((total / 60 + 1)) min on 2 cores): ${missing[*]}" >&2
fi

build() { # build NAME MODULE_DIR PACKAGE LDFLAGS
  local name=$1 mod=$2 pkg=$3 ldflags=$4
  if [[ -x "$dir/$name" ]] || [[ " ${components[*]} " != *" $name "* ]]; then
    return 0
  fi
  local start=$SECONDS
  missing=("${missing[@]:1}")
  local cr=""
  if [[ -t 2 ]]; then # a terminal sees the line change in place
    printf 'control plane: %-24s building…' "$name" >&2
    cr="\r"
  fi
  # Build to a unique temporary name and rename, so concurrent runs never
  # see a half-written binary. The toolchain's chatter goes to a log shown
  # only on failure.
  local tmp log
  tmp=$(mktemp "$dir/.$name.XXXXXX")
  log=$(mktemp "$dir/.$name.log.XXXXXX")
  if ! (cd "$root/hack/tools/$mod" && go build -trimpath -ldflags "$ldflags" -o "$tmp" "$pkg") >"$log" 2>&1; then
    printf '%bcontrol plane: %-24s failed after %ss:\n' "$cr" "$name" "$((SECONDS - start))" >&2
    cat "$log" >&2
    rm -f "$tmp" "$log"
    exit 1
  fi
  rm -f "$log"
  mv -f "$tmp" "$dir/$name"
  local left=""
  if ((${#missing[@]} > 0)); then left=" (left: ${missing[*]})"; fi
  printf '%bcontrol plane: %-24s built in %ss%s\n' "$cr" "$name" "$((SECONDS - start))" "$left" >&2
}

build etcd etcd . "-s -w"
build kwok kwok . "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${kwok_version#v}"
build kube-apiserver kube ./kube-apiserver "$kube_ldflags"
build kube-controller-manager kube ./kube-controller-manager "$kube_ldflags"
build kube-scheduler kube ./kube-scheduler "$kube_ldflags"
# Dex needs cgo (its SQLite storage is compiled in unconditionally).
CGO_ENABLED=1 build dex dex github.com/dexidp/dex/cmd/dex "-s -w"
# kwok simulates a volume provisioner with stages it ships as plain YAML (no
# Go package embeds them), so they are taken from the pinned module's source.
if [[ ! -s "$dir/kwok-volume-stages.yaml" ]]; then
  kwok_src=$(cd "$root/hack/tools/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok 2>/dev/null)
  stages="$kwok_src/kustomize/stage/volume/fast"
  tmp=$(mktemp "$dir/.volume.XXXXXX")
  for f in pvc-provision pv-bind pv-delete pvc-delete; do
    cat "$stages/$f.yaml"; echo "---"
  done > "$tmp"
  cp "$stages/storage-class.yaml" "$dir/kwok-storage-class.yaml"
  mv -f "$tmp" "$dir/kwok-volume-stages.yaml"
fi
echo "$dir"
