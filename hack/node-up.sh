#!/usr/bin/env bash
# node-up.sh (prototype for issue 34) brings up one real Kubernetes node and
# a control plane of its own on this machine (Linux, root):
#   - etcd, kube-apiserver, kube-controller-manager and kube-scheduler from
#     build-control-plane.sh's cache run in the host's network namespace, the
#     API server bound only to the host end of a veth pair (HOST_IP);
#   - containerd, kubelet, kube-proxy (nftables), kube-router (firewall only)
#     and CoreDNS from build-node.sh's cache run inside a network namespace
#     ($NS, address NODE_IP) and a private mount namespace of their own, in
#     which /run, /var/lib and /var/log are bind mounts of directories under
#     $STATE, so their sockets, rules, mounts and files stay off the host;
#   - every process is in the cgroup /$CG (all v1 hierarchies and the
#     unified one), where the kubelet also puts the pods (cgroupRoot).
# What it cannot contain: the kubelet's kernel sysctls (kernel.panic,
# kernel.panic_on_oops, vm.overcommit_memory, vm.panic_on_oom), saved in
# $STATE/sysctl.saved and restored by node-teardown.sh; the cgroup /$CG;
# the veth's host end and its /30 route; the netns's name under /run/netns.
# node-teardown.sh removes all of it and can always be re-run.
#
# Usage: node-up.sh   (then: node-teardown.sh)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
STATE=${USERLAND_NODE_STATE:-/tmp/node-run}
NS=${USERLAND_NODE_NETNS:-userland-node}
CG=${USERLAND_NODE_CGROUP:-userland-node}
HOST_IF=ulnode0
HOST_IP=10.201.0.1
NODE_IP=10.201.0.2
POD_CIDR=10.244.0.0/24
SVC_CIDR=10.96.0.0/16
NODE_NAME=realnode
API_PORT=6443
ETCD_PORT=23791
ETCD_PEER_PORT=23801

log() { echo "node-up: $*" >&2; }
t0=$(date +%s.%N)
elapsed() { awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}'; }

[[ $(id -u) == 0 ]] || { log "needs root"; exit 1; }
if [[ -e $STATE ]] || ip netns list | grep -qw "$NS"; then
  log "$STATE or netns $NS exists: run hack/node-teardown.sh first"
  exit 1
fi
BIN=${USERLAND_NODE_DIR:-$("$root/hack/build-node.sh" | tail -1)}
CP=${USERLAND_CONTROL_PLANE_DIR:-$(ls -d "${XDG_CACHE_HOME:-$HOME/.cache}"/userland/k8s-v1.37.1-etcd-*-r1 | head -1)}
for b in "$CP/etcd" "$CP/kube-apiserver" "$CP/kube-controller-manager" "$CP/kube-scheduler" "$BIN/kubelet" "$BIN/containerd"; do
  [[ -x $b ]] || { log "missing $b (run hack/build-control-plane.sh dev and hack/build-node.sh)"; exit 1; }
done

mkdir -p "$STATE"/{pki,logs,pids,ns,run,varlib,varlog,cni/net.d,cni/ipam,containerd,kubelet,pod-logs,images}
export PATH="$BIN:$PATH"

# Sysctls the kubelet sets host-wide (not per network namespace).
for s in kernel.panic kernel.panic_on_oops vm.overcommit_memory vm.panic_on_oom; do
  echo "$s=$(sysctl -n "$s")"
done >"$STATE/sysctl.saved"

# --- PKI (EC keys: fast) ---
pki=$STATE/pki
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$pki/ca.key" -out "$pki/ca.crt" -days 2 -subj /CN=userland-node-ca 2>/dev/null
cert() { # cert NAME SUBJECT [SAN]
  local n=$1 subj=$2 san=${3:-}
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$pki/$n.key" -out "$pki/$n.csr" -subj "$subj" 2>/dev/null
  { echo "extendedKeyUsage=serverAuth,clientAuth"; [[ -n $san ]] && echo "subjectAltName=$san"; } >"$pki/$n.ext"
  openssl x509 -req -in "$pki/$n.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 2 -out "$pki/$n.crt" -extfile "$pki/$n.ext" 2>/dev/null
}
cert apiserver /CN=kube-apiserver "IP:$HOST_IP,IP:10.96.0.1,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
cert admin "/O=system:masters/CN=userland-node-admin"
cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME"
cert kubelet-serving "/CN=$NODE_NAME" "IP:$NODE_IP,DNS:$NODE_NAME"
cert kube-proxy /CN=system:kube-proxy
cert controller-manager /CN=system:kube-controller-manager
cert scheduler /CN=system:kube-scheduler
openssl ecparam -genkey -name prime256v1 -noout -out "$pki/sa.key"
openssl ec -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
kubeconfig() { # kubeconfig NAME
  cat >"$STATE/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: node
  cluster: {server: "https://$HOST_IP:$API_PORT", certificate-authority: "$pki/ca.crt"}
users:
- name: $1
  user: {client-certificate: "$pki/$1.crt", client-key: "$pki/$1.key"}
contexts:
- name: node
  context: {cluster: node, user: $1}
current-context: node
EOF
}
for k in admin kubelet kube-proxy controller-manager scheduler; do kubeconfig "$k"; done
log "PKI and kubeconfigs in $(elapsed)s"

# --- network namespace and veth; NAT inside the namespace only ---
ip netns add "$NS"
ip link add "$HOST_IF" type veth peer name eth0 netns "$NS"
ip addr add "$HOST_IP/30" dev "$HOST_IF"
ip link set "$HOST_IF" up
ip -n "$NS" link set lo up
ip -n "$NS" addr add "$NODE_IP/30" dev eth0
ip -n "$NS" link set eth0 up
ip -n "$NS" route add default via "$HOST_IP"
ip netns exec "$NS" sysctl -qw net.ipv4.ip_forward=1
# Pod-to-pod traffic on the node is bridged; NetworkPolicy (kube-router's
# iptables rules) sees it only with this on. Per namespace on this kernel.
ip netns exec "$NS" sysctl -qw net.bridge.bridge-nf-call-iptables=1
# Pods reach the API server (on the host) through the node's address, so
# the host needs no route to the pod network.
ip netns exec "$NS" nft -f - <<EOF
table ip userland-node {
  chain postrouting {
    type nat hook postrouting priority srcnat; policy accept;
    ip saddr $POD_CIDR oifname "eth0" masquerade
  }
}
EOF

# --- private mount namespace, pinned by a bind mount under $STATE/ns ---
mount --bind "$STATE/ns" "$STATE/ns"
mount --make-private "$STATE/ns"
touch "$STATE/ns/mnt"
unshare --mount="$STATE/ns/mnt" --propagation private true
nsenter --mount="$STATE/ns/mnt" -- sh -ec "
  mount --bind '$STATE/run' /run
  mount --bind '$STATE/varlib' /var/lib
  mount --bind '$STATE/varlog' /var/log
"

# --- cgroup /$CG in every hierarchy ---
for h in /sys/fs/cgroup/*/; do mkdir -p "$h$CG/daemons"; done
# cpuset (v1) needs cpus and mems before a process can join.
if [[ -d /sys/fs/cgroup/cpuset/$CG ]]; then
  for d in "$CG" "$CG/daemons"; do
    cat "/sys/fs/cgroup/cpuset/cpuset.cpus" >"/sys/fs/cgroup/cpuset/$d/cpuset.cpus"
    cat "/sys/fs/cgroup/cpuset/cpuset.mems" >"/sys/fs/cgroup/cpuset/$d/cpuset.mems"
  done
fi

# launch NAME [nsenter-args --] CMD...: starts CMD in /$CG/daemons, its
# output in $STATE/logs/NAME.log and its pid in $STATE/pids/NAME.
launch() {
  local name=$1; shift
  (
    for h in /sys/fs/cgroup/*/; do echo "$BASHPID" >"$h$CG/daemons/cgroup.procs"; done
    exec "$@"
  ) >"$STATE/logs/$name.log" 2>&1 &
  echo $! >"$STATE/pids/$name"
}
in_node=(nsenter --net="/run/netns/$NS" --mount="$STATE/ns/mnt" --)
wait_for() { # wait_for WHAT SECONDS CMD...
  local what=$1 secs=$2; shift 2
  local end=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS > end)); then log "timed out waiting for $what"; return 1; fi
    sleep 0.1
  done
  log "$what after $(elapsed)s"
}

# --- control plane on the host ---
launch etcd "$CP/etcd" --data-dir="$STATE/etcd" --name=node \
  --listen-client-urls="http://127.0.0.1:$ETCD_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster="node=http://127.0.0.1:$ETCD_PEER_PORT" --unsafe-no-fsync=true
launch kube-apiserver "$CP/kube-apiserver" \
  --etcd-servers="http://127.0.0.1:$ETCD_PORT" --bind-address="$HOST_IP" --advertise-address="$HOST_IP" --secure-port="$API_PORT" \
  --cert-dir="$pki" --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" --client-ca-file="$pki/ca.crt" \
  --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
  --service-account-issuer=https://kubernetes.default.svc --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
  --service-cluster-ip-range="$SVC_CIDR" --allow-privileged=true \
  --kubelet-client-certificate="$pki/apiserver-kubelet-client.crt" --kubelet-client-key="$pki/apiserver-kubelet-client.key" \
  --kubelet-certificate-authority="$pki/ca.crt" --kubelet-preferred-address-types=InternalIP,Hostname
api() { curl -sf --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" "https://$HOST_IP:$API_PORT$1" "${@:2}"; }
wait_for "kube-apiserver ready" 120 api /readyz
launch kube-controller-manager "$CP/kube-controller-manager" --kubeconfig="$STATE/controller-manager.kubeconfig" \
  --authentication-kubeconfig="$STATE/controller-manager.kubeconfig" --authorization-kubeconfig="$STATE/controller-manager.kubeconfig" \
  --bind-address="$HOST_IP" --secure-port=10257 \
  --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" --use-service-account-credentials=true \
  --cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" --service-cluster-ip-range="$SVC_CIDR"
launch kube-scheduler "$CP/kube-scheduler" --kubeconfig="$STATE/scheduler.kubeconfig" \
  --authentication-kubeconfig="$STATE/scheduler.kubeconfig" --authorization-kubeconfig="$STATE/scheduler.kubeconfig" \
  --bind-address="$HOST_IP" --secure-port=10259

# --- the node ---
cat >"$STATE/containerd.toml" <<EOF
version = 2
root = "$STATE/containerd/root"
state = "$STATE/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$STATE/containerd/containerd.sock"
[ttrpc]
  address = "$STATE/containerd/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$STATE/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "userland.local/pause:1"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$BIN/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$BIN/cni"
    conf_dir = "$STATE/cni/net.d"
EOF
cat >"$STATE/cni/net.d/10-userland-node.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "userland-node", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$STATE/cni/ipam", "ranges": [[{"subnet": "$POD_CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}
]}
EOF
launch containerd "${in_node[@]}" "$BIN/containerd" --config "$STATE/containerd.toml"
ctr_() { "$BIN/ctr" --address "$STATE/containerd/containerd.sock" -n k8s.io "$@"; }
wait_for "containerd serving" 30 ctr_ version

# Images: built once from hack/nodeimage, imported every time.
img_start=$(date +%s.%N)
if [[ ! -s $STATE/../node-images/probe.tar ]]; then
  mkdir -p "$STATE/../node-images"
  (cd "$root" && CGO_ENABLED=0 nice -n 19 go build -trimpath -ldflags "-s -w" -o "$STATE/../node-images/nodeimage" ./hack/nodeimage)
  "$STATE/../node-images/nodeimage" pack "$STATE/../node-images" >&2
fi
ctr_ images import "$STATE/../node-images/pause.tar" >&2
ctr_ images import "$STATE/../node-images/probe.tar" >&2
log "images imported after $(elapsed)s"

echo "nameserver $NODE_IP" >"$STATE/resolv.conf"
cat >"$STATE/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /$CG
containerRuntimeEndpoint: unix://$STATE/containerd/containerd.sock
podLogsDir: $STATE/pod-logs
address: $NODE_IP
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
tlsCertFile: $pki/kubelet-serving.crt
tlsPrivateKeyFile: $pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
clusterDNS: [$NODE_IP]
clusterDomain: cluster.local
resolvConf: $STATE/resolv.conf
failSwapOn: false
protectKernelDefaults: false
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
EOF
launch kubelet "${in_node[@]}" "$BIN/kubelet" --config="$STATE/kubelet.yaml" --kubeconfig="$STATE/kubelet.kubeconfig" \
  --root-dir="$STATE/kubelet" --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" --v=1

cat >"$STATE/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection: {kubeconfig: $STATE/kube-proxy.kubeconfig}
hostnameOverride: $NODE_NAME
clusterCIDR: $POD_CIDR
bindAddress: $NODE_IP
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: [primary]
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
launch kube-proxy "${in_node[@]}" "$BIN/kube-proxy" --config="$STATE/kube-proxy.yaml"
cat >"$STATE/Corefile" <<EOF
.:53 {
    bind $NODE_IP
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $STATE/admin.kubeconfig node
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 30
}
EOF
launch coredns "${in_node[@]}" "$BIN/coredns" -conf "$STATE/Corefile"

node_ready() { api "/api/v1/nodes/$NODE_NAME" | python3 -c 'import json,sys; n=json.load(sys.stdin); sys.exit(0 if any(c["type"]=="Ready" and c["status"]=="True" for c in n["status"]["conditions"]) else 1)'; }
wait_for "node $NODE_NAME Ready" 120 node_ready
# kube-router exits ("failed to identify the node") if its Node does not
# exist yet, so it starts after the kubelet registered it.
launch kube-router "${in_node[@]}" "$BIN/kube-router" --kubeconfig="$STATE/admin.kubeconfig" --hostname-override="$NODE_NAME" \
  --run-firewall=true --run-router=false --run-service-proxy=false --enable-cni=false --service-cluster-ip-range="$SVC_CIDR" \
  --metrics-port=0 --health-port=20244
echo "$STATE"
