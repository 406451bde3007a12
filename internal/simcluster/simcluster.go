// Package simcluster runs a simulated Kubernetes cluster on this machine
// from real control-plane binaries (built by hack/build-control-plane.sh):
// etcd and kube-apiserver with a certificate authority of its own, and in
// Full mode kube-controller-manager, kube-scheduler and kwok simulating
// nodes, so Deployments produce Pods that are scheduled and become Ready,
// EndpointSlices fill and garbage collection runs.
//
// `userland dev` runs on it, and so do the tests (through internal/testenv,
// which adds what only tests need). It imports no test code: the shipped
// binary carries none.
package simcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// ExitWithParentEnv makes the control-plane children exit when the
// process that started them dies abruptly; it must match
// hack/tools/parentwatch.EnvVar.
const ExitWithParentEnv = "USERLAND_EXIT_WITH_PARENT"

// Mode selects which components run.
type Mode int

const (
	// APIOnly runs etcd and kube-apiserver.
	APIOnly Mode = iota
	// Full adds kube-controller-manager, kube-scheduler and kwok nodes.
	Full
)

// String names the mode in logs.
func (m Mode) String() string {
	if m == Full {
		return "full"
	}
	return "API only"
}

// KwokNodeAnnotation marks the nodes kwok manages.
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

// Options configure a Cluster.
type Options struct {
	// Mode selects APIOnly or Full.
	Mode Mode
	// BinariesDir holds the control-plane binaries (FindBinaries).
	BinariesDir string
	// CRDDirectoryPaths hold the CRDs to install; required, except with
	// RealNodes, where a test may install them itself (helm, the chart).
	CRDDirectoryPaths []string
	// Nodes is how many kwok nodes Full mode creates (default 2).
	Nodes int
	// ExtraStages are kwok Stage documents added to the default ones, e.g.
	// to make some pods fail.
	ExtraStages []string
	// Dir holds logs, certificates and kubeconfigs; default a new temporary
	// directory removed by Stop.
	Dir string
	// APIServerArgs are extra kube-apiserver flags, e.g. an audit log.
	APIServerArgs map[string]string
	// StateDir, when set, keeps etcd's data in StateDir/etcd so the
	// cluster's objects survive a restart (`userland dev`), and the
	// certificate authority and API server port, so a kubeconfig read
	// before a restart still works after it.
	StateDir string
	// KeepDir keeps a temporary Dir after Stop (for reading logs).
	KeepDir bool
	// BindAddress, when set, is the one address kube-apiserver listens on
	// instead of 127.0.0.1, and is in its serving certificate: a real node
	// in a network namespace of its own reaches the API server at the host
	// end of a veth (internal/realnode). The address must exist already.
	BindAddress string
	// RealNodes readies the control plane for real kubelets instead of
	// kwok: Node authorization and NodeRestriction admission, a client
	// certificate the API server calls kubelets with (trusting the
	// cluster's CA for their serving certificates), kubelets reached at
	// their InternalIP, and in Full mode no kwok, kwok nodes or kwok
	// StorageClass (a kwok-bound volume would never mount on a real node).
	RealNodes bool
}

// Cluster is a running simulated cluster.
type Cluster struct {
	// Config is an admin (system:masters) client configuration.
	Config *rest.Config
	// KubeconfigPath is an admin kubeconfig file for the same cluster.
	KubeconfigPath string
	// Scheme knows the built-in kinds and Userland's.
	Scheme *runtime.Scheme
	// Client reads straight from the API server (no cache).
	Client client.Client
	// Dir holds component logs.
	Dir string
	// PortMoved reports that the API server could not take the port kept
	// in StateDir (something else listens there): kubeconfigs read before
	// must be read again.
	PortMoved bool

	opts      Options
	ownDir    bool
	server    string
	ca        *authority
	processes []*Process
}

// Start brings up a cluster per opts and waits until it is usable.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.BinariesDir == "" {
		return nil, errors.New("simcluster: no control-plane binaries directory (see FindBinaries)")
	}
	if len(opts.CRDDirectoryPaths) == 0 && !opts.RealNodes {
		return nil, errors.New("simcluster: no CRD directories")
	}
	// Children inherit this, and exit when this process dies abruptly (a
	// panic or a test timeout) instead of outliving it.
	if err := os.Setenv(ExitWithParentEnv, "1"); err != nil {
		return nil, fmt.Errorf("setting %s: %w", ExitWithParentEnv, err)
	}
	if opts.Nodes == 0 {
		opts.Nodes = 2
	}
	c := &Cluster{opts: opts, Dir: opts.Dir, Scheme: v1alpha1.NewScheme()}
	if c.Dir == "" {
		var err error
		if c.Dir, err = os.MkdirTemp("", "userland-cluster-"); err != nil {
			return nil, fmt.Errorf("creating the cluster's directory: %w", err)
		}
		c.ownDir = true
	}
	err := c.startAPI(ctx, opts.BinariesDir)
	for attempt := 2; err != nil && portTaken(err) && attempt <= startAttempts; attempt++ {
		// Another process bound a port between FreePort finding it free
		// and etcd or the API server binding it (seen in CI): start them
		// again, on ports found afresh.
		if stopErr := c.stopProcesses(); stopErr != nil {
			return nil, errors.Join(err, stopErr, c.Stop())
		}
		err = c.startAPI(ctx, opts.BinariesDir)
	}
	if err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	if opts.Mode == Full {
		if err := c.startFull(ctx, opts.BinariesDir); err != nil {
			return nil, errors.Join(err, c.Stop())
		}
	}
	return c, nil
}

// Stop ends every process the cluster started, the API server and etcd
// last. It is safe to call more than once and on a partly started cluster.
func (c *Cluster) Stop() error {
	errs := []error{c.stopProcesses()}
	if c.ownDir && !c.opts.KeepDir {
		errs = append(errs, os.RemoveAll(c.Dir))
	}
	return errors.Join(errs...)
}

// stopProcesses ends every process the cluster started, last first.
func (c *Cluster) stopProcesses() error {
	var errs []error
	for i := len(c.processes) - 1; i >= 0; i-- {
		errs = append(errs, c.processes[i].Stop(10*time.Second))
	}
	c.processes = nil
	return errors.Join(errs...)
}

// startAttempts is how many times Start brings up etcd and the API server
// when one of them could not bind the port it was given.
const startAttempts = 3

// portTaken is true of a start that failed because a component could not
// bind its port: its last log lines, which the error carries, say so.
func portTaken(err error) bool {
	return strings.Contains(err.Error(), "address already in use")
}

// StopComponent stops one of the cluster's processes by name
// ("kube-apiserver", "etcd", "kube-controller-manager", ...), with SIGTERM,
// or SIGKILL when kill is set, leaving its data and port for
// StartComponent: fault tests take the API server or etcd away and bring
// it back.
func (c *Cluster) StopComponent(name string, kill bool) error {
	p := c.process(name)
	if p == nil {
		return fmt.Errorf("the cluster runs no %s", name)
	}
	if kill {
		return p.Kill()
	}
	return p.Stop(10 * time.Second)
}

// StartComponent starts a component StopComponent stopped, with the same
// flags, data and port, and for the API server waits until it is ready.
func (c *Cluster) StartComponent(ctx context.Context, name string) error {
	for i, p := range c.processes {
		if p.name != name {
			continue
		}
		again, err := p.Respawn()
		if err != nil {
			return err
		}
		c.processes[i] = again
		if name == "kube-apiserver" {
			return c.waitReady(ctx)
		}
		return nil
	}
	return fmt.Errorf("the cluster runs no %s", name)
}

func (c *Cluster) process(name string) *Process {
	for _, p := range c.processes {
		if p.name == name {
			return p
		}
	}
	return nil
}

// Alive reports an error when a component the cluster started has exited.
func (c *Cluster) Alive() error {
	for _, p := range c.processes {
		if err := p.Exited(); err != nil {
			return err
		}
	}
	return nil
}

// nodeObject is a kwok-managed node with room for many pods.
func nodeObject(name string) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("1000"),
		corev1.ResourceMemory: resource.MustParse("4Ti"),
		corev1.ResourcePods:   resource.MustParse("5000"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{KwokNodeAnnotation: "fake"},
			Labels: map[string]string{
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
				"type":                   "kwok",
			},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
}

// waitFor polls cond every 200ms until it is true, the context ends or a
// component dies. Used only while starting.
func (c *Cluster) waitFor(ctx context.Context, what string, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Alive(); err != nil {
			return false, err
		}
		return cond(ctx)
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}
