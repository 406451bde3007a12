package chartrender

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
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

// s5Metrics serves the controller's secure metrics as the chart does and
// returns a scrape function and the tokens of a Prometheus bound to
// userland-metrics-reader and of a ServiceAccount granted nothing (a pod
// running user code holds one such).
func s5Metrics(t *testing.T, ctx context.Context, ns string) (scrape func(method, path, bearer string) (int, string, error), prometheus, nosy string) {
	t.Helper()
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
	prometheus, nosy = token("prometheus"), token("nosy")
	createIgnoringExisting(t, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-prometheus"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "userland-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: ns}},
	})
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the controller's self-made certificate
		MaxIdleConnsPerHost: 64,
	}}
	scrape = func(method, path, bearer string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, method, "https://"+addr+path, nil)
		if err != nil {
			return 0, "", err
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, string(body), err
	}
	var body string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		code, b, err := scrape(http.MethodGet, "/metrics", prometheus)
		body = b
		return err == nil && code == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("Prometheus never got the metrics: %v (last body %.200q)", err, body)
	}
	return scrape, prometheus, nosy
}

// TestAdversaryS5MetricsPathAndMethodTricks: a pod with a token RBAC
// grants nothing (and one with no token) asks for the series by other
// spellings of the path and other methods. Secure: never the series.
func TestAdversaryS5MetricsPathAndMethodTricks(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	scrape, _, nosy := s5Metrics(t, ctx, "s5-metrics-paths")
	for _, bearer := range []struct{ name, token string }{{"no token", ""}, {"a token granted nothing", nosy}} {
		for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodPost} {
			for _, path := range []string{"/metrics", "/metrics/", "//metrics", "/metrics?x=1", "/%6detrics", "/./metrics", "/healthz/../metrics", "/METRICS", "/"} {
				code, body, err := scrape(method, path, bearer.token)
				if err != nil {
					t.Logf("%s %s with %s: %v", method, path, bearer.name, err)
					continue
				}
				if code < 300 || strings.Contains(body, "# TYPE") {
					t.Errorf("HOLE: %s %s with %s: %d, %d bytes (series: %v)", method, path, bearer.name, code, len(body), strings.Contains(body, "# TYPE"))
				}
			}
		}
	}
}

// TestAdversaryS5MetricsFloodStarvesPrometheus: any pod that reaches the
// port (a student's environment, say) sends made-up bearer tokens as fast
// as it can. Reviews in flight are bounded at four and a caller beyond
// them is answered 429 at once, so the flood holds the slots and
// Prometheus's own scrapes fail: the operator's alerts on Userland's
// metrics (budget exhaustion, reconcile errors) go blind while a student
// wants them to. Secure: the authorized scraper still gets its metrics
// (at most one scrape in ten lost).
func TestAdversaryS5MetricsFloodStarvesPrometheus(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	scrape, prometheus, _ := s5Metrics(t, ctx, "s5-metrics-flood")

	floodCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var sent, tooMany atomic.Int64
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; floodCtx.Err() == nil; n++ {
				code, _, _ := scrape(http.MethodGet, "/metrics", fmt.Sprintf("forged-%d-%d", i, n))
				sent.Add(1)
				if code == http.StatusTooManyRequests {
					tooMany.Add(1)
				}
			}
		}()
	}
	time.Sleep(time.Second)
	const scrapes = 20
	failed := 0
	codes := map[int]int{}
	for range scrapes {
		code, _, err := scrape(http.MethodGet, "/metrics", prometheus)
		codes[code]++
		if err != nil || code != http.StatusOK {
			failed++
		}
		time.Sleep(200 * time.Millisecond)
	}
	stop()
	wg.Wait()
	t.Logf("flood: %d forged-token requests (%d answered 429); Prometheus's %d scrapes: %v", sent.Load(), tooMany.Load(), scrapes, codes)
	if failed > scrapes/10 {
		t.Errorf("HOLE: a flood of made-up tokens from any pod failed %d of Prometheus's %d scrapes (%v): the review slots "+
			"(metricsauth.MaxReviews) are shared by unauthenticated callers and the authorized scraper alike", failed, scrapes, codes)
	}
}
