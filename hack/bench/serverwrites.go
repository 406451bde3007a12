package main

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"

	"github.com/userland-dev/userland/internal/testenv"
)

// serverWrites reads the API server's own count of the write requests it
// has served, from every client (the controller-manager, the scheduler,
// kwok, the controller and the benchmark alike), by "VERB resource". The
// difference over a run shows what the whole cluster wrote for it, which
// is what decides throughput when the API server is the bottleneck.
func serverWrites(env *testenv.Environment) (map[string]int, error) {
	hc, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		return nil, fmt.Errorf("client for the API server's metrics: %w", err)
	}
	resp, err := hc.Get(strings.TrimSuffix(env.Config.Host, "/") + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading the API server's metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parsing the API server's metrics: %w", err)
	}
	counts := map[string]int{}
	fam, ok := families["apiserver_request_total"]
	if !ok {
		return nil, fmt.Errorf("the API server's metrics have no apiserver_request_total")
	}
	for _, m := range fam.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		switch labels["verb"] {
		case "POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION":
		default:
			continue
		}
		res := labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			res += "/" + sub
		}
		counts[labels["verb"]+" "+res] += int(m.GetCounter().GetValue())
	}
	return counts, nil
}

// since is after minus before, without the keys that did not change.
func since(before, after map[string]int) map[string]int {
	d := map[string]int{}
	for k, v := range after {
		if v -= before[k]; v > 0 {
			d[k] = v
		}
	}
	return d
}
