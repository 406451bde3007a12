package chartrender

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/userland-dev/userland/internal/controller"
	"github.com/userland-dev/userland/internal/simcluster"
)

// TestControllerMetricsNeedATokenAndRBAC serves the controller's metrics
// as the chart ships them (--metrics-secure), checked as the controller's
// ServiceAccount with only the chart's RBAC, and scrapes them as an
// attacker would: without a token, with a forged one, with a real token
// of a ServiceAccount nobody granted anything, and as a Prometheus bound
// to userland-metrics-reader. Only the last gets the series, which name
// users.
func TestControllerMetricsNeedATokenAndRBAC(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	installChartRBAC(t)
	port, err := simcluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cfg := env.ConfigFor(controllerSA)
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := metricsserver.NewServer(controller.MetricsServerOptions(addr, true), cfg, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Start(ctx) }()

	ns := "metrics-scrapers"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	clientset := kubernetes.NewForConfigOrDie(env.Config)
	token := func(name string) string {
		t.Helper()
		if _, err := clientset.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	prometheus, nosy := token("prometheus"), token("nosy")
	createIgnoringExisting(t, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-reads-userland-metrics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "userland-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: ns}},
	})

	// The certificate is the controller's own, so it is not verified: the
	// token is what is checked.
	scraper := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a self-made certificate, as the ServiceMonitor scrapes it
	}}
	scrape := func(bearer string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
		if err != nil {
			return 0, "", err
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := scraper.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, string(body), err
	}
	// Prometheus first: retried while the server starts and the binding
	// reaches the authorizer's cache.
	start := time.Now()
	var body string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		code, b, err := scrape(prometheus)
		body = b
		return err == nil && code == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("Prometheus bound to userland-metrics-reader never got the metrics: %v (last body %.200q)", err, body)
	}
	t.Logf("Prometheus scraped the metrics %s after the server started", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(body, "# TYPE") {
		t.Errorf("the metrics Prometheus got hold no series: %.300q", body)
	}

	for _, tc := range []struct {
		name, bearer string
		want         int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a forged token", "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06YWRtaW4ifQ.forged", http.StatusUnauthorized},
		{"a real token of a ServiceAccount granted nothing", nosy, http.StatusForbidden},
	} {
		code, b, err := scrape(tc.bearer)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if code != tc.want || strings.Contains(b, "# TYPE") {
			t.Errorf("%s: %d with %d bytes, want %d and no series", tc.name, code, len(b), tc.want)
		}
	}
}
