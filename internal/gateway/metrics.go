package gateway

import (
	"bufio"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the gateway's Prometheus metrics, served on the separate
// metrics port.
type Metrics struct {
	requests *prometheus.CounterVec
	// byCode holds requests' counter per status code once first used:
	// looking a label up hashes it under a lock, on every request.
	byCode         [600]atomic.Pointer[prometheus.Counter]
	upstream       prometheus.Histogram
	websockets     prometheus.Gauge
	wakes          prometheus.Counter
	wakeSeconds    prometheus.Histogram
	waiting        prometheus.Gauge
	unresolved     prometheus.Counter
	signinFailures *prometheus.CounterVec
}

// NewMetrics registers the gateway's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "userland_gateway_requests_total", Help: "Requests by response code.",
		}, []string{"code"}),
		upstream: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "userland_gateway_upstream_seconds", Help: "Time to proxy a request to an environment (whole exchange, WebSockets excluded).",
			Buckets: prometheus.DefBuckets,
		}),
		websockets: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "userland_gateway_websockets_active", Help: "WebSocket connections being proxied.",
		}),
		wakes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "userland_gateway_wakes_total", Help: "Stopped environments woken by a request.",
		}),
		wakeSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "userland_gateway_wake_seconds", Help: "Seconds a held request waited for its environment to become ready.",
			Buckets: []float64{0.5, 1, 2, 5, 10, 20, 30, 60, 120},
		}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "userland_gateway_requests_waiting", Help: "Requests held until their environment is ready.",
		}),
		unresolved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "userland_gateway_unresolved_total",
			Help: "Requests for a Ready environment asked to wait because its Service listed no ready address within the resolver's wait (EndpointSlices lagging the Userland's status).",
		}),
		signinFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "userland_gateway_signin_failures_total", Help: "Failed sign-ins by reason.",
		}, []string{"reason"}),
	}
	reg.MustRegister(m.requests, m.upstream, m.websockets, m.wakes, m.wakeSeconds, m.waiting, m.unresolved, m.signinFailures)
	return m
}

// A nil *Metrics records nothing.

func (m *Metrics) signinFailed(reason string) {
	if m != nil {
		m.signinFailures.WithLabelValues(reason).Inc()
	}
}

// answered counts a response by its status code.
func (m *Metrics) answered(code int) {
	switch {
	case m == nil:
	case code < 0 || code >= len(m.byCode):
		m.requests.WithLabelValues(strconv.Itoa(code)).Inc()
	default:
		c := m.byCode[code].Load()
		if c == nil {
			counter := m.requests.WithLabelValues(strconv.Itoa(code))
			c = &counter
			m.byCode[code].Store(c)
		}
		(*c).Inc()
	}
}

func (m *Metrics) woke() {
	if m != nil {
		m.wakes.Inc()
	}
}

func (m *Metrics) unresolvedReady() {
	if m != nil {
		m.unresolved.Inc()
	}
}

func (m *Metrics) waited(d time.Duration) {
	if m != nil {
		m.wakeSeconds.Observe(d.Seconds())
	}
}

func (m *Metrics) holding(delta float64) {
	if m != nil {
		m.waiting.Add(delta)
	}
}

func (m *Metrics) proxied(d time.Duration, websocket bool) {
	if m != nil && !websocket {
		m.upstream.Observe(d.Seconds())
	}
}

func (m *Metrics) websocket(delta float64) {
	if m != nil {
		m.websockets.Add(delta)
	}
}

// observe wraps a handler with request counting and an access log. The log
// has method, path (no query string: it may carry tokens), status, size
// and duration — never headers or cookies.
func observe(next http.Handler, m *Metrics, log logr.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		code := rec.code
		if code == 0 {
			code = http.StatusOK
			if rec.hijacked {
				code = http.StatusSwitchingProtocols
			}
		}
		m.answered(code)
		log.Info("request", "method", r.Method, "host", r.Host, "path", r.URL.EscapedPath(), "status", code,
			"bytes", rec.bytes, "duration", time.Since(start).Round(time.Microsecond).String(), "remote", r.RemoteAddr)
	})
}

type statusRecorder struct {
	http.ResponseWriter
	code     int
	bytes    int64
	hijacked bool
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(b)
	s.bytes += int64(n)
	return n, err
}

// Unwrap exposes the real writer to http.ResponseController (Flush).
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Hijack passes WebSocket upgrades through and notes them.
func (s *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	s.hijacked = true
	return http.NewResponseController(s.ResponseWriter).Hijack()
}
