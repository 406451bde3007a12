package realnode

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/internal/simcluster"
)

// up brings the node up step by step; Start tears down on error.
func (n *Node) up(ctx context.Context) error {
	if err := checkDisk(filepath.Dir(filepath.Clean(n.StateDir))); err != nil {
		return err
	}
	for _, d := range []string{"logs", "pki", "ns", "run", "varlib", "varlog", "cni/net.d", "cni/ipam", "containerd", "kubelet", "pod-logs", "cluster", "kubeconfigs", corednsDir} {
		if err := os.MkdirAll(n.path(d), 0o700); err != nil {
			return err
		}
	}
	// Saved first, so that Teardown restores them whenever the kubelet
	// got as far as changing them.
	if err := saveSysctls(n.StateDir); err != nil {
		return err
	}
	if err := setUpNetwork(); err != nil {
		return err
	}
	n.mark("network namespace and veth")

	cluster, err := simcluster.Start(ctx, simcluster.Options{
		Mode:              simcluster.Full,
		BinariesDir:       n.opts.ControlPlaneDir,
		CRDDirectoryPaths: n.opts.CRDDirectoryPaths,
		Dir:               n.path("cluster"),
		BindAddress:       HostIP,
		RealNodes:         true,
	})
	if err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}
	n.Cluster = cluster
	n.mark("control plane ready")
	if err := n.writeIdentities(ctx); err != nil {
		return err
	}
	if err := n.setUpMountNamespace(); err != nil {
		return err
	}
	if err := setUpCgroups(); err != nil {
		return err
	}
	if err := n.writeConfigs(); err != nil {
		return err
	}

	if err := n.launch("containerd", n.bin("containerd"), "--config", n.path("containerd.toml")); err != nil {
		return err
	}
	if err := n.waitFor(ctx, "containerd", 30*time.Second, func(context.Context) (bool, error) {
		return n.ctr("version") == nil, nil
	}); err != nil {
		return err
	}
	n.mark("containerd serving")
	dns, err := n.corednsArchive()
	if err != nil {
		return err
	}
	for _, img := range append(n.opts.Images, dns) {
		if err := n.ctr("images", "import", img); err != nil {
			return fmt.Errorf("importing %s: %w", img, err)
		}
	}
	n.mark("images imported")

	if err := n.launch("kubelet", n.bin("kubelet"), "--config="+n.path("kubelet.yaml"),
		"--kubeconfig="+n.kubeconfig("kubelet"), "--root-dir="+n.path("kubelet"),
		"--hostname-override="+NodeName, "--node-ip="+NodeIP, "--v=1"); err != nil {
		return err
	}
	if err := n.launch("kube-proxy", n.bin("kube-proxy"), "--config="+n.path("kube-proxy.yaml")); err != nil {
		return err
	}
	if err := n.waitFor(ctx, "node "+NodeName+" Ready", 2*time.Minute, func(ctx context.Context) (bool, error) {
		var node corev1.Node
		if err := n.Cluster.Client.Get(ctx, client.ObjectKey{Name: NodeName}, &node); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	}); err != nil {
		return err
	}
	n.mark("node Ready")
	if err := n.startClusterDNS(ctx); err != nil {
		return err
	}

	// kube-router exits ("failed to identify the node") when its Node does
	// not exist yet, so it starts only now.
	if err := n.launch("kube-router", n.bin("kube-router"), "--kubeconfig="+n.kubeconfig("kube-router"),
		"--hostname-override="+NodeName, "--run-firewall=true", "--run-router=false", "--run-service-proxy=false",
		"--enable-cni=false", "--service-cluster-ip-range="+ServiceCIDR, "--metrics-port=0", "--health-port=20244"); err != nil {
		return err
	}
	// Its chains exist once it has synced policies for the first time.
	if err := n.waitFor(ctx, "kube-router's firewall", time.Minute, func(context.Context) (bool, error) {
		return exec.Command("nsenter", "--net="+netnsPath(), "--", "iptables", "-w", "-n", "-L", "KUBE-ROUTER-FORWARD").Run() == nil, nil
	}); err != nil {
		return err
	}
	n.mark("NetworkPolicy firewall running")
	// Through the kube-dns Service (kube-proxy's rules) to the CoreDNS pod.
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return n.DialContext(ctx, network, net.JoinHostPort(ClusterDNSIP, "53"))
	}}
	if err := n.waitFor(ctx, "cluster DNS", 2*time.Minute, func(ctx context.Context) (bool, error) {
		lctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := resolver.LookupHost(lctx, "kubernetes.default.svc.cluster.local")
		return err == nil, nil
	}); err != nil {
		return err
	}
	n.mark("cluster DNS answering")
	return nil
}

// ctr runs containerd's client against the node's containerd, in the
// namespace the CRI plugin uses.
func (n *Node) ctr(args ...string) error {
	cmd := exec.Command(n.bin("ctr"), append([]string{"--address", n.path("containerd", "containerd.sock"), "-n", "k8s.io"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// Images are the names of the images in the node's containerd, where
// the kubelet finds them (`ctr -n k8s.io images ls -q`): references and,
// for what the CRI plugin pulled, its digests.
func (n *Node) Images() ([]string, error) {
	cmd := exec.Command(n.bin("ctr"), "--address", n.path("containerd", "containerd.sock"), "-n", "k8s.io", "images", "ls", "-q")
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("ctr images ls: %w", err)
	}
	return strings.Fields(string(out)), nil
}

// ImportImage imports an OCI archive into the node's containerd, where the
// kubelet finds it (`ctr -n k8s.io images import`): an image no registry
// serves, run with imagePullPolicy Never or IfNotPresent.
func (n *Node) ImportImage(archive string) error {
	return n.ctr("images", "import", archive)
}

// run runs a setup command and says what it printed when it fails.
func run(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// setUpNetwork makes the network namespace and the veth pair, with a
// route on the host to the Service range through the node. Inside the
// namespace only: forwarding, bridge netfilter (kube-router's iptables
// rules see bridged pod-to-pod traffic only with it) and a masquerade of
// pod traffic leaving by eth0, so that the host needs no route to the
// pod network.
func setUpNetwork() error {
	steps := [][]string{
		{"ip", "netns", "add", NetnsName},
		{"ip", "link", "add", HostVeth, "type", "veth", "peer", "name", "eth0", "netns", NetnsName},
		{"ip", "addr", "add", HostIP + "/30", "dev", HostVeth},
		{"ip", "link", "set", HostVeth, "up"},
		{"ip", "-n", NetnsName, "link", "set", "lo", "up"},
		{"ip", "-n", NetnsName, "addr", "add", NodeIP + "/30", "dev", "eth0"},
		{"ip", "-n", NetnsName, "link", "set", "eth0", "up"},
		{"ip", "-n", NetnsName, "route", "add", "default", "via", HostIP},
		// The API server (on the host) calls admission webhooks at their
		// Service's ClusterIP: through the node, whose kube-proxy rules
		// forward it. The route belongs to the veth and goes with it.
		{"ip", "route", "add", ServiceCIDR, "via", NodeIP, "dev", HostVeth},
		{"ip", "netns", "exec", NetnsName, "sysctl", "-qw", "net.ipv4.ip_forward=1"},
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			return err
		}
	}
	// Per namespace on recent kernels; the module may need loading first.
	if run("ip", "netns", "exec", NetnsName, "sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1") != nil {
		if err := run("modprobe", "br_netfilter"); err != nil {
			return fmt.Errorf("bridge netfilter (NetworkPolicy on bridged pod traffic needs it): %w", err)
		}
		if err := run("ip", "netns", "exec", NetnsName, "sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1"); err != nil {
			return err
		}
	}
	cmd := exec.Command("ip", "netns", "exec", NetnsName, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(fmt.Sprintf(`table ip userland-realnode {
  chain postrouting {
    type nat hook postrouting priority srcnat; policy accept;
    ip saddr %s oifname "eth0" masquerade
  }
}
`, PodCIDR))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft in the node's namespace: %w: %s", err, out)
	}
	return nil
}

// setUpMountNamespace makes the private mount namespace, pinned by a bind
// mount on a file under the state directory (the pin is what Teardown
// unmounts), with /run, /var/lib and /var/log bound to the state
// directory. Every daemon joins it with nsenter: containerd and the
// kubelet must share one (`ip netns exec` would make a new one each time).
func (n *Node) setUpMountNamespace() error {
	ns := n.path("ns")
	steps := [][]string{
		{"mount", "--bind", ns, ns},
		{"mount", "--make-private", ns},
		{"touch", filepath.Join(ns, "mnt")},
		{"unshare", "--mount=" + filepath.Join(ns, "mnt"), "--propagation", "private", "true"},
		{"nsenter", "--mount=" + filepath.Join(ns, "mnt"), "--", "sh", "-ec", fmt.Sprintf(
			"mount --bind %q /run; mount --bind %q /var/lib; mount --bind %q /var/log",
			n.path("run"), n.path("varlib"), n.path("varlog"))},
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// setUpCgroups makes /CgroupName/daemons in every hierarchy.
func setUpCgroups() error {
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range hierarchies {
		if st, err := os.Stat(h); err != nil || !st.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(h, "cgroup.procs")); err != nil {
			continue // not a hierarchy (cgroup v2 files at the root)
		}
		if err := os.MkdirAll(filepath.Join(h, CgroupName, "daemons"), 0o755); err != nil {
			return fmt.Errorf("creating the node's cgroup: %w", err)
		}
	}
	// cgroup v1's cpuset needs cpus and mems before a process can join.
	if cpus, err := os.ReadFile("/sys/fs/cgroup/cpuset/cpuset.cpus"); err == nil {
		mems, _ := os.ReadFile("/sys/fs/cgroup/cpuset/cpuset.mems")
		for _, d := range []string{CgroupName, CgroupName + "/daemons"} {
			_ = os.WriteFile(filepath.Join("/sys/fs/cgroup/cpuset", d, "cpuset.cpus"), cpus, 0o644)
			_ = os.WriteFile(filepath.Join("/sys/fs/cgroup/cpuset", d, "cpuset.mems"), mems, 0o644)
		}
	}
	return nil
}

// launchScript moves the shell into /CgroupName/daemons of every
// hierarchy, then execs the rest: the daemon and whatever it forks start
// inside the cgroup.
const launchScript = `for h in /sys/fs/cgroup/*/; do [ -d "$h` + CgroupName + `/daemons" ] && echo $$ > "$h` + CgroupName + `/daemons/cgroup.procs"; done; exec "$@"`

// launch starts a daemon in the node's network and mount namespaces and
// cgroup, logging to logs/<name>.log. simcluster.StartProcess ties it to
// this process: it is killed if this process dies (nsenter execs, it does
// not fork, so the daemon is the process tied).
func (n *Node) launch(name, bin string, args ...string) error {
	// The cache directory first on PATH: containerd finds its shim there
	// (Debian's /usr/bin one otherwise), so the node runs the binaries
	// the cache holds. env execs, as nsenter does.
	path := n.opts.NodeBinariesDir + ":" + os.Getenv("PATH")
	argv := append([]string{"-c", launchScript, "sh", "nsenter", "--net=" + netnsPath(), "--mount=" + n.path("ns", "mnt"), "--", "env", "PATH=" + path, bin}, args...)
	p, err := simcluster.StartProcess(n.path("logs"), name, "/bin/sh", argv...)
	if err != nil {
		return err
	}
	n.processes = append(n.processes, p)
	return nil
}

// checkDisk refuses to start a node on a filesystem too full to hold a
// run (diskShortfall).
func checkDisk(dir string) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return fmt.Errorf("reading the free space under %s: %w", dir, err)
	}
	return diskShortfall(dir, st.Blocks*uint64(st.Bsize), st.Bavail*uint64(st.Bsize))
}
