// Package devenv is `userland dev`: the whole system on one machine. It
// starts the simulated cluster (API server, etcd, controller-manager,
// scheduler, kwok nodes), installs what the repository ships (CRDs, RBAC,
// webhooks, sample templates) plus demo users, and runs the controller and
// the gateway in this process. With a kubeconfig it targets an existing
// cluster instead.
package devenv

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/bcrypt"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/config"
	"github.com/userland-dev/userland/internal/controller"
	"github.com/userland-dev/userland/internal/gateway"
	"github.com/userland-dev/userland/internal/gateway/auth"
	"github.com/userland-dev/userland/internal/gateway/authz"
	"github.com/userland-dev/userland/internal/gateway/proxy"
	"github.com/userland-dev/userland/internal/naming"
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
	// DemoPassword is every demo user's password.
	DemoPassword = "userland"
	// WebhookConfigName is the installed ValidatingWebhookConfiguration.
	WebhookConfigName = "userland-validating-webhook-configuration"
	fieldOwner        = "userland-dev"
)

// DemoUser is a static user dev mode creates.
type DemoUser struct {
	Name, Email string
	Groups      []string
	// Role explains the user in the banner.
	Role string
	// Templates get a Userland created up front; the rest of what the
	// user may self-provision appears at first sign-in.
	Templates []string
}

// DemoUsers are the users dev mode signs in.
var DemoUsers = []DemoUser{
	{Name: "alice", Email: "alice@uni.example.ac.jp", Groups: []string{"data-science-2026"}, Role: "student with VS Code and JupyterLab", Templates: []string{"vscode", "jupyterlab"}},
	{Name: "bob", Email: "bob@uni.example.ac.jp", Role: "student with VS Code and phpMyAdmin", Templates: []string{"vscode", "phpmyadmin"}},
	{Name: "carol", Email: "carol@uni.example.ac.jp", Role: "student whose VS Code is created at first sign-in"},
	{Name: "teacher", Email: "teacher@uni.example.ac.jp", Groups: []string{InstructorGroup}, Role: "instructor of namespace " + DemoNamespace},
	{Name: "admin", Email: "admin@uni.example.ac.jp", Groups: []string{AdminGroup}, Role: "administrator"},
}

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
	// Log receives progress lines (os.Stderr when nil).
	Log io.Writer
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
	// Simulated is false when dev mode targets an existing cluster.
	Simulated bool

	opts   Options
	lock   *os.File
	env    *simcluster.Cluster
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
	s := &Stack{opts: opts, apps: &DemoApps{}, exited: make(chan struct{}), Simulated: opts.Kubeconfig == ""}
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

// acquire takes the state directory's lock, so a second `userland dev`
// says so instead of sharing etcd's data, then honours Reset.
func (s *Stack) acquire() error {
	if err := os.MkdirAll(s.opts.StateDir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", s.opts.StateDir, err)
	}
	lockPath := filepath.Join(s.opts.StateDir, "lock")
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("opening %s: %w", lockPath, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		pid, _ := io.ReadAll(f)
		_ = f.Close()
		return fmt.Errorf("%w with state in %s (pid %s); stop it first, or use --state-dir", ErrLocked, s.opts.StateDir, strings.TrimSpace(string(pid)))
	}
	s.lock = f
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	if s.opts.Reset {
		entries, err := os.ReadDir(s.opts.StateDir)
		if err != nil {
			return fmt.Errorf("reading %s: %w", s.opts.StateDir, err)
		}
		for _, e := range entries {
			if e.Name() != "lock" {
				if err := os.RemoveAll(filepath.Join(s.opts.StateDir, e.Name())); err != nil {
					return fmt.Errorf("--reset: %w", err)
				}
			}
		}
		s.logf("reset: removed the previous state in %s", s.opts.StateDir)
	}
	return nil
}

// cluster starts the simulated cluster, or connects to the given one.
func (s *Stack) cluster(ctx context.Context) error {
	scheme := v1alpha1.NewScheme()
	s.KubeconfigPath = filepath.Join(s.opts.StateDir, "kubeconfig")
	if !s.Simulated {
		cfg, err := clientcmd.BuildConfigFromFlags("", s.opts.Kubeconfig)
		if err != nil {
			return fmt.Errorf("loading %s: %w", s.opts.Kubeconfig, err)
		}
		s.Config, s.KubeconfigPath = cfg, s.opts.Kubeconfig
		s.Client, err = client.New(cfg, client.Options{Scheme: scheme})
		return err
	}
	crdDir := filepath.Join(s.opts.StateDir, "crds")
	if err := writeEmbedded("crd/bases", crdDir); err != nil {
		return err
	}
	runDir := filepath.Join(s.opts.StateDir, "run")
	_ = os.RemoveAll(runDir)
	if err := os.MkdirAll(runDir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", runDir, err)
	}
	cwd, _ := os.Getwd()
	bins, err := simcluster.FindBinaries(simcluster.Full, s.opts.ControlPlaneDir, simcluster.FindCheckout(cwd))
	if err != nil {
		return err
	}
	start := time.Now()
	s.logf("starting the simulated cluster (etcd, kube-apiserver, controller-manager, scheduler, kwok) …")
	env, err := simcluster.Start(ctx, simcluster.Options{
		Mode: simcluster.Full, BinariesDir: bins, Dir: runDir, StateDir: s.opts.StateDir, CRDDirectoryPaths: []string{crdDir},
	})
	if err != nil {
		return fmt.Errorf("starting the simulated cluster: %w", err)
	}
	s.env = env
	s.logf("cluster ready in %s", time.Since(start).Round(100*time.Millisecond))
	data, err := os.ReadFile(env.KubeconfigPath)
	if err != nil {
		return fmt.Errorf("reading kubeconfig: %w", err)
	}
	if err := os.WriteFile(s.KubeconfigPath, data, 0o600); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	s.Config = env.Config
	s.Client, err = client.New(env.Config, client.Options{Scheme: scheme})
	return err
}

// writeEmbedded copies one embedded manifest folder to disk.
func writeEmbedded(dir, to string) error {
	if err := os.MkdirAll(to, 0o700); err != nil {
		return err
	}
	entries, err := fs.ReadDir(config.Manifests, dir)
	if err != nil {
		return fmt.Errorf("reading embedded %s: %w", dir, err)
	}
	for _, e := range entries {
		data, err := fs.ReadFile(config.Manifests, path.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// objectsIn parses an embedded multi-document YAML file.
func objectsIn(file string) ([]*unstructured.Unstructured, error) {
	data, err := fs.ReadFile(config.Manifests, file)
	if err != nil {
		return nil, fmt.Errorf("reading embedded %s: %w", file, err)
	}
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split("\n"+string(data), "\n---") {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			return nil, fmt.Errorf("parsing %s: %w", file, err)
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
	return out, nil
}

// apply server-side applies obj as dev mode's field owner.
func (s *Stack) apply(ctx context.Context, obj *unstructured.Unstructured) error {
	obj.SetManagedFields(nil)
	obj.SetResourceVersion("")
	//nolint:staticcheck // Patch with client.Apply works with unstructured objects.
	if err := s.Client.Patch(ctx, obj, client.Apply, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return nil
}

// install applies CRDs (existing clusters), RBAC and namespaces.
func (s *Stack) install(ctx context.Context) error {
	var files []string
	if !s.Simulated {
		// The simulated cluster got its CRDs at start.
		entries, err := fs.ReadDir(config.Manifests, "crd/bases")
		if err != nil {
			return err
		}
		for _, e := range entries {
			files = append(files, "crd/bases/"+e.Name())
		}
	}
	files = append(files, "rbac/role.yaml", "rbac/roles.yaml")
	for _, f := range files {
		objs, err := objectsIn(f)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if err := s.apply(ctx, o); err != nil {
				return err
			}
		}
	}
	if !s.Simulated {
		if err := waitForCRDs(ctx, s.Client); err != nil {
			return err
		}
	}
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: SystemNamespace}},
		{ObjectMeta: metav1.ObjectMeta{Name: DemoNamespace, Annotations: map[string]string{authz.InstructorGroupsAnnotation: InstructorGroup}}},
	} {
		ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
		u, err := toUnstructured(ns)
		if err != nil {
			return err
		}
		if err := s.apply(ctx, u); err != nil {
			return err
		}
	}
	return nil
}

func waitForCRDs(ctx context.Context, c client.Client) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, types.NamespacedName{Name: "userlands.userland.dev"}, &crd); err != nil {
			return false, nil
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	data, err := yaml.Marshal(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &u.Object); err != nil {
		return nil, err
	}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	return u, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// run starts the controller (with its webhooks) and the gateway.
func (s *Stack) run(ctx context.Context) error {
	webhookPort, err := freePort()
	if err != nil {
		return err
	}
	if err := s.installWebhooks(ctx, webhookPort); err != nil {
		return err
	}
	host, port, err := net.SplitHostPort(s.opts.Listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", s.opts.Listen, err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	s.URL = "http://" + net.JoinHostPort(host, port)
	// The gateway's port is checked before anything else starts, so a
	// busy port is a clear error rather than a manager failing later.
	if l, err := net.Listen("tcp", s.opts.Listen); err != nil {
		return fmt.Errorf("the dashboard's address %s is busy (use --listen): %w", s.opts.Listen, err)
	} else {
		_ = l.Close()
	}

	stateFiles, err := s.gatewayFiles()
	if err != nil {
		return err
	}
	ctrlMgr, err := controller.NewManager(s.Config, controller.Options{
		MetricsAddr: "0", ProbeAddr: "0", Workers: 4,
		GatewayURL: s.URL, GatewaySelector: "app.kubernetes.io/name=userland-gateway",
		GatewayNamespace: SystemNamespace, BaseDomain: EnvironmentDomain,
		Registry: prometheus.NewRegistry(),
		Webhooks: &webhook.Options{
			Host: "127.0.0.1", Port: webhookPort, CertDir: filepath.Join(s.opts.StateDir, "run", "webhook-certs"),
			PodSecurityLevel: "baseline", SelfSignedCerts: true,
			CertSecret: types.NamespacedName{Namespace: SystemNamespace, Name: "userland-webhook-cert"},
			ConfigName: WebhookConfigName,
			DNSNames:   []string{"userland-webhook-service." + SystemNamespace + ".svc", "localhost"},
			// No kubelet mounts the Secret here.
			WriteCertsToDir: true,
		},
	})
	if err != nil {
		return fmt.Errorf("creating the controller: %w", err)
	}
	var resolver proxy.Resolver = s.apps
	if !s.Simulated {
		resolver = nil // real pods: their Services by cluster DNS
	}
	gwMgr, err := gateway.NewManager(s.Config, gateway.Options{
		Listen: s.opts.Listen, MetricsAddr: "0", AuthMode: "static",
		StaticUsersFile: stateFiles.users, SessionKeysFile: stateFiles.keys, SessionTTL: 12 * time.Hour,
		InsecureCookies: true, AdminGroups: []string{AdminGroup}, ClusterDomain: "cluster.local",
		WakeTimeout: time.Minute, ActivityInterval: 30 * time.Second, Resolver: resolver,
		PublicURL: s.URL, BaseDomain: EnvironmentDomain,
		Limits: gateway.Limits{WebSocketsPerUser: 64, WaitingPerUser: 32},
	})
	if err != nil {
		return fmt.Errorf("creating the gateway: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.launch("controller", func() error { return ctrlMgr.Start(runCtx) })
	s.launch("gateway", func() error { return gwMgr.Start(runCtx) })

	s.logf("waiting for the webhooks and the gateway …")
	if err := s.waitServing(ctx); err != nil {
		return err
	}
	return nil
}

// installWebhooks applies the generated configuration pointed at this
// process; the controller injects its CA.
func (s *Stack) installWebhooks(ctx context.Context, port int) error {
	data, err := fs.ReadFile(config.Manifests, "webhook/manifests.yaml")
	if err != nil {
		return err
	}
	var cfg admissionregistrationv1.ValidatingWebhookConfiguration
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("parsing the webhook configuration: %w", err)
	}
	cfg.Name = WebhookConfigName
	cfg.SetGroupVersionKind(admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingWebhookConfiguration"))
	for i := range cfg.Webhooks {
		p := *cfg.Webhooks[i].ClientConfig.Service.Path
		cfg.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{
			URL: ptr.To(fmt.Sprintf("https://localhost:%d%s", port, p)),
		}
	}
	u, err := toUnstructured(&cfg)
	if err != nil {
		return err
	}
	return s.apply(ctx, u)
}

type gatewayFiles struct{ users, keys string }

// gatewayFiles writes the demo users (bcrypt) and, once, the session key,
// so sign-ins survive a restart.
func (s *Stack) gatewayFiles() (gatewayFiles, error) {
	files := gatewayFiles{users: filepath.Join(s.opts.StateDir, "users.yaml"), keys: filepath.Join(s.opts.StateDir, "session.keys")}
	if _, err := os.Stat(files.keys); err != nil {
		key := make([]byte, 64)
		if _, err := rand.Read(key); err != nil {
			return files, err
		}
		if err := os.WriteFile(files.keys, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
			return files, fmt.Errorf("writing the session key: %w", err)
		}
	}
	var users []auth.StaticUser
	for _, u := range DemoUsers {
		hash, err := bcrypt.GenerateFromPassword([]byte(DemoPassword), bcrypt.MinCost)
		if err != nil {
			return files, err
		}
		users = append(users, auth.StaticUser{Name: u.Name, Email: u.Email, Groups: u.Groups, PasswordHash: string(hash)})
	}
	data, err := yaml.Marshal(map[string]any{"users": users})
	if err != nil {
		return files, err
	}
	return files, os.WriteFile(files.users, data, 0o600)
}

// waitServing waits until the API server's calls to the webhooks succeed
// (a dry-run Template create) and the gateway is ready.
func (s *Stack) waitServing(ctx context.Context) error {
	probe := &v1alpha1.Template{
		ObjectMeta: metav1.ObjectMeta{Namespace: DemoNamespace, Name: "webhook-probe"},
		Spec: v1alpha1.TemplateSpec{
			PodTemplate: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.org/probe", Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}}},
			HTTP:        v1alpha1.HTTPSpec{Port: 8080},
		},
	}
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-s.exited:
			return false, fmt.Errorf("stopped while starting: %w", s.exitError())
		default:
		}
		if lastErr = s.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll); lastErr != nil {
			return false, nil
		}
		resp, err := http.Get(s.URL + "/readyz")
		if err != nil {
			lastErr = err
			return false, nil
		}
		_ = resp.Body.Close()
		lastErr = fmt.Errorf("gateway /readyz: %s", resp.Status)
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil && lastErr != nil {
		return fmt.Errorf("the webhooks and gateway did not come up: %w (last: %w)", err, lastErr)
	}
	if err != nil {
		return fmt.Errorf("the webhooks and gateway did not come up: %w", err)
	}
	return nil
}

// demo applies the sample templates and the demo users' environments.
func (s *Stack) demo(ctx context.Context) error {
	for _, f := range []string{"samples/template-vscode.yaml", "samples/template-jupyterlab.yaml", "samples/template-phpmyadmin.yaml", "samples/clustertemplate-vscode.yaml"} {
		objs, err := objectsIn(f)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if o.GetKind() == "Template" {
				o.SetNamespace(DemoNamespace)
			}
			if err := s.apply(ctx, o); err != nil {
				return err
			}
		}
	}
	for _, u := range DemoUsers {
		for _, t := range u.Templates {
			// The same name auto-provisioning would pick, so first
			// sign-in finds it instead of creating a second one.
			ul := &v1alpha1.Userland{
				ObjectMeta: metav1.ObjectMeta{Namespace: DemoNamespace, Name: naming.UserlandName(u.Name, string(v1alpha1.TemplateKindTemplate)+"/"+t)},
				Spec:       v1alpha1.UserlandSpec{User: u.Name, TemplateRef: v1alpha1.TemplateReference{Kind: v1alpha1.TemplateKindTemplate, Name: t}},
			}
			ul.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("Userland"))
			obj, err := toUnstructured(ul)
			if err != nil {
				return err
			}
			if err := s.apply(ctx, obj); err != nil {
				return err
			}
		}
	}
	return nil
}

// Banner is what `userland dev` prints once up.
func (s *Stack) Banner() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nUserland is running.\n\n  Dashboard:  %s\n  Kubeconfig: %s\n              (KUBECONFIG=%s kubectl get userlands -A)\n\n", s.URL, s.KubeconfigPath, s.KubeconfigPath)
	fmt.Fprintf(&b, "  Sign in as (password %q for everyone):\n", DemoPassword)
	for _, u := range DemoUsers {
		fmt.Fprintf(&b, "    %-8s %s\n", u.Name, u.Role)
	}
	if s.Simulated {
		b.WriteString("\n  Pods run on simulated (kwok) nodes: every environment opens a built-in demo app\n  showing whose it is, the identity headers it received and a WebSocket echo.\n")
	}
	b.WriteString("\nCtrl-C stops everything; state is kept in " + s.opts.StateDir + " (--reset wipes it).\n")
	return b.String()
}

// DemoApps are the simulated environments' apps (nil on a real cluster).
func (s *Stack) DemoApps() *DemoApps {
	if !s.Simulated {
		return nil
	}
	return s.apps
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
	if s.env != nil {
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
