#!/usr/bin/env bash
# build-helm.sh provides the real `helm` (v3) binary that `make test-node`
# installs charts/userland with (issue 34), built from helm.sh/helm/v3
# through the Go module proxy (hack/tools/helm pins the version) and cached
# per version like the control plane and the node's parts:
#   ~/.cache/userland/helm-<version>-r<revision>/helm
# hack/build-node.sh calls it and links the binary into the node's cache
# directory. Built only when missing. Prints the cache directory on the last
# line of stdout; one progress line (with its time) goes to stderr, and the
# Go toolchain's output only when the build fails.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
helm_version=$(awk '/helm.sh\/helm\/v3 /{print $NF; exit}' "$root/hack/tools/helm/go.mod")
# helm_revision changes when the way helm is built here changes.
helm_revision=1
dir=${USERLAND_HELM_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/userland/helm-${helm_version}-r${helm_revision}}
mkdir -p "$dir"

if [[ -x "$dir/helm" ]]; then
  echo "$dir"
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "build-helm: Go is required (https://go.dev/dl), found none on PATH" >&2
  exit 1
fi
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false
# As helm's own Makefile sets them: its version, and the Kubernetes version
# its client libraries speak (client-go v0.N is Kubernetes 1.N), which
# `helm template` reports without a cluster.
k8s=$(cd "$root/hack/tools/helm" && go list -m -f '{{.Version}}' k8s.io/client-go)
k8s_minor=$(echo "$k8s" | cut -d. -f2)
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=${helm_version} -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
ldflags+=" -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=${k8s_minor}"
ldflags+=" -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=${k8s_minor}"

start=$SECONDS
echo "helm: building helm ${helm_version} from source into $dir, once (about 3 min on 2 cores)" >&2
tmp=$(mktemp "$dir/.helm.XXXXXX")
log=$(mktemp "$dir/.helm.log.XXXXXX")
if ! (cd "$root/hack/tools/helm" && go build -trimpath -ldflags "$ldflags" -o "$tmp" helm.sh/helm/v3/cmd/helm) >"$log" 2>&1; then
  echo "helm: build failed after $((SECONDS - start))s:" >&2
  cat "$log" >&2
  rm -f "$tmp" "$log"
  exit 1
fi
rm -f "$log"
mv -f "$tmp" "$dir/helm"
echo "helm: built ${helm_version} in $((SECONDS - start))s" >&2
echo "$dir"
