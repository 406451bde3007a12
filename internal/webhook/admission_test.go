package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/simcluster"
	"github.com/userland-dev/userland/internal/testenv"
	"github.com/userland-dev/userland/internal/testobj"
	"github.com/userland-dev/userland/internal/webhook"
)

var env *testenv.Environment

// probeAddr serves the webhook manager's /readyz.
var probeAddr string

const (
	controllerNamespace = "userland-system"
	configName          = "userland-validating-webhook-configuration"
)

// TestMain starts an API server, registers the generated webhook
// configuration pointing at this process, and runs the controller with
// self-managed certificates: nothing is pre-provisioned, so every admission
// call that succeeds proves the certificate was created and trusted.
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.Options{Mode: testenv.APIOnly}, &env))
}

var startOnce sync.Once

// startWebhooks runs the controller's webhooks once for the package.
func startWebhooks(t *testing.T) {
	t.Helper()
	var startErr error
	startOnce.Do(func() { startErr = runController() })
	if startErr != nil {
		t.Fatal(startErr)
	}
	if err := waitForWebhooks(); err != nil {
		t.Fatal(err)
	}
}

func runController() error {
	ctx := context.Background()
	port, err := simcluster.FreePort()
	if err != nil {
		return err
	}
	probePort, err := simcluster.FreePort()
	if err != nil {
		return err
	}
	probeAddr = fmt.Sprintf("127.0.0.1:%d", probePort)
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: controllerNamespace}}); err != nil {
		return err
	}
	// The generated configuration, renamed and pointed at this process
	// (the API server reaches it as localhost), with no CA bundle.
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "webhook", "manifests.yaml"))
	if err != nil {
		return err
	}
	var cfg admissionregistrationv1.ValidatingWebhookConfiguration
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return err
	}
	cfg.Name = configName
	for i := range cfg.Webhooks {
		path := *cfg.Webhooks[i].ClientConfig.Service.Path
		cfg.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{
			URL: ptr.To(fmt.Sprintf("https://localhost:%d%s", port, path)),
		}
	}
	if err := env.Client.Create(ctx, &cfg); err != nil {
		return err
	}

	// Only the controller's generated ClusterRole: a missing RBAC marker
	// fails these tests.
	if err := env.CreateFromFile(ctx, filepath.Join(testenv.RepoRoot(), "config", "rbac", "role.yaml")); err != nil {
		return err
	}
	const identity = "userland-controller-under-test"
	if err := grantCertificateObjects(ctx, identity); err != nil {
		return err
	}
	restCfg, err := env.ConfigBoundTo(ctx, identity, "userland-controller")
	if err != nil {
		return err
	}
	opts := &webhook.Options{
		Host: "127.0.0.1", Port: port, CertDir: filepath.Join(env.Dir, "webhook-certs"),
		PodSecurityLevel: "baseline", SelfSignedCerts: true,
		CertSecret: types.NamespacedName{Namespace: controllerNamespace, Name: "userland-webhook-cert"},
		ConfigName: configName,
		DNSNames:   []string{"userland-webhook-service.userland-system.svc", "localhost"},
		// No kubelet mounts the Secret here.
		WriteCertsToDir: true,
		// The gateway as TestOnlyGrantersGrantBudget runs it.
		GrantRecorders: []string{"system:serviceaccount:userland-system:gateway-grant-under-test"},
	}
	// A plain manager with only the webhooks: what is served here is the
	// webhook package's, under the controller's RBAC role.
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme: v1alpha1.NewScheme(), WebhookServer: webhook.NewServer(opts),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: probeAddr,
	})
	if err != nil {
		return err
	}
	if err := webhook.Serve(mgr, opts, "userland-controller"); err != nil {
		return err
	}
	go func() {
		if err := mgr.Start(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	return nil
}

// grantCertificateObjects does what the chart does for the self-managed
// certificate (charts/userland/templates/rbac.yaml, webhook.yaml): ships
// the Secret empty and grants the controller its Secret and its webhook
// configuration by name, which no code marker can express.
func grantCertificateObjects(ctx context.Context, user string) error {
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	verbs := []string{"get", "list", "watch", "update"}
	objs := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNamespace, Name: "userland-webhook-cert"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNamespace, Name: "webhook-cert"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"userland-webhook-cert"}, Verbs: verbs}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNamespace, Name: "webhook-cert"},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "webhook-cert"}, Subjects: subjects},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "webhook-config-under-test"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{admissionregistrationv1.GroupName}, Resources: []string{"validatingwebhookconfigurations"}, ResourceNames: []string{configName}, Verbs: verbs}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "webhook-config-under-test"},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "webhook-config-under-test"}, Subjects: subjects},
	}
	for _, o := range objs {
		if err := env.Client.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

// waitForWebhooks waits until the API server successfully calls the
// webhook: the certificate exists, the server serves it and the CA bundle
// was injected.
func waitForWebhooks() error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		return err
	}
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		tmpl := compliant(ns.Name, "probe")
		tmpl.GenerateName, tmpl.Name = "probe-", ""
		last = env.Client.Create(ctx, tmpl, client.DryRunAll)
		return last == nil, nil
	})
	if err != nil {
		return errors.Join(fmt.Errorf("webhooks never became reachable: %w", err), last)
	}
	return nil
}

func compliant(ns, name string) *v1alpha1.Template {
	return testobj.MakeTemplate(ns, name).Obj()
}

func TestCertificateIsCreatedAndTrusted(t *testing.T) {
	t.Parallel()
	startWebhooks(t)
	var secret corev1.Secret
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: controllerNamespace, Name: "userland-webhook-cert"}, &secret); err != nil {
		t.Fatalf("certificate secret: %v", err)
	}
	for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if len(secret.Data[k]) == 0 {
			t.Errorf("secret has no %s", k)
		}
	}
	var cfg admissionregistrationv1.ValidatingWebhookConfiguration
	if err := env.Client.Get(context.Background(), types.NamespacedName{Name: configName}, &cfg); err != nil {
		t.Fatal(err)
	}
	for _, w := range cfg.Webhooks {
		if string(w.ClientConfig.CABundle) != string(secret.Data["ca.crt"]) {
			t.Errorf("webhook %s: CA bundle not injected", w.Name)
		}
		if *w.FailurePolicy != admissionregistrationv1.Fail || *w.TimeoutSeconds > 10 {
			t.Errorf("webhook %s: failurePolicy %s timeout %d, want Fail and a few seconds", w.Name, *w.FailurePolicy, *w.TimeoutSeconds)
		}
		for _, r := range w.Rules {
			if len(r.APIGroups) != 1 || r.APIGroups[0] != "userland.dev" {
				t.Errorf("webhook %s intercepts groups %v; only userland.dev is wanted", w.Name, r.APIGroups)
			}
		}
	}
}

func TestTemplatesViolatingPodSecurityAreRejected(t *testing.T) {
	t.Parallel()
	startWebhooks(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	if err := env.Client.Create(ctx, compliant(ns, "ok")); err != nil {
		t.Fatalf("compliant template rejected: %v", err)
	}

	bad := compliant(ns, "bad")
	bad.Spec.PodTemplate.Spec.HostNetwork = true
	bad.Spec.PodTemplate.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	err := env.Client.Create(ctx, bad)
	assertCauses(t, err, map[string]string{
		"spec.podTemplate.spec.hostNetwork":                              "host namespaces is not allowed by the baseline",
		"spec.podTemplate.spec.containers[0].securityContext.privileged": "privileged is not allowed by the baseline",
	})

	// The same check guards ClusterTemplates, and updates.
	ct := &v1alpha1.ClusterTemplate{ObjectMeta: metav1.ObjectMeta{Name: "ct-" + ns}, Spec: v1alpha1.ClusterTemplateSpec{TemplateSpec: bad.Spec}}
	assertCauses(t, env.Client.Create(ctx, ct), map[string]string{
		"spec.podTemplate.spec.hostNetwork": "host namespaces",
	})
	var ok v1alpha1.Template
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "ok"}, &ok); err != nil {
		t.Fatal(err)
	}
	// A merge patch carries no resourceVersion, so the controller's
	// concurrent status writes cannot turn this into a conflict.
	patch := client.MergeFrom(ok.DeepCopy())
	ok.Spec.PodTemplate.Spec.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
	assertCauses(t, env.Client.Patch(ctx, &ok, patch), map[string]string{"spec.podTemplate.spec.volumes": "hostPath volumes"})
}

// TestIdleActivityRulesAreChecked: the schema checks the paths; the
// webhook compiles the message expressions, naming the one that fails.
func TestIdleActivityRulesAreChecked(t *testing.T) {
	t.Parallel()
	startWebhooks(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	tmpl := compliant(ns, "jupyter")
	tmpl.Spec.Idle = &v1alpha1.IdleSpec{
		Timeout: metav1.Duration{Duration: 30 * time.Minute},
		Activity: &v1alpha1.ActivitySpec{
			IgnorePaths: []string{"/api/kernels"},
			WebSocket:   &v1alpha1.WebSocketActivitySpec{MinMessageBytes: 14, IgnoreMessages: []string{`^\x09`, `ping(`}},
		},
	}
	assertCauses(t, env.Client.Create(ctx, tmpl), map[string]string{
		"spec.idle.activity.webSocket.ignoreMessages[1]": "missing closing )",
	})
	ct := &v1alpha1.ClusterTemplate{ObjectMeta: metav1.ObjectMeta{Name: "ct-" + ns}, Spec: v1alpha1.ClusterTemplateSpec{TemplateSpec: tmpl.Spec}}
	assertCauses(t, env.Client.Create(ctx, ct), map[string]string{
		"spec.idle.activity.webSocket.ignoreMessages[1]": "missing closing )",
	})
	tmpl.Spec.Idle.Activity.IgnorePaths = []string{"api/kernels"}
	assertCauses(t, env.Client.Create(ctx, tmpl), map[string]string{
		"spec.idle.activity.ignorePaths[0]": "should match '^/'",
	})
	tmpl.Spec.Idle.Activity.IgnorePaths = []string{"/api/kernels"}
	tmpl.Spec.Idle.Activity.WebSocket.IgnoreMessages = []string{`^\x09`}
	if err := env.Client.Create(ctx, tmpl); err != nil {
		t.Fatalf("valid rules rejected: %v", err)
	}
}

func assertCauses(t *testing.T, err error, want map[string]string) {
	t.Helper()
	var status apierrors.APIStatus
	if err == nil || !errors.As(err, &status) {
		t.Fatalf("got %v, want a rejection", err)
	}
	got := map[string]string{}
	for _, c := range status.Status().Details.Causes {
		got[c.Field] = c.Message
	}
	for f, fragment := range want {
		if !strings.Contains(got[f], fragment) {
			t.Errorf("cause at %s = %q, want it to mention %q (all: %v)", f, got[f], fragment, got)
		}
	}
}

type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func TestMissingTemplateIsAWarningNotADenial(t *testing.T) {
	t.Parallel()
	startWebhooks(t)
	ns := env.Namespace(t)
	w := &warnings{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandlerWithContext = w
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ul := &v1alpha1.Userland{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "early"},
		Spec:       v1alpha1.UserlandSpec{User: "alice", TemplateRef: v1alpha1.TemplateReference{Name: "not-yet"}},
	}
	if err := c.Create(context.Background(), ul); err != nil {
		t.Fatalf("a Userland for a missing template was denied: %v", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.list) != 1 || !strings.Contains(w.list[0], `Template "not-yet" does not exist in namespace `+ns) {
		t.Errorf("warnings %q, want one about the missing template", w.list)
	}
}

func TestClusterTemplateAllowedNamespaces(t *testing.T) {
	t.Parallel()
	startWebhooks(t)
	ctx := context.Background()
	allowed, denied := env.Namespace(t), env.Namespace(t)
	var ns corev1.Namespace
	if err := env.Client.Get(ctx, types.NamespacedName{Name: allowed}, &ns); err != nil {
		t.Fatal(err)
	}
	ns.Labels["course"] = "databases"
	if err := env.Client.Update(ctx, &ns); err != nil {
		t.Fatal(err)
	}
	ct := &v1alpha1.ClusterTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "db-" + allowed},
		Spec: v1alpha1.ClusterTemplateSpec{
			TemplateSpec:      compliant("", "").Spec,
			AllowedNamespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"course": "databases"}},
		},
	}
	if err := env.Client.Create(ctx, ct); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, ct) })
	ref := v1alpha1.TemplateReference{Kind: v1alpha1.TemplateKindClusterTemplate, Name: ct.Name}

	ok := &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: allowed, Name: "u"}, Spec: v1alpha1.UserlandSpec{User: "alice", TemplateRef: ref}}
	if err := env.Client.Create(ctx, ok); err != nil {
		t.Fatalf("allowed namespace denied: %v", err)
	}
	no := &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: denied, Name: "u"}, Spec: v1alpha1.UserlandSpec{User: "alice", TemplateRef: ref}}
	assertCauses(t, env.Client.Create(ctx, no), map[string]string{
		"spec.templateRef.name": fmt.Sprintf("does not allow namespace %q", denied),
	})
}

func TestUserManagersCannotChangeWhatRuns(t *testing.T) {
	t.Parallel()
	startWebhooks(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	if err := env.CreateFromFile(ctx, filepath.Join(testenv.RepoRoot(), "config", "rbac", "roles.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, compliant(ns, "vscode")); err != nil {
		t.Fatal(err)
	}
	const ta = "ta@uni.example.ac.jp"
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ta"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "userland-user-manager"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: ta}},
	}
	if err := env.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.ConfigFor(ta), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}

	ul := &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "student"},
		Spec: v1alpha1.UserlandSpec{User: "student@uni.example.ac.jp", TemplateRef: v1alpha1.TemplateReference{Name: "vscode"}}}
	if err := c.Create(ctx, ul); err != nil {
		t.Fatalf("user manager cannot create a Userland: %v", err)
	}
	if err := c.Delete(ctx, ul); err != nil {
		t.Fatalf("user manager cannot delete a Userland: %v", err)
	}

	var tmpl v1alpha1.Template
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "vscode"}, &tmpl); err != nil {
		t.Fatalf("user manager cannot read templates: %v", err)
	}
	tmpl.Spec.PodTemplate.Spec.Containers[0].Image = "evil.example/miner:1"
	if err := c.Update(ctx, &tmpl); !apierrors.IsForbidden(err) {
		t.Errorf("updating a Template: %v, want Forbidden", err)
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "x"}, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "x"}}}},
	}}
	if err := c.Create(ctx, dep); !apierrors.IsForbidden(err) {
		t.Errorf("creating a Deployment: %v, want Forbidden", err)
	}
	if err := c.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)); !apierrors.IsForbidden(err) {
		t.Errorf("listing Secrets: %v, want Forbidden", err)
	}
}

// templateAuthor binds user to userland-template-author in ns and returns a
// client that acts as them.
func templateAuthor(t *testing.T, ns, user string) client.Client {
	t.Helper()
	ctx := context.Background()
	if err := env.CreateFromFile(ctx, filepath.Join(testenv.RepoRoot(), "config", "rbac", "roles.yaml")); err != nil {
		t.Fatal(err)
	}
	name := "author-" + strings.NewReplacer("@", "-", ".", "-").Replace(user)
	grant(t, ns, name, "ClusterRole", "userland-template-author", user)
	c, err := client.New(env.ConfigFor(user), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	waitAuthorized(t, c, &v1alpha1.TemplateList{}, client.InNamespace(ns))
	return c
}

// waitAuthorized waits until c may list: RBAC authorizes from its own
// informers, so a binding just made takes a moment to count, and a
// refusal must be the webhook's, not RBAC's.
func waitAuthorized(t *testing.T, c client.Client, list client.ObjectList, opts ...client.ListOption) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		last = c.List(ctx, list, opts...)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("the template author's binding never counted: %v", last)
	}
}

// grant binds user to a role in ns ("": a ClusterRoleBinding) and removes
// cluster-wide bindings when the test ends.
func grant(t *testing.T, ns, name, roleKind, role, user string) {
	t.Helper()
	ctx := context.Background()
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: roleKind, Name: role}
	var obj client.Object = &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, RoleRef: ref, Subjects: subjects}
	if ns == "" {
		obj = &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: ref, Subjects: subjects}
		t.Cleanup(func() { _ = env.Client.Delete(ctx, obj) })
	}
	if err := env.Client.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
}

// secretsAndServiceAccount is a role (a ClusterRole when ns is "") that
// grants get on the Secrets and use on the ServiceAccount, by name: what a
// template author needs to name them.
func secretsAndServiceAccount(t *testing.T, ns, name, serviceAccount string, secrets ...string) {
	t.Helper()
	ctx := context.Background()
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: secrets},
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{v1alpha1.VerbUse}, ResourceNames: []string{serviceAccount}},
	}
	var obj client.Object = &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}
	if ns == "" {
		obj = &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
		t.Cleanup(func() { _ = env.Client.Delete(ctx, obj) })
	}
	if err := env.Client.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
}

// withSecretsAndServiceAccount names a ServiceAccount and Secrets in a
// secret volume (after a harmless one) and an init container's variable.
func withSecretsAndServiceAccount(tmpl *v1alpha1.TemplateSpec) {
	pod := &tmpl.PodTemplate.Spec
	pod.ServiceAccountName = "builder"
	pod.Volumes = []corev1.Volume{
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "db", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db-pass"}}},
	}
	pod.InitContainers = []corev1.Container{{Name: "init", Image: "example.org/init:1", Env: []corev1.EnvVar{{Name: "TOKEN",
		ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "init-token"}, Key: "t"}}}}}}
}

// admittedEventually retries create: RBAC authorizes from its own
// informers, so a binding just made takes a moment to count.
func admittedEventually(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := c.Create(ctx, obj.DeepCopyObject().(client.Object))
		if ctx.Err() == nil {
			last = err // not the poll's own deadline
		}
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("not admitted once granted: %v", last)
	}
}

// TestTemplateAuthorsNeedTheSecretsAndServiceAccountsTheyName: the
// controller mounts what a template names, so a template author must be
// allowed to get each Secret and use each ServiceAccount themselves.
func TestTemplateAuthorsNeedTheSecretsAndServiceAccountsTheyName(t *testing.T) {
	t.Parallel()
	startWebhooks(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	const author, other = "author@uni.example.ac.jp", "other@uni.example.ac.jp"
	c := templateAuthor(t, ns, author)

	tmpl := compliant(ns, "db")
	withSecretsAndServiceAccount(&tmpl.Spec)
	in := " in namespace " + ns
	assertCauses(t, c.Create(ctx, tmpl), map[string]string{
		"spec.podTemplate.spec.serviceAccountName":                                   author + " may not use serviceaccounts builder" + in,
		"spec.podTemplate.spec.volumes[1].secret.secretName":                         author + " may not get secrets db-pass" + in,
		"spec.podTemplate.spec.initContainers[0].env[0].valueFrom.secretKeyRef.name": author + " may not get secrets init-token" + in,
	})

	secretsAndServiceAccount(t, ns, "db-access", "builder", "db-pass", "init-token")
	grant(t, ns, "author-db-access", "Role", "db-access", author)
	admittedEventually(t, c, tmpl)

	// A namespace editor may get the namespace's Secrets and impersonate
	// its ServiceAccounts, which is more than use. Kubernetes' edit role
	// grants both, aggregated by kube-controller-manager, which this
	// API-only server does not run: the rules are spelled out here.
	const editor = "editor@uni.example.ac.jp"
	ec := templateAuthor(t, ns, editor)
	if err := env.Client.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "editor"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"impersonate"}},
	}}); err != nil {
		t.Fatal(err)
	}
	grant(t, ns, "editor", "Role", "editor", editor)
	byEditor := tmpl.DeepCopy()
	byEditor.Name, byEditor.ResourceVersion = "db-editor", ""
	admittedEventually(t, ec, byEditor)

	// Someone who may write templates but not read the Secrets: an update
	// that leaves the pod template alone (a GitOps re-apply, a new idle
	// timeout) is admitted; one that changes what runs next to the
	// Secrets (a new image) is asked about every reference again.
	oc := templateAuthor(t, ns, other)
	var current v1alpha1.Template
	if err := oc.Get(ctx, client.ObjectKeyFromObject(tmpl), &current); err != nil {
		t.Fatal(err)
	}
	if err := oc.Update(ctx, &current); err != nil {
		t.Fatalf("re-applying the same template was refused: %v", err)
	}
	current.Spec.DisplayName = "Databases"
	current.Spec.Idle = &v1alpha1.IdleSpec{Timeout: metav1.Duration{Duration: time.Hour}}
	if err := oc.Update(ctx, &current); err != nil {
		t.Fatalf("an update outside the pod template was refused: %v", err)
	}
	current.Spec.PodTemplate.Spec.Containers[0].Image = "example.org/code:2"
	err := oc.Update(ctx, &current)
	assertCauses(t, err, map[string]string{
		"spec.podTemplate.spec.serviceAccountName":           other + " may not use serviceaccounts builder" + in,
		"spec.podTemplate.spec.volumes[1].secret.secretName": other + " may not get secrets db-pass" + in,
	})
	var status apierrors.APIStatus
	if errors.As(err, &status) && len(status.Status().Details.Causes) != 3 {
		t.Errorf("causes %v, want the three references", status.Status().Details.Causes)
	}
}

// TestClusterTemplateReferencesAreCheckedClusterWide: a ClusterTemplate
// runs in every namespace it allows, so its author needs the Secrets and
// the ServiceAccount cluster-wide; a grant in one namespace is not enough.
func TestClusterTemplateReferencesAreCheckedClusterWide(t *testing.T) {
	t.Parallel()
	startWebhooks(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	author := "cluster-author-" + ns
	if err := env.CreateFromFile(ctx, filepath.Join(testenv.RepoRoot(), "config", "rbac", "roles.yaml")); err != nil {
		t.Fatal(err)
	}
	grant(t, "", author, "ClusterRole", "userland-template-author", author)
	secretsAndServiceAccount(t, ns, "db-access", "builder", "db-pass", "init-token")
	grant(t, ns, "db-access", "Role", "db-access", author)
	c, err := client.New(env.ConfigFor(author), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}

	ct := &v1alpha1.ClusterTemplate{ObjectMeta: metav1.ObjectMeta{Name: "ct-" + ns}, Spec: v1alpha1.ClusterTemplateSpec{TemplateSpec: compliant("", "").Spec}}
	withSecretsAndServiceAccount(&ct.Spec.TemplateSpec)
	t.Cleanup(func() { _ = env.Client.Delete(ctx, ct) })
	waitAuthorized(t, c, &v1alpha1.ClusterTemplateList{})
	last := c.Create(ctx, ct)
	assertCauses(t, last, map[string]string{
		"spec.podTemplate.spec.serviceAccountName":           author + " may not use serviceaccounts builder cluster-wide",
		"spec.podTemplate.spec.volumes[1].secret.secretName": author + " may not get secrets db-pass cluster-wide",
	})

	secretsAndServiceAccount(t, "", "db-access-"+ns, "builder", "db-pass", "init-token")
	grant(t, "", "db-access-"+ns, "ClusterRole", "db-access-"+ns, author)
	admittedEventually(t, c, ct)
}
