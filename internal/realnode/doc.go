// Package realnode brings one real Kubernetes node up beside a simulated
// control plane (internal/simcluster) on this machine, Linux and root only
// (issue 34): containerd, runc and the CNI bridge from Debian, kubelet and
// kube-proxy (nftables) built from Kubernetes' sources, kube-router's
// NetworkPolicy firewall and CoreDNS, all from hack/build-node.sh's cache.
//
// The node is contained as far as its parts allow, so that a test run
// cannot touch the machine's own network or files:
//   - a network namespace of its own (NetnsName), joined to the host by a
//     veth pair (HostIP on the host, NodeIP in the node); the API server
//     listens on HostIP only. Every nftables/iptables rule, ipset, bridge
//     and route the node's parts make lives in that namespace;
//   - a private mount namespace, pinned under the state directory, in
//     which /run, /var/lib and /var/log are bind mounts of directories of
//     the state directory: containerd's shim sockets, the CNI cache and the
//     kubelet's log symlinks, which those parts hard-code, land there;
//   - the cgroup /CgroupName in every hierarchy, for the daemons and (the
//     kubelet's cgroupRoot) the pods.
//
// What cannot be contained is restored or removed by Teardown: the four
// kernel sysctls the kubelet sets host-wide, the cgroup, the veth's host
// end and the netns name under /run/netns.
//
// Everything is keyed on one fixed state directory and fixed names, so
// Teardown finds what a crashed run (even a kill -9) left, and Start runs
// it first. The package imports no test code: `userland dev --real-node`
// may use it later.
package realnode
