package realnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/userland-dev/userland/internal/simcluster"
)

// The fixed names everything is keyed on (see the package comment).
const (
	// DefaultStateDir holds every file, socket and mount of the node.
	DefaultStateDir = "/tmp/userland-realnode"
	// NetnsName is the node's network namespace (/run/netns/NetnsName).
	NetnsName = "userland-realnode"
	// CgroupName is the cgroup of the node's daemons and pods.
	CgroupName = "userland-realnode"
	// HostVeth is the host end of the veth pair.
	HostVeth = "ulrealnode0"
	// HostIP is the host end's address: the API server listens there.
	HostIP = "10.202.0.1"
	// NodeIP is the node's address (its InternalIP, where the kubelet
	// serves).
	NodeIP = "10.202.0.2"
	// PodCIDR is the node's pod network, behind the bridge cni0.
	PodCIDR = "10.244.0.0/24"
	// ServiceCIDR is simcluster's Service range.
	ServiceCIDR = "10.96.0.0/16"
	// NodeName is the node's name.
	NodeName = "realnode"
	// StateEnv marks every process Start starts (the control plane, the
	// node's daemons, and containerd's shims, which inherit containerd's
	// environment) with the state directory, so Teardown finds them after
	// a crash. The pods are found by their cgroup.
	StateEnv = "USERLAND_REALNODE_STATE"
)

// Options configure Start.
type Options struct {
	// NodeBinariesDir is hack/build-node.sh's cache directory (kubelet,
	// kube-proxy, kube-router, coredns, containerd, ctr, runc, cni/).
	NodeBinariesDir string
	// ControlPlaneDir is hack/build-control-plane.sh's cache directory.
	ControlPlaneDir string
	// CRDDirectoryPaths are the CRDs simcluster installs.
	CRDDirectoryPaths []string
	// StateDir defaults to DefaultStateDir. Teardown must be given the same.
	StateDir string
	// Images are OCI archives imported into containerd (the sandbox image
	// userland.local/pause:1 among them).
	Images []string
	// Logf receives progress lines; nil: none.
	Logf func(format string, args ...any)
	// LockWait is how long Start waits while another real node runs on
	// the machine (one at a time: see LockPath); zero fails at once.
	LockWait time.Duration
}

// Timing is one step of Start and when it ended, since Start began.
type Timing struct {
	Step  string
	After time.Duration
}

// Node is a running real node and its control plane.
type Node struct {
	// Cluster is the control plane; its Config is an admin client.
	Cluster *simcluster.Cluster
	// StateDir holds the node's files.
	StateDir string
	// Timings of Start's steps.
	Timings []Timing

	opts      Options
	start     time.Time
	processes []*simcluster.Process
	// lock is LockPath, held from Start until Stop has torn down.
	lock *os.File
}

// Start tears down what an earlier run left in opts.StateDir, then brings
// up the control plane and the node and waits until the node is Ready,
// its NetworkPolicy firewall runs and cluster DNS answers. On error it
// keeps the logs (KeptLogs) and tears down what it made.
func Start(ctx context.Context, opts Options) (*Node, error) {
	if err := Supported(); err != nil {
		return nil, err
	}
	if opts.StateDir == "" {
		opts.StateDir = DefaultStateDir
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if err := checkBinaries(opts); err != nil {
		return nil, err
	}
	held, err := lock(ctx, opts.LockWait, opts.Logf)
	if err != nil {
		return nil, err
	}
	n := &Node{StateDir: opts.StateDir, opts: opts, start: time.Now(), lock: held}
	// Every process started from here on inherits the mark Teardown
	// finds the node's processes by.
	if err := os.Setenv(StateEnv, filepath.Clean(opts.StateDir)); err != nil {
		_ = held.Close()
		return nil, err
	}
	if err := Teardown(opts.StateDir); err != nil {
		_ = held.Close()
		return nil, fmt.Errorf("tearing down an earlier run first: %w", err)
	}
	n.mark("earlier run torn down")
	if err := n.up(ctx); err != nil {
		if kept := n.KeepLogs(); kept != "" {
			err = fmt.Errorf("%w (the node's logs are kept in %s)", err, kept)
		}
		return nil, errors.Join(err, n.Stop())
	}
	return n, nil
}

// KeptLogs is where KeepLogs puts the logs of a node with this state
// directory: beside it, since the teardown removes it.
func KeptLogs(stateDir string) string { return filepath.Clean(stateDir) + "-logs" }

// KeepLogs moves the daemons' and the control plane's logs out of the
// state directory, to KeptLogs, before a teardown removes them (a failed
// start or test). It says where, or "" when there was nothing to keep.
func (n *Node) KeepLogs() string {
	kept := KeptLogs(n.StateDir)
	_ = os.RemoveAll(kept)
	if err := os.Rename(n.path("logs"), kept); err != nil {
		return ""
	}
	cluster, _ := filepath.Glob(n.path("cluster", "*.log"))
	for _, f := range cluster {
		_ = os.Rename(f, filepath.Join(kept, "control-plane-"+filepath.Base(f)))
	}
	// The pods still running (the gateway's, the controller's, the apps'):
	// what they logged explains a failure the daemons' logs only frame.
	_ = os.Rename(n.path("pod-logs"), filepath.Join(kept, "pods"))
	return kept
}

// Supported says why this machine cannot run a real node, or nil.
func Supported() error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("a real node needs Linux (namespaces, cgroups), not %s", runtime.GOOS)
	}
	if os.Geteuid() != 0 {
		return errors.New("a real node needs root (network and mount namespaces, cgroups, containerd)")
	}
	return nil
}

// checkBinaries names every missing part at once.
func checkBinaries(opts Options) error {
	var missing []error
	for _, p := range []string{
		filepath.Join(opts.ControlPlaneDir, "kube-apiserver"),
		filepath.Join(opts.NodeBinariesDir, "kubelet"), filepath.Join(opts.NodeBinariesDir, "kube-proxy"),
		filepath.Join(opts.NodeBinariesDir, "kube-router"), filepath.Join(opts.NodeBinariesDir, "coredns"),
		filepath.Join(opts.NodeBinariesDir, "containerd"), filepath.Join(opts.NodeBinariesDir, "ctr"),
		filepath.Join(opts.NodeBinariesDir, "runc"), filepath.Join(opts.NodeBinariesDir, "cni", "bridge"),
	} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, err)
		}
	}
	for _, img := range opts.Images {
		if _, err := os.Stat(img); err != nil {
			missing = append(missing, err)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("real node parts missing (hack/build-control-plane.sh, hack/build-node.sh): %w", errors.Join(missing...))
	}
	return nil
}

func (n *Node) mark(step string) {
	t := Timing{Step: step, After: time.Since(n.start)}
	n.Timings = append(n.Timings, t)
	n.opts.Logf("realnode: %s after %s", step, t.After.Round(10*time.Millisecond))
}

// Stop ends the node's daemons, then the control plane, then tears down
// everything else (pods, mounts, namespaces, cgroups, sysctls, files). It
// is safe to call more than once.
func (n *Node) Stop() error {
	var errs []error
	start := time.Now()
	for i := len(n.processes) - 1; i >= 0; i-- {
		errs = append(errs, n.processes[i].Stop(5*time.Second))
	}
	n.processes = nil
	errs = append(errs, killNode(n.StateDir))
	n.opts.Logf("realnode: stop: daemons and pods ended after %s", time.Since(start).Round(10*time.Millisecond))
	if n.Cluster != nil {
		errs = append(errs, n.Cluster.Stop())
		n.Cluster = nil
	}
	n.opts.Logf("realnode: stop: control plane ended after %s", time.Since(start).Round(10*time.Millisecond))
	errs = append(errs, Teardown(n.StateDir))
	n.opts.Logf("realnode: stop: torn down after %s", time.Since(start).Round(10*time.Millisecond))
	if n.lock != nil {
		errs = append(errs, n.lock.Close())
		n.lock = nil
	}
	return errors.Join(errs...)
}

// Alive reports an error when one of the node's daemons has exited.
func (n *Node) Alive() error {
	for _, p := range n.processes {
		if err := p.Exited(); err != nil {
			return err
		}
	}
	if n.Cluster != nil {
		return n.Cluster.Alive()
	}
	return nil
}

// path is a path under the state directory.
func (n *Node) path(elem ...string) string {
	return filepath.Join(append([]string{n.StateDir}, elem...)...)
}

func (n *Node) bin(name string) string { return filepath.Join(n.opts.NodeBinariesDir, name) }

func (n *Node) kubeconfig(name string) string { return n.path("kubeconfigs", name+".kubeconfig") }

// waitFor polls cond until it holds, failing early when a daemon exits.
func (n *Node) waitFor(ctx context.Context, what string, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := n.Alive(); err != nil {
			return false, err
		}
		return cond(ctx)
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}
