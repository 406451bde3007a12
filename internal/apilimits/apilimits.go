// Package apilimits holds the client-side limits on requests to the API
// server that the controller and the gateway ship with, and turns on
// client-go's metrics of the time requests wait for them.
//
// Why these numbers: every supported Kubernetes runs API Priority and
// Fairness, which queues each client's requests in its priority level
// (a service account's in "workload-low", shared fairly by user) and so
// protects the API server by itself. A client-side limit only guards
// against a runaway loop; below the load a class start makes, it is the
// class's own bottleneck. Userland's writes are proportional to work
// (a converged cluster costs none), so the limits sit well above what
// `make bench`'s class-start scenario (500 students signing in within a
// minute) needs, and the rate-limiter metric shows when they bite.
package apilimits

import (
	"k8s.io/client-go/rest"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The shipped defaults of --kube-api-qps and --kube-api-burst.
const (
	// ControllerQPS and ControllerBurst bound the controller. A wake costs
	// it about three writes and a new environment five; its 16 workers can
	// issue several hundred a second when a class arrives at once.
	ControllerQPS   float32 = 200
	ControllerBurst int     = 400
	// GatewayQPS and GatewayBurst bound each gateway replica. Its writes
	// are a wake or an auto-provisioned Userland per arriving user, and
	// activity at most once a minute per environment.
	GatewayQPS   float32 = 100
	GatewayBurst int     = 200
)

// Apply sets cfg's client-side limit; a negative qps turns it off, which
// leaves the API server's own fairness as the only limit.
func Apply(cfg *rest.Config, qps float32, burst int) {
	cfg.QPS, cfg.Burst = qps, burst
	if qps < 0 {
		cfg.QPS, cfg.Burst = -1, 0
	}
}

// RegisterMetrics publishes rest_client_rate_limiter_duration_seconds (time
// spent waiting for the client-side limit) and
// rest_client_request_duration_seconds on controller-runtime's registry,
// which the metrics endpoint serves.
func RegisterMetrics() {
	crmetrics.RegisterRESTClientMetrics(crmetrics.MetricRateLimiterLatency, crmetrics.MetricRequestLatency)
}
