package gateway

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
)

func TestAccessLogHasNoSecrets(t *testing.T) {
	t.Parallel()
	var lines []string
	log := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
	h := observe(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	}), NewMetrics(prometheus.NewRegistry()), log)
	r := httptest.NewRequest(http.MethodGet, "/u/cs101/taro/lab?token=s3cret", nil)
	r.Header.Set("Cookie", "userland_session=s3cret-cookie")
	r.Header.Set("Authorization", "Bearer s3cret-token")
	h.ServeHTTP(httptest.NewRecorder(), r)
	if len(lines) != 1 {
		t.Fatalf("got %d log lines", len(lines))
	}
	line := lines[0]
	if strings.Contains(line, "s3cret") {
		t.Errorf("the access log leaks a secret: %s", line)
	}
	for _, want := range []string{`"path"="/u/cs101/taro/lab"`, `"status"=418`, `"method"="GET"`} {
		if !strings.Contains(line, want) {
			t.Errorf("access log %s lacks %s", line, want)
		}
	}
}
