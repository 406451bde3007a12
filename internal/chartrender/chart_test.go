package chartrender

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/userland-dev/userland/internal/apilimits"
	"github.com/userland-dev/userland/internal/testenv"
)

var env *testenv.Environment

// TestMain runs a real API server with Userland's CRDs (from the chart's
// crds/ folder, which make verify keeps identical to config/crd/bases)
// plus stand-ins for cert-manager's and the Prometheus Operator's.
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.Options{
		Mode:              testenv.APIOnly,
		CRDDirectoryPaths: []string{filepath.Join(chartDir(), "crds")},
	}, &env))
}

func chartDir() string { return filepath.Join(testenv.RepoRoot(), "charts", "userland") }

const namespace = "userland-system"

// documented are the values combinations docs/install.md documents.
var documented = map[string]map[string]any{
	"default": {"url": "https://userland.example.edu"},
	"cert-manager": {
		"url":     "https://userland.example.edu",
		"webhook": map[string]any{"certificates": "cert-manager"},
	},
	"oidc": {
		"url": "https://userland.example.edu",
		"gateway": map[string]any{
			"adminGroups": []any{"platform-admins"},
			"auth": map[string]any{"mode": "oidc", "oidc": map[string]any{
				"issuer": "https://dex.example.edu/dex", "clientID": "userland", "existingSecret": "userland-oidc",
				"allowedEmailDomains": []any{"uni.example.ac.jp"},
			}},
		},
	},
	"github": {
		"url": "https://userland.example.edu",
		"gateway": map[string]any{"auth": map[string]any{"mode": "github", "github": map[string]any{
			"clientID": "Iv1.0123", "existingSecret": "userland-github", "orgs": []any{"example-uni"}, "teams": []any{"example-uni/staff"},
		}}},
	},
	"trusted header": {
		"url": "https://userland.example.edu",
		"gateway": map[string]any{"auth": map[string]any{"mode": "header", "header": map[string]any{
			"trustedProxies": []any{"10.0.0.0/8"}, "userHeader": "X-Auth-Request-User",
			"proxySecret": map[string]any{"existingSecret": "userland-proxy-secret"},
		}}, "networkPolicy": map[string]any{"ingressFrom": []any{map[string]any{
			"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "oauth2-proxy"}},
			"podSelector":       map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "oauth2-proxy"}},
		}}}},
	},
	"extra environment": {
		"url":        "https://userland.example.edu",
		"controller": map[string]any{"extraEnv": []any{map[string]any{"name": "GOMEMLIMIT", "value": "400MiB"}}},
		"gateway":    map[string]any{"extraEnv": []any{map[string]any{"name": "GOGC", "value": "200"}}},
	},
	"ingress with TLS, autoscaling, monitoring and samples": {
		"url": "https://userland.example.edu",
		"gateway": map[string]any{
			"baseDomain":  "u.example.edu",
			"ingress":     map[string]any{"enabled": true, "className": "nginx", "annotations": map[string]any{"cert-manager.io/cluster-issuer": "letsencrypt"}},
			"autoscaling": map[string]any{"enabled": true, "maxReplicas": 6},
		},
		"controller": map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true}}},
		"samples":    map[string]any{"enabled": true},
	},
}

func objects(t *testing.T, manifest string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(manifest, "\n---") {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatalf("rendered YAML does not parse: %v\n%s", err, doc)
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
	return out
}

func find(objs []*unstructured.Unstructured, kind, nameSuffix string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && strings.HasSuffix(o.GetName(), nameSuffix) {
			return o
		}
	}
	return nil
}

func containerOf(t *testing.T, dep *unstructured.Unstructured) map[string]any {
	t.Helper()
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	if len(containers) != 1 {
		t.Fatalf("%s has %d containers", dep.GetName(), len(containers))
	}
	return containers[0].(map[string]any)
}

func args(t *testing.T, dep *unstructured.Unstructured) string {
	t.Helper()
	a, _, _ := unstructured.NestedStringSlice(containerOf(t, dep), "args")
	return strings.Join(a, " ")
}

// TestChartRendersAndTheAPIServerAcceptsIt renders every documented values
// combination with Helm's SDK, lints it, applies CRDs and RBAC for real and
// every other object with a server-side dry run.
func TestChartRendersAndTheAPIServerAcceptsIt(t *testing.T) {
	ctx := context.Background()
	if err := env.CreateFromFile(ctx, "testdata/third-party-crds.yaml"); err != nil {
		t.Fatal(err)
	}
	for _, gk := range []schema.GroupKind{{Group: "cert-manager.io", Kind: "Certificate"}, {Group: "cert-manager.io", Kind: "Issuer"}, {Group: "monitoring.coreos.com", Kind: "ServiceMonitor"}} {
		waitEstablished(t, gk)
	}
	// Another test of the package may have made it (installChartRBAC).
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for name, values := range documented {
		t.Run(name, func(t *testing.T) {
			if msgs := Lint(chartDir(), values); len(msgs) > 0 {
				t.Errorf("helm lint:\n%s", strings.Join(msgs, "\n"))
			}
			manifest, err := Render(chartDir(), "userland", namespace, values)
			if err != nil {
				t.Fatalf("rendering: %v", err)
			}
			objs := objects(t, manifest)
			for _, o := range objs {
				opts := []client.PatchOption{client.FieldOwner("chart-test"), client.ForceOwnership}
				switch o.GetKind() {
				case "ClusterRole", "ClusterRoleBinding":
					// RBAC for real: the API server checks escalation.
				default:
					opts = append(opts, client.DryRunAll)
				}
				//nolint:staticcheck // server-side apply of unstructured objects
				if err := env.Client.Patch(ctx, o, client.Apply, opts...); err != nil {
					t.Errorf("%s %s: %v", o.GetKind(), o.GetName(), err)
				}
			}
			checkHardening(t, objs)
			checkCase(t, name, objs)
		})
	}
}

func waitEstablished(t *testing.T, gk schema.GroupKind) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := env.Client.RESTMapper().RESTMapping(gk)
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("CRD for %s never served", gk)
	}
}

// checkHardening: both components run non-root, read-only, without
// privilege escalation or capabilities, with probes and requests.
func checkHardening(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, suffix := range []string{"-controller", "-gateway"} {
		dep := find(objs, "Deployment", suffix)
		if dep == nil {
			t.Fatalf("no %s Deployment", suffix)
		}
		c := containerOf(t, dep)
		sc, _, _ := unstructured.NestedMap(c, "securityContext")
		drop, _, _ := unstructured.NestedStringSlice(sc, "capabilities", "drop")
		seccomp, _, _ := unstructured.NestedString(sc, "seccompProfile", "type")
		if sc["runAsNonRoot"] != true || sc["readOnlyRootFilesystem"] != true || sc["allowPrivilegeEscalation"] != false ||
			len(drop) != 1 || drop[0] != "ALL" || seccomp != "RuntimeDefault" {
			t.Errorf("%s securityContext %v", dep.GetName(), sc)
		}
		for _, probe := range []string{"livenessProbe", "readinessProbe"} {
			if _, ok := c[probe]; !ok {
				t.Errorf("%s has no %s", dep.GetName(), probe)
			}
		}
		if _, ok, _ := unstructured.NestedMap(c, "resources", "requests"); !ok {
			t.Errorf("%s has no resource requests", dep.GetName())
		}
	}
	if find(objs, "PodDisruptionBudget", "-controller") == nil {
		t.Error("no controller PodDisruptionBudget")
	}
	if n, _, _ := unstructured.NestedInt64(find(objs, "Deployment", "-controller").Object, "spec", "replicas"); n != 2 {
		t.Errorf("controller replicas %d, want 2 with leader election", n)
	}
}

func checkCase(t *testing.T, name string, objs []*unstructured.Unstructured) {
	t.Helper()
	controllerArgs, gatewayArgs := args(t, find(objs, "Deployment", "-controller")), args(t, find(objs, "Deployment", "-gateway"))
	webhook := find(objs, "ValidatingWebhookConfiguration", "")
	switch name {
	case "default":
		np := find(objs, "NetworkPolicy", "-gateway")
		if np == nil {
			t.Fatal("no NetworkPolicy for the gateway")
		}
		ingress, _, _ := unstructured.NestedSlice(np.Object, "spec", "ingress")
		if got := fmt.Sprint(ingress); len(ingress) != 2 || !strings.Contains(got, "ingress-nginx") || !strings.Contains(got, "monitoring") {
			t.Errorf("gateway network policy admits %s, want ingress-nginx on http and monitoring on metrics", got)
		}
		if !strings.Contains(controllerArgs, "--webhook-cert-mode=self") || webhook.GetAnnotations()["cert-manager.io/inject-ca-from"] != "" {
			t.Errorf("self-managed certificates expected: %s", controllerArgs)
		}
		if !strings.Contains(gatewayArgs, "--auth-mode=static") {
			t.Errorf("gateway args %s", gatewayArgs)
		}
		// The chart installs the binaries' own defaults, which `make
		// bench` measures: the two must not drift apart.
		for got, want := range map[string][]string{
			controllerArgs: {fmt.Sprintf("--kube-api-qps=%v ", apilimits.ControllerQPS), fmt.Sprintf("--kube-api-burst=%v ", apilimits.ControllerBurst)},
			gatewayArgs:    {fmt.Sprintf("--kube-api-qps=%v ", apilimits.GatewayQPS), fmt.Sprintf("--kube-api-burst=%v ", apilimits.GatewayBurst)},
		} {
			for _, w := range want {
				if !strings.Contains(got+" ", w) {
					t.Errorf("args lack the shipped client limit %q: %s", w, got)
				}
			}
		}
	case "extra environment":
		for suffix, want := range map[string]string{"-controller": "GOMEMLIMIT=400MiB", "-gateway": "GOGC=200"} {
			env, _, _ := unstructured.NestedSlice(containerOf(t, find(objs, "Deployment", suffix)), "env")
			var got []string
			for _, e := range env {
				m := e.(map[string]any)
				got = append(got, fmt.Sprintf("%v=%v", m["name"], m["value"]))
			}
			if !slices.Contains(got, want) {
				t.Errorf("%s env %v lacks %s", suffix, got, want)
			}
		}
		if env, _, _ := unstructured.NestedSlice(containerOf(t, find(objs, "Deployment", "-controller")), "env"); len(env) != 2 {
			t.Errorf("controller env %v: want POD_NAMESPACE kept beside the extra variable", env)
		}
	case "cert-manager":
		if !strings.Contains(controllerArgs, "--webhook-cert-mode=external") || find(objs, "Certificate", "") == nil ||
			webhook.GetAnnotations()["cert-manager.io/inject-ca-from"] != namespace+"/userland-webhook" {
			t.Errorf("cert-manager wiring missing: args %s, annotations %v", controllerArgs, webhook.GetAnnotations())
		}
	case "oidc":
		for _, want := range []string{"--auth-mode=oidc", "--oidc-issuer=https://dex.example.edu/dex", "--oidc-redirect-url=https://userland.example.edu/oauth2/callback", "--oidc-client-secret-file=/etc/userland/oidc/client-secret", "--admin-groups=platform-admins"} {
			if !strings.Contains(gatewayArgs, want) {
				t.Errorf("gateway args lack %s: %s", want, gatewayArgs)
			}
		}
	case "github":
		for _, want := range []string{"--auth-mode=github", "--github-orgs=example-uni", "--github-teams=example-uni/staff", "--github-client-secret-file=/etc/userland/github/client-secret"} {
			if !strings.Contains(gatewayArgs, want) {
				t.Errorf("gateway args lack %s: %s", want, gatewayArgs)
			}
		}
	case "trusted header":
		for _, want := range []string{"--trusted-proxies=10.0.0.0/8", "--trusted-user-header=X-Auth-Request-User",
			"--trusted-proxy-secret-file=/etc/userland/proxy/proxy-secret", "--trusted-proxy-secret-header=X-Userland-Proxy-Secret"} {
			if !strings.Contains(gatewayArgs, want) {
				t.Errorf("gateway args lack %s: %s", want, gatewayArgs)
			}
		}
		from, _, _ := unstructured.NestedSlice(find(objs, "NetworkPolicy", "-gateway").Object, "spec", "ingress")
		if got := fmt.Sprint(from[0]); !strings.Contains(got, "oauth2-proxy") {
			t.Errorf("the gateway admits %s, want only the proxy", got)
		}
	default: // ingress
		ing := find(objs, "Ingress", "-gateway")
		if ing == nil {
			t.Fatal("no Ingress")
		}
		hosts, _, _ := unstructured.NestedSlice(ing.Object, "spec", "tls")
		if len(hosts) != 1 {
			t.Errorf("ingress TLS %v", hosts)
		}
		if find(objs, "HorizontalPodAutoscaler", "-gateway") == nil || find(objs, "ServiceMonitor", "-controller") == nil || find(objs, "Template", "vscode") == nil {
			t.Error("HPA, ServiceMonitor or sample templates missing")
		}
	}
}

// TestSchemaRejectsBadValues shows the message a bad value gets.
func TestSchemaRejectsBadValues(t *testing.T) {
	tests := map[string]struct {
		values map[string]any
		want   string
		// renderOnly: helm lint runs `required` in lint mode, where a
		// missing value is only noted; install and template fail.
		renderOnly bool
	}{
		"unknown auth mode": {
			values: map[string]any{"url": "https://u.example.edu", "gateway": map[string]any{"auth": map[string]any{"mode": "ldap"}}},
			want:   "mode",
		},
		"misspelt key": {
			values: map[string]any{"url": "https://u.example.edu", "controller": map[string]any{"replica": 3}},
			want:   "replica",
		},
		"url with a path": {
			values: map[string]any{"url": "https://u.example.edu/userland"},
			want:   "url",
		},
		"header mode without trusted proxies": {
			values: map[string]any{"url": "https://u.example.edu", "gateway": map[string]any{"auth": map[string]any{"mode": "header"}}},
			want:   "trustedProxies",
		},
		"gateway network policy admitting nobody": {
			values:     map[string]any{"url": "https://u.example.edu", "gateway": map[string]any{"networkPolicy": map[string]any{"ingressFrom": nil}}},
			want:       "ingressFrom must list",
			renderOnly: true,
		},
		"POD_NAMESPACE overridden": {
			values: map[string]any{"url": "https://u.example.edu", "controller": map[string]any{"extraEnv": []any{map[string]any{"name": "POD_NAMESPACE", "value": "elsewhere"}}}},
			want:   "extraEnv",
		},
		"a client limit of zero": {
			values: map[string]any{"url": "https://u.example.edu", "gateway": map[string]any{"kubeAPI": map[string]any{"qps": 0}}},
			want:   "qps",
		},
		"a placeholder priority environments could not preempt": {
			values: map[string]any{"url": "https://u.example.edu", "controller": map[string]any{"placeholders": map[string]any{"priorityClass": map[string]any{"value": 0}}}},
			want:   "value",
		},
		"no url at all": {
			values:     map[string]any{},
			want:       "url is required",
			renderOnly: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Render(chartDir(), "userland", namespace, tc.values)
			if err == nil {
				t.Fatal("accepted")
			}
			t.Logf("message: %v", err)
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("the message does not name %q", tc.want)
			}
			if msgs := Lint(chartDir(), tc.values); len(msgs) == 0 && !tc.renderOnly {
				t.Error("helm lint passed these values")
			}
		})
	}
}
