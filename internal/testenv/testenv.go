// Package testenv starts a real Kubernetes control plane for tests and for
// `userland dev`, from binaries built from source (see
// hack/build-control-plane.sh).
//
// Two modes:
//   - APIOnly: etcd and kube-apiserver through controller-runtime's envtest,
//     with Userland's CRDs installed. For schema, CEL, defaults, server-side
//     apply, RBAC and webhook tests.
//   - Full: APIOnly plus kube-controller-manager, kube-scheduler and kwok
//     simulating nodes, so Deployments produce Pods that are scheduled and
//     become Running and Ready, EndpointSlices fill and garbage collection
//     runs. For anything involving pods.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	userlandv1alpha1 "github.com/userland-dev/userland/api/v1alpha1"
)

// exitWithParentEnv must match hack/tools/parentwatch.EnvVar.
const exitWithParentEnv = "USERLAND_EXIT_WITH_PARENT"

// Mode selects which components run.
type Mode int

const (
	// APIOnly runs etcd and kube-apiserver.
	APIOnly Mode = iota
	// Full adds kube-controller-manager, kube-scheduler and kwok nodes.
	Full
)

// KwokNodeAnnotation marks the nodes kwok manages.
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

// Options configure an Environment. The zero value is an API-only control
// plane with Userland's CRDs.
type Options struct {
	// Mode selects APIOnly or Full.
	Mode Mode
	// CRDDirectoryPaths default to config/crd/bases in this repository.
	CRDDirectoryPaths []string
	// Nodes is how many kwok nodes Full mode creates (default 2).
	Nodes int
	// ExtraStages are kwok Stage documents added to the default ones, e.g.
	// to make some pods fail.
	ExtraStages []string
	// Dir holds logs and kubeconfigs; default a new temporary directory
	// removed by Stop.
	Dir string
	// APIServerArgs are extra kube-apiserver flags, e.g. an audit log.
	APIServerArgs map[string]string
	// StateDir, when set, keeps etcd's data in StateDir/etcd so the
	// cluster's objects survive a restart (`userland dev`).
	StateDir string
}

// Environment is a running control plane.
type Environment struct {
	// Config is an admin (system:masters) client configuration.
	Config *rest.Config
	// KubeconfigPath is an admin kubeconfig file for the same cluster.
	KubeconfigPath string
	// Scheme knows the core kinds and Userland's.
	Scheme *runtime.Scheme
	// Client reads straight from the API server (no cache), so assertions
	// see what the server holds, never a stale informer.
	Client client.Client
	// Dir holds component logs.
	Dir string

	opts      Options
	ownDir    bool
	envtest   *envtest.Environment
	processes []*process
}

// Start brings up a control plane per opts and waits until it is usable.
func Start(ctx context.Context, opts Options) (*Environment, error) {
	bins, err := BinariesDir(opts.Mode)
	if err != nil {
		return nil, err
	}
	// Children inherit this, and exit when this process dies abruptly (a
	// panic or `go test` timeout) instead of outliving it.
	if err := os.Setenv(exitWithParentEnv, "1"); err != nil {
		return nil, fmt.Errorf("setting %s: %w", exitWithParentEnv, err)
	}
	if len(opts.CRDDirectoryPaths) == 0 {
		opts.CRDDirectoryPaths = []string{filepath.Join(RepoRoot(), "config", "crd", "bases")}
	}
	if opts.Nodes == 0 {
		opts.Nodes = 2
	}
	e := &Environment{opts: opts, Dir: opts.Dir}
	if e.Dir == "" {
		if e.Dir, err = os.MkdirTemp("", "userland-testenv-"); err != nil {
			return nil, fmt.Errorf("creating environment directory: %w", err)
		}
		e.ownDir = true
	}
	e.Scheme = userlandv1alpha1.NewScheme()

	if err := e.startAPI(bins); err != nil {
		return nil, errors.Join(err, e.Stop())
	}
	if opts.Mode == Full {
		if err := e.startFull(ctx, bins); err != nil {
			return nil, errors.Join(err, e.Stop())
		}
	}
	return e, nil
}

func (e *Environment) startAPI(bins string) error {
	e.envtest = &envtest.Environment{
		BinaryAssetsDirectory:    bins,
		CRDDirectoryPaths:        e.opts.CRDDirectoryPaths,
		ErrorIfCRDPathMissing:    true,
		Scheme:                   e.Scheme,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	if e.opts.StateDir != "" {
		dataDir := filepath.Join(e.opts.StateDir, "etcd")
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			return fmt.Errorf("creating etcd data directory: %w", err)
		}
		e.envtest.ControlPlane.Etcd = &envtest.Etcd{DataDir: dataDir}
	}
	api := e.envtest.ControlPlane.GetAPIServer()
	// envtest's default /24 holds only 254 Services; scale tests need more.
	api.Configure().Set("service-cluster-ip-range", "10.96.0.0/16")
	// Clients and controllers in one process would otherwise be throttled
	// by the server's in-flight limits during scale tests.
	api.Configure().Set("max-requests-inflight", "2000")
	api.Configure().Set("max-mutating-requests-inflight", "1000")
	for k, v := range e.opts.APIServerArgs {
		api.Configure().Set(k, v)
	}

	cfg, err := e.envtest.Start()
	if err != nil {
		return fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	// Test clients are not throttled client-side; the server's limits are
	// what the tests measure.
	cfg.QPS, cfg.Burst = -1, -1
	e.Config = cfg

	admin, err := e.envtest.AddUser(envtest.User{Name: "userland-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("creating admin user: %w", err)
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		return fmt.Errorf("rendering admin kubeconfig: %w", err)
	}
	e.KubeconfigPath = filepath.Join(e.Dir, "kubeconfig")
	if err := os.WriteFile(e.KubeconfigPath, kubeconfig, 0o600); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	if e.Client, err = client.New(cfg, client.Options{Scheme: e.Scheme}); err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	return nil
}

// Stop ends every process the environment started. It is safe to call more
// than once and on a partly started environment.
func (e *Environment) Stop() error {
	var errs []error
	// Reverse order: kwok and the controllers before the API server.
	for i := len(e.processes) - 1; i >= 0; i-- {
		errs = append(errs, e.processes[i].stop(10*time.Second))
	}
	e.processes = nil
	if e.envtest != nil {
		if err := e.envtest.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping kube-apiserver and etcd: %w", err))
		}
		e.envtest = nil
	}
	if e.ownDir && os.Getenv("USERLAND_KEEP_TESTENV") == "" {
		errs = append(errs, os.RemoveAll(e.Dir))
	}
	return errors.Join(errs...)
}

// Alive reports an error when a component the harness started has exited.
func (e *Environment) Alive() error {
	for _, p := range e.processes {
		if err := p.exited(); err != nil {
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
// component dies. Used only while starting the harness.
func (e *Environment) waitFor(ctx context.Context, what string, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := e.Alive(); err != nil {
			return false, err
		}
		return cond(ctx)
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}
