// Package devenv is `userland dev`: the whole system on one machine. It
// starts the simulated cluster (API server, etcd, controller-manager,
// scheduler, kwok nodes), installs what the repository ships (CRDs, RBAC,
// webhooks, sample templates) plus demo users, and runs the controller and
// the gateway in this process. With a kubeconfig it targets an existing
// cluster instead.
package devenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/internal/realnode"
	"github.com/userland-dev/userland/internal/simcluster"
	"github.com/userland-dev/userland/internal/webhook"
)

// Names dev mode creates.
const (
	// DemoNamespace holds the sample templates and demo environments.
	DemoNamespace = "demo"
	// SystemNamespace holds the webhook certificate, as in a real install.
	SystemNamespace = "userland-system"
	// AdminGroup is the demo admins' group.
	AdminGroup = "userland-admins"
	// InstructorGroup instructs DemoNamespace.
	InstructorGroup = "teachers"
	// CourseManagerRole and UserManagerRole are the shipped ClusterRoles
	// dev mode binds to the demo's instructors (in DemoNamespace) and
	// admins (everywhere).
	CourseManagerRole = "userland-course-manager"
	UserManagerRole   = "userland-user-manager"
	// DemoPassword is every demo user's password.
	DemoPassword = "userland"
	// WebhookConfigName is the installed ValidatingWebhookConfiguration.
	WebhookConfigName = "userland-validating-webhook-configuration"
	fieldOwner        = "userland-dev"
)

// EnvironmentDomain is dev mode's environment domain: browsers resolve
// every *.localhost name to this machine, so each environment gets its own
// origin (http://<name>--<namespace>.localhost:8000) with no DNS set-up,
// apart from the dashboard's http://127.0.0.1:8000.
const EnvironmentDomain = "localhost"

// Options configure dev mode.
type Options struct {
	// StateDir keeps the cluster's data between runs (.userland-dev).
	StateDir string
	// Reset wipes StateDir first.
	Reset bool
	// Listen is the gateway's address (127.0.0.1:8000).
	Listen string
	// Kubeconfig targets an existing cluster instead of the simulated one.
	Kubeconfig string
	// ControlPlaneDir holds the simulated cluster's binaries; empty: found
	// as simcluster.FindBinaries does (built when run in a checkout).
	ControlPlaneDir string
	// NewController builds the controller manager dev mode runs (required).
	// The caller supplies it, so this package does not import the
	// reconciler: cmd/userland passes controller.NewManager.
	NewController func(cfg *rest.Config, s ControllerSettings) (Runnable, error)
	// Log receives progress lines (os.Stderr when nil).
	Log io.Writer
	// RealNode runs the pods on one real node (internal/realnode: a
	// kubelet, containerd, kube-proxy, a NetworkPolicy firewall and
	// CoreDNS) beside the simulated control plane, instead of on kwok's
	// simulated nodes: Linux and root only. nil: kwok.
	RealNode *RealNodeOptions
}

// RealNodeOptions configure `userland dev --real-node`.
type RealNodeOptions struct {
	// NodeBinariesDir is hack/build-node.sh's cache directory.
	NodeBinariesDir string
	// Images are OCI archives imported into the node's containerd; the
	// sandbox image userland.local/pause:1 must be among them (make
	// dev-real-node packs it with hack/nodeimage).
	Images []string
	// ImageOverrides replace images of the sample templates dev mode
	// applies (public name → name of a local image among Images), for a
	// machine that cannot pull the public ones. The samples themselves
	// are not changed.
	ImageOverrides map[string]string
	// LockWait is how long to wait while another real node runs on this
	// machine (there can be one at a time); zero fails at once, as
	// `userland dev --real-node` should. Tests and the bench queue.
	LockWait time.Duration
}

// ControllerSettings are what dev mode decides for the controller it runs.
type ControllerSettings struct {
	// GatewayURL is the dashboard's address, for status.url.
	GatewayURL string
	// GatewaySelector and GatewayNamespace select the gateway's pods in
	// NetworkPolicies.
	GatewaySelector, GatewayNamespace string
	// BaseDomain is the environment domain.
	BaseDomain string
	// Webhooks serve admission on this machine with a self-signed
	// certificate.
	Webhooks *webhook.Options
}

// Runnable is a manager dev mode starts and stops.
type Runnable interface {
	Start(ctx context.Context) error
}

// Stack is a running dev system.
type Stack struct {
	// URL is the dashboard.
	URL string
	// KubeconfigPath reaches the cluster as an administrator.
	KubeconfigPath string
	// Config is the same administrator's client configuration.
	Config *rest.Config
	// Client reads and writes the cluster without a cache.
	Client client.Client
	// Simulated is true when pods run on kwok's simulated nodes: false
	// on an existing cluster and on a real node.
	Simulated bool

	opts Options
	lock *os.File
	env  *simcluster.Cluster
	// node is the real node (RealNode), which owns env.
	node   *realnode.Node
	apps   *DemoApps
	cancel context.CancelFunc
	// running counts the managers; exited closes when the first stops.
	running  sync.WaitGroup
	exitOnce sync.Once
	exited   chan struct{}
	mu       sync.Mutex
	exitErrs []error
}

// launch runs a manager until the stack stops.
func (s *Stack) launch(what string, start func() error) {
	s.running.Add(1)
	go func() {
		defer s.running.Done()
		err := start()
		s.mu.Lock()
		if err != nil && !errors.Is(err, context.Canceled) {
			s.exitErrs = append(s.exitErrs, fmt.Errorf("%s: %w", what, err))
		}
		s.mu.Unlock()
		s.exitOnce.Do(func() { close(s.exited) })
	}()
}

// exitError is what the managers that stopped reported.
func (s *Stack) exitError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.exitErrs...)
}

// ErrLocked means another `userland dev` uses the state directory.
var ErrLocked = errors.New("another `userland dev` is running")

func (s *Stack) logf(format string, args ...any) {
	_, _ = fmt.Fprintf(s.opts.Log, format+"\n", args...)
}

// Start brings the system up and returns once the dashboard answers.
func Start(ctx context.Context, opts Options) (_ *Stack, err error) {
	if opts.StateDir == "" {
		opts.StateDir = ".userland-dev"
	}
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:8000"
	}
	if opts.Log == nil {
		opts.Log = os.Stderr
	}
	if opts.StateDir, err = filepath.Abs(opts.StateDir); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	s := &Stack{opts: opts, apps: &DemoApps{}, exited: make(chan struct{}), Simulated: opts.Kubeconfig == "" && opts.RealNode == nil}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Stop())
		}
	}()
	if err := s.acquire(); err != nil {
		return nil, err
	}
	if err := s.cluster(ctx); err != nil {
		return nil, err
	}
	if err := s.install(ctx); err != nil {
		return nil, err
	}
	if err := s.run(ctx); err != nil {
		return nil, err
	}
	if err := s.demo(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Exited closes when the controller or the gateway stops on its own;
// Err then says why.
func (s *Stack) Exited() <-chan struct{} { return s.exited }

// Err reports why components stopped.
func (s *Stack) Err() error { return s.exitError() }

// Stop ends the controller, the gateway, the demo apps and the cluster,
// and releases the state directory.
func (s *Stack) Stop() error {
	var errs []error
	if s.cancel != nil {
		s.cancel()
		stopped := make(chan struct{})
		go func() { s.running.Wait(); close(stopped) }()
		select {
		case <-stopped:
			errs = append(errs, s.exitError())
		case <-time.After(30 * time.Second):
			errs = append(errs, errors.New("timed out stopping the controller and gateway"))
		}
		s.cancel = nil
	}
	s.apps.Close()
	switch {
	case s.node != nil:
		// The node stops its pods, then the control plane, then tears
		// everything down.
		errs = append(errs, s.node.Stop())
		s.node, s.env = nil, nil
	case s.env != nil:
		errs = append(errs, s.env.Stop())
		s.env = nil
	}
	if s.lock != nil {
		_ = s.lock.Truncate(0)
		errs = append(errs, s.lock.Close())
		s.lock = nil
	}
	return errors.Join(errs...)
}
