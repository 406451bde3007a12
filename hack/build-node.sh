#!/usr/bin/env bash
# build-node.sh provides the parts of one real Kubernetes node for tests
# (issue 34), cached per version like build-control-plane.sh:
#   - kubelet and kube-proxy, built from k8s.io/kubernetes through the Go
#     module proxy exactly as build-control-plane.sh builds kube-apiserver
#     (hack/tools/node);
#   - kube-router, only for its NetworkPolicy firewall (hack/tools/kube-router;
#     the module proxy serves only v2.1.0, which has reported security flaws:
#     it runs only inside the test node and is never shipped);
#   - CoreDNS, the cluster DNS (hack/tools/coredns);
#   - kubectl, at the control plane's version (hack/tools/node), and helm v3
#     (hack/build-helm.sh, cached by its own version and linked here): the
#     chart test runs the README's install commands with them;
#   - containerd, its runc shim, ctr, runc and the CNI plugins (bridge,
#     host-local, portmap, loopback) from Debian's packages, installed with
#     apt-get when missing (root only) and copied into the cache directory so
#     that the node runs one known set of binaries.
# Only missing binaries are built or copied. Prints the cache directory on the
# last line of stdout; progress (one line per part, with its time) goes to
# stderr, and the Go toolchain's output only when a build fails.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
k8s_version=v1.37.1
kube_router_version=$(awk '/github.com\/cloudnativelabs\/kube-router\/v2 /{print $NF; exit}' "$root/hack/tools/kube-router/go.mod")
coredns_version=$(awk '/github.com\/coredns\/coredns /{print $NF; exit}' "$root/hack/tools/coredns/go.mod")
# node_revision changes when the mains in hack/tools/node change.
node_revision=1
dir=${USERLAND_NODE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/userland/node-k8s-${k8s_version}-kube-router-${kube_router_version}-coredns-${coredns_version}-r${node_revision}}
mkdir -p "$dir/cni"

if ! command -v go >/dev/null 2>&1; then
  echo "build-node: Go is required (https://go.dev/dl), found none on PATH" >&2
  exit 1
fi

export CGO_ENABLED=0 GOFLAGS=-buildvcs=false
minor=${k8s_version#v1.}; minor=${minor%%.*}
kube_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${k8s_version} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${minor} -X k8s.io/component-base/version.gitTreeState=clean"

# Debian's parts. The node needs them at run time; they are copied so that
# the cache directory holds everything the node runs.
debian_packages=(containerd runc containernetworking-plugins)
debian_bins=(/usr/bin/containerd /usr/bin/containerd-shim-runc-v2 /usr/bin/ctr /usr/sbin/runc)
cni_plugins=(bridge host-local portmap loopback)
# Used from PATH at run time, not copied: nft (kube-proxy's nftables mode
# runs it), iptables and ipset (kube-router's firewall and the bridge
# plugin's ipMasq), conntrack (kube-proxy clears UDP entries with it).
runtime_packages=(nftables iptables ipset conntrack)
runtime_bins=(/usr/sbin/nft /usr/sbin/iptables /usr/sbin/ipset /usr/sbin/conntrack)
need_apt=0
for f in "${debian_bins[@]}" "${runtime_bins[@]}"; do [[ -x $f ]] || need_apt=1; done
for p in "${cni_plugins[@]}"; do [[ -x /usr/lib/cni/$p ]] || need_apt=1; done
if ((need_apt)); then
  if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    echo "build-node: containerd, runc and the CNI plugins come from Debian's packages (${debian_packages[*]}); installing them (and ${runtime_packages[*]}) needs root and apt-get" >&2
    exit 1
  fi
  start=$SECONDS
  log=$(mktemp "$dir/.apt.log.XXXXXX")
  if ! { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${debian_packages[@]}" "${runtime_packages[@]}"; } >"$log" 2>&1; then
    echo "node: apt-get install ${debian_packages[*]} failed:" >&2
    cat "$log" >&2
    rm -f "$log"
    exit 1
  fi
  rm -f "$log"
  echo "node: installed ${debian_packages[*]} ${runtime_packages[*]} from Debian in $((SECONDS - start))s" >&2
fi
# Copy when the installed package version differs from the copied one.
debian_versions=$(dpkg-query -W "${debian_packages[@]}" 2>/dev/null || true)
if [[ "$(cat "$dir/debian-versions.txt" 2>/dev/null)" != "$debian_versions" ]] || [[ ! -x "$dir/containerd" ]]; then
  for f in "${debian_bins[@]}"; do
    cp -f "$f" "$dir/.$(basename "$f").tmp" && mv -f "$dir/.$(basename "$f").tmp" "$dir/$(basename "$f")"
  done
  for p in "${cni_plugins[@]}"; do
    cp -f "/usr/lib/cni/$p" "$dir/cni/.$p.tmp" && mv -f "$dir/cni/.$p.tmp" "$dir/cni/$p"
  done
  printf '%s\n' "$debian_versions" >"$dir/debian-versions.txt"
  echo "node: copied from Debian: $(tr '\t\n' '= ' <"$dir/debian-versions.txt")" >&2
fi

# Typical first-build times on 2 cores (the Go build cache shared with
# the control plane's build warm), for the progress lines.
declare -A estimate=([kubelet]=300 [kube-proxy]=120 [kube-router]=180 [coredns]=240 [kubectl]=150)
components=(kubelet kube-proxy kube-router coredns kubectl)
missing=()
for c in "${components[@]}"; do
  [[ -x "$dir/$c" ]] || missing+=("$c")
done
if ((${#missing[@]} > 0)); then
  total=0
  for c in "${missing[@]}"; do total=$((total + estimate[$c])); done
  echo "node: building ${#missing[@]} component(s) from source into $dir, once (about $((total / 60 + 1)) min on 2 cores): ${missing[*]}" >&2
fi

build() { # build NAME MODULE_DIR PACKAGE LDFLAGS
  local name=$1 mod=$2 pkg=$3 ldflags=$4
  if [[ -x "$dir/$name" ]]; then
    return 0
  fi
  local start=$SECONDS
  missing=("${missing[@]:1}")
  local cr=""
  if [[ -t 2 ]]; then
    printf 'node: %-12s building…' "$name" >&2
    cr="\r"
  fi
  local tmp log
  tmp=$(mktemp "$dir/.$name.XXXXXX")
  log=$(mktemp "$dir/.$name.log.XXXXXX")
  if ! (cd "$root/hack/tools/$mod" && go build -trimpath -ldflags "$ldflags" -o "$tmp" "$pkg") >"$log" 2>&1; then
    printf '%bnode: %-12s failed after %ss:\n' "$cr" "$name" "$((SECONDS - start))" >&2
    cat "$log" >&2
    rm -f "$tmp" "$log"
    exit 1
  fi
  rm -f "$log"
  mv -f "$tmp" "$dir/$name"
  local left=""
  if ((${#missing[@]} > 0)); then left=" (left: ${missing[*]})"; fi
  printf '%bnode: %-12s built in %ss%s\n' "$cr" "$name" "$((SECONDS - start))" "$left" >&2
}

build kubelet node ./kubelet "$kube_ldflags"
build kube-proxy node ./kube-proxy "$kube_ldflags"
build kube-router kube-router github.com/cloudnativelabs/kube-router/v2/cmd/kube-router \
  "-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=${kube_router_version} -X github.com/cloudnativelabs/kube-router/v2/pkg/version.BuildDate=unknown"
build coredns coredns github.com/coredns/coredns "-s -w -X github.com/coredns/coredns/coremain.GitCommit=${coredns_version}"
build kubectl node ./kubectl "$kube_ldflags"
helm_dir=$("$root/hack/build-helm.sh" | tail -1)
ln -sfn "$helm_dir/helm" "$dir/helm"
echo "$dir"
