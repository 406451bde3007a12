package controller_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/controller"
	"github.com/userland-dev/userland/internal/testenv"
	"github.com/userland-dev/userland/internal/testobj"
)

var env *testenv.Environment

func TestMain(m *testing.M) {
	snapshots, err := testenv.SnapshotCRDDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	crds := []string{filepath.Join(testenv.RepoRoot(), "config", "crd", "bases"), snapshots}
	os.Exit(testenv.Run(m, testenv.Options{Mode: testenv.Full, CRDDirectoryPaths: crds}, &env))
}

var (
	snapOnce  sync.Once
	snapshots client.Client
	snapErr   error
)

// snapClient is an admin client that knows volume snapshots.
func snapClient(t *testing.T) client.Client {
	t.Helper()
	snapOnce.Do(func() {
		scheme := v1alpha1.NewScheme()
		if snapErr = snapshotv1.AddToScheme(scheme); snapErr == nil {
			snapshots, snapErr = client.New(env.Config, client.Options{Scheme: scheme})
		}
	})
	if snapErr != nil {
		t.Fatal(snapErr)
	}
	return snapshots
}

// offsetClock is the real clock shifted by an adjustable offset: tests move
// time forward instead of waiting for idle timeouts.
type offsetClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *offsetClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *offsetClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c *offsetClock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// writeCounter counts the controller's write requests to the API server,
// per namespace ("" for cluster-scoped objects): earlier tests' namespaces
// are still being torn down while a later test measures its own.
type writeCounter struct {
	mu sync.Mutex
	n  map[string]int
	// status counts writes of Userlands' status, per namespace.
	status map[string]int
	// requests lists each namespace's writes ("PATCH /apis/..."), for
	// failure messages.
	requests map[string][]string
}

func (w *writeCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		switch req.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			ns := ""
			if _, rest, ok := strings.Cut(req.URL.Path, "/namespaces/"); ok {
				ns, _, _ = strings.Cut(rest, "/")
			}
			w.mu.Lock()
			if w.n == nil {
				w.n, w.status, w.requests = map[string]int{}, map[string]int{}, map[string][]string{}
			}
			w.n[ns]++
			w.requests[ns] = append(w.requests[ns], req.Method+" "+req.URL.Path)
			if strings.Contains(req.URL.Path, "/userlands/") && strings.HasSuffix(req.URL.Path, "/status") {
				w.status[ns]++
			}
			w.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// count is the number of writes to namespace and to cluster-scoped objects.
func (w *writeCounter) count(namespace string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n[namespace] + w.n[""]
}

// requestsTo lists the writes to namespace so far.
func (w *writeCounter) requestsTo(namespace string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.requests[namespace])
}

// statusWrites is the number of writes of Userlands' status in namespace.
func (w *writeCounter) statusWrites(namespace string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status[namespace]
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// running is one controller manager started by a test.
type running struct {
	clock  *offsetClock
	writes *writeCounter
	stop   func()
}

const gatewayURL = "https://userland.example.edu"

// startController runs a manager of the test's own against the shared
// control plane until the test ends (or stop is called). It is for the
// tests that move the clock, stop the controller, count every write or
// watch cluster-scoped objects; they do not run in parallel. The
// package-wide controller (sharedController) is stopped first, so that
// only one controller ever reconciles at a time.
func startController(t *testing.T, options ...func(*controller.Options)) *running {
	t.Helper()
	if err := stopShared(); err != nil {
		t.Errorf("the package-wide controller: %v", err)
	}
	r, stop := newController(t, options...)
	r.stop = func() {
		if err := stop(); err != nil {
			t.Errorf("manager: %v", err)
		}
	}
	t.Cleanup(r.stop)
	return r
}

// shared is the package-wide controller of the parallel tests.
var shared struct {
	mu   sync.Mutex
	r    *running
	stop func() error
	once sync.Once
}

// sharedController is the controller that the tests running in parallel
// (t.Parallel, a namespace each) share, started on first use. Its clock
// is never moved, so each test's namespace is its own. Go runs every
// serial test before the parallel ones, so it never reconciles beside a
// test's own controller; startController stops it all the same, for
// go test -count=2, which runs the serial tests again.
func sharedController(t *testing.T) *running {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	shared.once.Do(func() { env.OnStop(stopShared) })
	if shared.r == nil {
		shared.r, shared.stop = newController(t)
	}
	return shared.r
}

// stopShared stops the package-wide controller, if it runs.
func stopShared() error {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.r == nil {
		return nil
	}
	shared.r = nil
	return shared.stop()
}

// newController starts a manager and returns the function that stops it
// and says how it ended.
func newController(t *testing.T, options ...func(*controller.Options)) (*running, func() error) {
	t.Helper()
	r := &running{clock: &offsetClock{}, writes: &writeCounter{}}
	cfg := rest.CopyConfig(controllerConfig(t))
	cfg.QPS, cfg.Burst = 500, 1000
	cfg.WrapTransport = r.writes.wrap
	opts := controller.Options{
		MetricsAddr:      "0",
		ProbeAddr:        "0",
		Workers:          8,
		GatewayURL:       gatewayURL,
		GatewaySelector:  "app.kubernetes.io/name=userland-gateway",
		GatewayNamespace: "userland-system",
		RolloutIdleAfter: 10 * time.Minute,
		// As the flag's default: the tests see what production does.
		FirstStatusWindow: time.Second,
		Clock:             r.clock,
		Registry:          prometheus.NewRegistry(),
		AllowRestart:      true,
	}
	for _, o := range options {
		o(&opts)
	}
	mgr, err := controller.NewManager(cfg, opts)
	if err != nil {
		t.Fatalf("creating manager: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var (
		once    sync.Once
		stopErr error
	)
	return r, func() error {
		once.Do(func() {
			cancel()
			stopErr = <-done
		})
		return stopErr
	}
}

var (
	identityOnce sync.Once
	identity     *rest.Config
	identityErr  error
)

// controllerConfig is a client configuration bound only to the controller's
// generated ClusterRole (config/rbac/role.yaml): every reconcile test then
// proves the RBAC markers are complete.
func controllerConfig(t *testing.T) *rest.Config {
	t.Helper()
	identityOnce.Do(func() {
		ctx := context.Background()
		if identityErr = env.CreateFromFile(ctx, filepath.Join(testenv.RepoRoot(), "config", "rbac", "role.yaml")); identityErr != nil {
			return
		}
		identity, identityErr = env.ConfigBoundTo(ctx, "userland-controller-under-test", "userland-controller")
	})
	if identityErr != nil {
		t.Fatalf("controller identity: %v", identityErr)
	}
	return identity
}

// template is the controller tests' template: a web container with a home
// volume.
func template(ns, name, image string) *v1alpha1.Template {
	return testobj.MakeTemplate(ns, name).Container("web").Image(image).Volume("home", "/home/user").Obj()
}

func userland(ns, name, user, tmpl string) *v1alpha1.Userland {
	return testobj.MakeUserland(ns, name, user, tmpl).Obj()
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

func get(t *testing.T, ctx context.Context, ns, name string) (*v1alpha1.Userland, error) {
	t.Helper()
	var ul v1alpha1.Userland
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &ul)
	return &ul, err
}

// poke changes an annotation so the controller reconciles now; tests use
// it after moving the clock, standing in for the requeue timer.
func poke(t *testing.T, ns, name string) {
	t.Helper()
	ul, err := get(t, context.Background(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(ul.DeepCopy())
	if ul.Annotations == nil {
		ul.Annotations = map[string]string{}
	}
	ul.Annotations["test.userland.dev/poke"] = time.Now().Format(time.RFC3339Nano)
	if err := env.Client.Patch(context.Background(), ul, patch); err != nil {
		t.Fatalf("poking %s/%s: %v", ns, name, err)
	}
}

func condition(ul *v1alpha1.Userland, typ string) *metav1.Condition {
	for i := range ul.Status.Conditions {
		if ul.Status.Conditions[i].Type == typ {
			return &ul.Status.Conditions[i]
		}
	}
	return nil
}
