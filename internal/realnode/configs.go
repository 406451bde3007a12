package realnode

import (
	"fmt"
	"os"
)

// writeConfigs writes the node's configuration files. Every path a part
// would otherwise take from the host (/var/lib/kubelet, /run/containerd,
// /etc/cni, /var/lib/cni) points under the state directory; the mount
// namespace catches the few that are hard-coded.
func (n *Node) writeConfigs() error {
	files := map[string]string{
		// Debian's containerd 1.6: restrict_oom_score_adj because root here
		// may lack CAP_SYS_RESOURCE; the sandbox image is local (no
		// registry is reachable); pod network namespaces are mounted
		// under the state directory. config_path is where a test says
		// which registry of its own to pull from over plain HTTP
		// (TrustPlainHTTPRegistry); every other registry keeps the
		// defaults (HTTPS).
		"containerd.toml": fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q
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
        BinaryName = %[6]q
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[7]q
    conf_dir = %[8]q
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %[9]q
`, n.path("containerd", "root"), n.path("containerd", "state"), n.path("containerd", "containerd.sock"),
			n.path("containerd", "containerd.sock.ttrpc"), n.path("containerd", "opt"), n.bin("runc"),
			n.bin("cni"), n.path("cni", "net.d"), n.path(registryHostsDir)),

		"cni/net.d/10-userland-realnode.conflist": fmt.Sprintf(`{"cniVersion": "0.4.0", "name": "userland-realnode", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}
]}
`, n.path("cni", "ipam"), PodCIDR),

		"resolv.conf": "nameserver " + NodeIP + "\n",

		// failCgroupV1 and cgroupfs: this machine has hybrid cgroups v1
		// and no systemd. cgroupRoot puts the pods in the node's cgroup.
		// Cluster DNS is the kube-dns Service (see dns.go). syncFrequency
		// 10s (1m by default) is how soon a Secret's new content reaches
		// the pods mounting it: the chart's webhook certificate, which the
		// controller writes after it starts.
		"kubelet.yaml": fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /%[1]s
containerRuntimeEndpoint: unix://%[2]s
podLogsDir: %[3]s
address: %[4]s
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
tlsCertFile: %[5]s
tlsPrivateKeyFile: %[6]s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[7]s}
authorization: {mode: Webhook}
clusterDNS: [%[9]s]
clusterDomain: cluster.local
resolvConf: %[8]s
failSwapOn: false
syncFrequency: 10s
protectKernelDefaults: false
evictionHard: {memory.available: 100Mi, nodefs.available: 1%%, imagefs.available: 1%%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`, CgroupName, n.path("containerd", "containerd.sock"), n.path("pod-logs"), NodeIP,
			n.path("pki", "kubelet-serving.crt"), n.path("pki", "kubelet-serving.key"), n.path("pki", "ca.crt"), n.path("resolv.conf"), ClusterDNSIP),

		// nftables mode; conntrack zeros so that it writes no host-wide
		// conntrack sysctl.
		"kube-proxy.yaml": fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection: {kubeconfig: %q}
hostnameOverride: %s
clusterCIDR: %s
bindAddress: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: [primary]
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
`, n.kubeconfig("kube-proxy"), NodeName, PodCIDR, NodeIP),
	}
	for name, data := range files {
		if err := os.WriteFile(n.path(name), []byte(data), 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	return nil
}
