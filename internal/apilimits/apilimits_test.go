package apilimits

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

func TestApply(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		qps       float32
		burst     int
		wantQPS   float32
		wantBurst int
	}{
		"shipped controller": {qps: ControllerQPS, burst: ControllerBurst, wantQPS: 200, wantBurst: 400},
		"shipped gateway":    {qps: GatewayQPS, burst: GatewayBurst, wantQPS: 100, wantBurst: 200},
		"off":                {qps: -5, burst: 10, wantQPS: -1, wantBurst: 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := &rest.Config{}
			Apply(cfg, tc.qps, tc.burst)
			if diff := cmp.Diff([]any{tc.wantQPS, tc.wantBurst}, []any{cfg.QPS, cfg.Burst}); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// TestThrottlingIsMeasured shows that time spent waiting for the limit
// reaches the metrics endpoint's registry, which `make bench` reads.
func TestThrottlingIsMeasured(t *testing.T) {
	t.Parallel()
	RegisterMetrics()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("{}")) }))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	Apply(cfg, 10, 1) // one at once, then one every 100 ms
	cfg.APIPath, cfg.NegotiatedSerializer = "/", scheme.Codecs.WithoutConversion()
	rc, err := rest.UnversionedRESTClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	before := waited(t)
	for range 4 {
		if err := rc.Get().AbsPath("/x").Do(context.Background()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	got := waited(t) - before
	t.Logf("4 requests at 10 per second, burst 1: %.3f s waiting on the limiter", got)
	if got < 0.2 {
		t.Errorf("waited %.3f s, want about 0.3 s recorded", got)
	}
}

// waited sums rest_client_rate_limiter_duration_seconds.
func waited(t *testing.T) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range families {
		if f.GetName() == "rest_client_rate_limiter_duration_seconds" {
			for _, m := range f.GetMetric() {
				sum += m.GetHistogram().GetSampleSum()
			}
		}
	}
	return sum
}
