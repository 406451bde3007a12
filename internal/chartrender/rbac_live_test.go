package chartrender

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/access"
	"github.com/userland-dev/userland/internal/controller"
	"github.com/userland-dev/userland/internal/simcluster"
	"github.com/userland-dev/userland/internal/testobj"
	"github.com/userland-dev/userland/internal/webhook"
)

// The chart's service accounts for release "userland" in namespace, as the
// API server names them.
const (
	controllerSA = "system:serviceaccount:" + namespace + ":userland-controller"
	gatewaySA    = "system:serviceaccount:" + namespace + ":userland-gateway"
	certSecret   = "userland-webhook-cert"
	configName   = "userland" // the chart's ValidatingWebhookConfiguration
)

// installChartRBAC applies, for real, the ServiceAccounts, roles,
// bindings and the webhook certificate Secret the chart renders with its
// default values: the identities under test hold exactly what a cluster
// installed from the chart would give them.
func installChartRBAC(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	manifest, err := Render(chartDir(), "userland", namespace, documented["default"])
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objects(t, manifest) {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Secret":
			//nolint:staticcheck // server-side apply of unstructured objects
			if err := env.Client.Patch(ctx, o, client.Apply, client.FieldOwner("rbac-test"), client.ForceOwnership); err != nil {
				t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
			}
		}
	}
}

// harmlessWebhookConfig is a configuration whose one webhook matches a
// resource nothing serves, so it never affects other tests.
func harmlessWebhookConfig(name string) *admissionregistrationv1.ValidatingWebhookConfiguration {
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "nothing.rbac-test.example",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/nothing")},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{"rbac-test.example"}, APIVersions: []string{"v1"}, Resources: []string{"nothings"}}}},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
		}},
	}
}

func createIgnoringExisting(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(context.Background(), obj); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func clientAs(t *testing.T, user string) client.Client {
	t.Helper()
	c, err := client.New(env.ConfigFor(user), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestServiceAccountsAreDeniedWhatTheyDoNotUse tries, as an attacker who
// took over a pod would, real requests with each shipped identity against
// the API server running RBAC, and checks that each shipped identity can
// still do what it uses (so a denial is RBAC's, not a broken request).
func TestServiceAccountsAreDeniedWhatTheyDoNotUse(t *testing.T) {
	ctx := context.Background()
	installChartRBAC(t)
	createIgnoringExisting(t, harmlessWebhookConfig(configName))
	createIgnoringExisting(t, harmlessWebhookConfig("someone-elses-webhook"))
	createIgnoringExisting(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "cloud-credentials"}})
	createIgnoringExisting(t, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-controller-manager"}})
	createIgnoringExisting(t, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: controller.LeaderElectionID}})
	// The gateway's OIDC client secret lives beside the certificate.
	createIgnoringExisting(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "userland-oidc"}})

	ns := env.Namespace(t)
	createIgnoringExisting(t, testobj.MakeTemplate(ns, "lab").Obj())
	createIgnoringExisting(t, testobj.MakeCourse(ns, "db").Students("a@uni.example").Template("lab", v1alpha1.ProvisionUpFront).Obj())
	createIgnoringExisting(t, testobj.MakeUserland(ns, "someone", "someone@uni.example", "lab").Obj())
	const instructor = "prof@uni.example"
	createIgnoringExisting(t, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prof"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "userland-course-manager"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: instructor}},
	})

	suspend := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"suspend":true}}`))
	userland := func() *v1alpha1.Userland {
		return &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "someone"}}
	}
	updateConfig := func(name string) func(context.Context, client.Client) error {
		return func(ctx context.Context, c client.Client) error {
			var cfg admissionregistrationv1.ValidatingWebhookConfiguration
			if err := env.Client.Get(ctx, types.NamespacedName{Name: name}, &cfg); err != nil {
				return err
			}
			cfg.Webhooks[0].ClientConfig.CABundle = []byte("attacker's CA")
			return c.Update(ctx, &cfg)
		}
	}
	tests := map[string]struct {
		as      string
		do      func(context.Context, client.Client) error
		allowed bool
	}{
		"controller lists secrets in kube-system": {as: controllerSA, do: func(ctx context.Context, c client.Client) error {
			return c.List(ctx, &corev1.SecretList{}, client.InNamespace("kube-system"))
		}},
		"controller lists secrets in its own namespace": {as: controllerSA, do: func(ctx context.Context, c client.Client) error {
			return c.List(ctx, &corev1.SecretList{}, client.InNamespace(namespace))
		}},
		"controller reads the gateway's secret": {as: controllerSA, do: func(ctx context.Context, c client.Client) error {
			return c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: "userland-oidc"}, &corev1.Secret{})
		}},
		"controller creates a secret": {as: controllerSA, do: func(ctx context.Context, c client.Client) error {
			return c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: "x-"}})
		}},
		"controller reads its webhook certificate": {as: controllerSA, allowed: true, do: func(ctx context.Context, c client.Client) error {
			return c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: certSecret}, &corev1.Secret{})
		}},
		"controller lists its webhook certificate by name": {as: controllerSA, allowed: true, do: func(ctx context.Context, c client.Client) error {
			return c.List(ctx, &corev1.SecretList{}, client.InNamespace(namespace), client.MatchingFields{"metadata.name": certSecret})
		}},
		"controller updates an unrelated webhook configuration": {as: controllerSA, do: updateConfig("someone-elses-webhook")},
		"controller lists every webhook configuration": {as: controllerSA, do: func(ctx context.Context, c client.Client) error {
			return c.List(ctx, &admissionregistrationv1.ValidatingWebhookConfigurationList{})
		}},
		"controller updates its own webhook configuration": {as: controllerSA, allowed: true, do: updateConfig(configName)},
		"controller takes another component's lease": {as: controllerSA, do: func(ctx context.Context, c client.Client) error {
			return c.Get(ctx, types.NamespacedName{Namespace: "kube-system", Name: "kube-controller-manager"}, &coordinationv1.Lease{})
		}},
		"controller renews its own lease": {as: controllerSA, allowed: true, do: func(ctx context.Context, c client.Client) error {
			var l coordinationv1.Lease
			if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: controller.LeaderElectionID}, &l); err != nil {
				return err
			}
			return c.Update(ctx, &l)
		}},
		"controller lists Userlands everywhere": {as: controllerSA, allowed: true, do: func(ctx context.Context, c client.Client) error {
			return c.List(ctx, &v1alpha1.UserlandList{})
		}},
		"controller deletes a placeholder pod": {as: controllerSA, allowed: true, do: func(ctx context.Context, c client.Client) error {
			return client.IgnoreNotFound(c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-placeholder-0"}}, client.DryRunAll))
		}},
		"controller deletes an image puller": {as: controllerSA, allowed: true, do: func(ctx context.Context, c client.Client) error {
			return client.IgnoreNotFound(c.Delete(ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-images-0"}}, client.DryRunAll))
		}},
		"controller evicts a pod": {as: controllerSA, do: func(ctx context.Context, c client.Client) error {
			return c.SubResource("eviction").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-placeholder-0"}}, &policyv1.Eviction{})
		}},
		"controller updates a pod": {as: controllerSA, do: func(ctx context.Context, c client.Client) error {
			return c.Update(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-placeholder-0"}})
		}},
		"gateway lists secrets": {as: gatewaySA, do: func(ctx context.Context, c client.Client) error {
			return c.List(ctx, &corev1.SecretList{})
		}},
		"gateway reads a secret of its own namespace": {as: gatewaySA, do: func(ctx context.Context, c client.Client) error {
			return c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: "userland-oidc"}, &corev1.Secret{})
		}},
		"gateway deletes a Userland": {as: gatewaySA, do: func(ctx context.Context, c client.Client) error {
			return c.Delete(ctx, userland(), client.DryRunAll)
		}},
		"gateway patches a Userland": {as: gatewaySA, allowed: true, do: func(ctx context.Context, c client.Client) error {
			return c.Patch(ctx, userland(), suspend, client.DryRunAll)
		}},
		"course manager patches a Userland": {as: instructor, do: func(ctx context.Context, c client.Client) error {
			return c.Patch(ctx, userland(), suspend)
		}},
		"course manager deletes a Userland": {as: instructor, do: func(ctx context.Context, c client.Client) error {
			return c.Delete(ctx, userland())
		}},
		"course manager patches their Course": {as: instructor, allowed: true, do: func(ctx context.Context, c client.Client) error {
			return c.Patch(ctx, &v1alpha1.Course{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}},
				client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"checked":"yes"}}}`)))
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := clientAs(t, tc.as)
			if !tc.allowed {
				if err := tc.do(ctx, c); !apierrors.IsForbidden(err) {
					t.Errorf("as %s: %v, want Forbidden", tc.as, err)
				}
				return
			}
			// RBAC authorizes from its own informers: a binding just
			// applied may take a moment to count (a delay only denies
			// more, so denials above need no wait).
			var last error
			if wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				last = tc.do(ctx, c)
				return last == nil, nil
			}) != nil {
				t.Errorf("as %s: %v, want allowed", tc.as, last)
			}
		})
	}
}

// TestOnlyTheControllerAndGatewayMayEnroll asks the API server, as the
// enrollment webhook does, who may link a Userland to a course.
func TestOnlyTheControllerAndGatewayMayEnroll(t *testing.T) {
	ctx := context.Background()
	installChartRBAC(t)
	ns := env.Namespace(t)
	for user, role := range map[string]string{"prof@uni.example": "userland-course-manager", "ta@uni.example": "userland-user-manager", "author@uni.example": "userland-template-author"} {
		createIgnoringExisting(t, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		})
	}
	enroll := access.Action{Verb: v1alpha1.VerbEnroll, Group: v1alpha1.GroupVersion.Group, Resource: "courses", Namespace: ns, Name: "db"}
	want := map[string]bool{controllerSA: true, gatewaySA: true, "prof@uni.example": false, "ta@uni.example": false, "author@uni.example": false}
	got := map[string]bool{}
	// Asked again until the answers settle: RBAC counts bindings just
	// applied a moment later.
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		for user := range want {
			ok, err := access.Reviewer{Client: env.Client}.Allowed(ctx, access.Subject{User: user, Groups: []string{"system:authenticated"}}, enroll)
			if err != nil {
				return false, err
			}
			got[user] = ok
		}
		return cmp.Equal(want, got), nil
	})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("who may enroll (-want +got):\n%s", diff)
	}
}

// TestCertificateRotationWorksUnderTheChartsRBAC runs the webhook server's
// certificate rotation as the controller's ServiceAccount with only the
// chart's RBAC: its informers must be scoped to the Secret's and the
// configuration's names for the name-limited grants to suffice.
func TestCertificateRotationWorksUnderTheChartsRBAC(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	installChartRBAC(t)
	createIgnoringExisting(t, harmlessWebhookConfig(configName))
	port, err := simcluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	opts := &webhook.Options{
		Host: "127.0.0.1", Port: port, CertDir: filepath.Join(t.TempDir(), "certs"),
		PodSecurityLevel: "baseline", SelfSignedCerts: true,
		CertSecret:      types.NamespacedName{Namespace: namespace, Name: certSecret},
		ConfigName:      configName,
		DNSNames:        []string{"userland-webhook." + namespace + ".svc", "localhost"},
		WriteCertsToDir: true,
	}
	mgr, err := ctrl.NewManager(env.ConfigFor(controllerSA), ctrl.Options{
		Scheme: v1alpha1.NewScheme(), WebhookServer: webhook.NewServer(opts),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := webhook.Serve(mgr, opts, "userland-controller"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		// Bounded: cert-controller's rotator reads its cache with a
		// context of its own (context.Background), so a read still
		// waiting for the cache when the test ends can hold the
		// manager's shutdown. What this test asserts is the issued and
		// injected certificate, not the shutdown.
		cancel()
		start := time.Now()
		select {
		case err := <-done:
			if err != nil {
				t.Logf("the manager stopped with: %v", err)
			}
		case <-time.After(time.Minute):
			t.Logf("the manager had not stopped %s after the test; left running until the package ends", time.Since(start).Round(time.Second))
		}
	})

	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var secret corev1.Secret
		var cfg admissionregistrationv1.ValidatingWebhookConfiguration
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: certSecret}, &secret); err != nil {
			return false, err
		}
		if err := env.Client.Get(ctx, types.NamespacedName{Name: configName}, &cfg); err != nil {
			return false, err
		}
		ca := secret.Data["ca.crt"]
		return len(ca) > 0 && string(cfg.Webhooks[0].ClientConfig.CABundle) == string(ca), nil
	})
	if err != nil {
		select {
		case err := <-done:
			t.Fatalf("the manager stopped: %v", err)
		default:
		}
		t.Fatalf("the certificate was not issued and injected under the chart's RBAC: %v", err)
	}
}
