package main

import (
	"fmt"
	"math"
	"time"
)

// gatewayRSSTargetKiB is the class start's bound on the gateway: half the
// chart's 512 MiB limit.
const gatewayRSSTargetKiB = 256 << 10

// classFigures are one run's distributions.
type classFigures struct {
	Total, PodOwn summary
	Stages        []summary
	// Reached counts students who got their environment; Errors the
	// answers and failures they met on the way.
	Reached, Errors int
	ErrorSamples    []string
	ProgressPages   float64
}

func figures(r classResult) classFigures {
	var total, pod []time.Duration
	stages := make([][]time.Duration, len(stageNames))
	f := classFigures{}
	pages := 0
	for _, s := range r.Students {
		if d, ok := s.Total(); ok {
			total = append(total, d)
			f.Reached++
		}
		if d, ok := s.PodOwn(); ok {
			pod = append(pod, d)
		}
		if parts, ok := s.Stages(); ok {
			for i, d := range parts {
				stages[i] = append(stages[i], d)
			}
		}
		f.Errors += len(s.Errors)
		for _, e := range s.Errors {
			if len(f.ErrorSamples) < 5 {
				f.ErrorSamples = append(f.ErrorSamples, s.User+": "+e)
			}
		}
		pages += s.ProgressPages
	}
	f.Total, f.PodOwn = summarize(total), summarize(pod)
	for _, st := range stages {
		f.Stages = append(f.Stages, summarize(st))
	}
	if len(r.Students) > 0 {
		f.ProgressPages = float64(pages) / float64(len(r.Students))
	}
	return f
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// classTargets are the scenario's rows in the targets table.
func classTargets(p func(string, ...any), results []classResult) {
	for _, r := range results {
		f := figures(r)
		n := len(r.Students)
		p("| class start, %s: sign-in to the environment's first byte, p99 | ≤ the pods' own p99 to Ready + 2 s | %s (p50 %s, %d of %d reached) | pods' own p99 %s | — | %s |",
			r.Limits.Name, secs(f.Total.P99), secs(f.Total.P50), f.Reached, n, secs(f.PodOwn.P99), verdict(f.Reached == n && f.Total.P99 <= f.PodOwn.P99+2*time.Second))
		p("| class start, %s: requests that got an error | 0 (held, or the progress page, until Ready) | %d | — | — | %s |", r.Limits.Name, f.Errors, verdict(f.Errors == 0))
		p("| class start, %s: gateway RSS | < 256 MiB | peak %.1f MiB | — | — | %s |", r.Limits.Name, float64(r.PeakKiB["gateway"])/1024, verdict(r.PeakKiB["gateway"] < gatewayRSSTargetKiB))
		p("| class start, %s: writes in the steady state after the storm | 0 | %d over %s (controller and gateway) | — | — | %s |", r.Limits.Name, r.SteadyWrites, r.SteadyWindow, verdict(r.SteadyWrites == 0))
	}
}

// classSection is the scenario's part of the report.
func classSection(p func(string, ...any), o classOptions, results []classResult) {
	p("")
	p("## Class start")
	p("")
	p("%d students sign in within %s, spread evenly in a shuffled order, through a freshly started gateway and controller run with the chart's flags (static sign-in with bcrypt's default cost, environment hosts under `--base-domain`, a one-minute activity interval, 16 workers) and the client limits named. %d come back to environments stopped for idleness overnight (last activity and start moved two hours back); %d are new and get theirs auto-provisioned at sign-in. Each student is a browser: it opens its environment's host signed out, is sent to the sign-in form, posts it, follows the hand-off back to the environment host, stays on the progress page as its meta refresh says, and once the environment answers makes the app's first requests (three subresources and a WebSocket). Sign-in to first byte runs from posting the form to the environment's own answer to the page.",
		o.Students, o.Window, o.Students-o.New, o.New)
	p("")
	p("The breakdown splits each student's wait at the gateway's write that starts the environment (the wake's activity, or the new Userland), the controller's first write of its Deployment after it (both as the API server's audit log timed them), and the pod turning Ready (a watch's event); the last part is the controller marking the Userland Ready, the gateway's cache seeing it and the browser's next load. The pods' own time is from a pod appearing to turning Ready in the same watch. Client-side throttling is client-go's `rest_client_rate_limiter_duration_seconds` from each process's metrics endpoint; API server latency is the audit log's receipt-to-response time of each client's writes.")
	for _, r := range results {
		f := figures(r)
		p("")
		p("### %s", r.Limits.Name)
		p("")
		p("Sign-ins spread over %s; %s from the first sign-in to the last first byte. %d of %d students reached their environment; %.2f progress pages each on average.", r.Spread.Round(time.Millisecond), r.Storm.Round(time.Millisecond), f.Reached, len(r.Students), f.ProgressPages)
		if len(f.ErrorSamples) > 0 {
			p("")
			p("Errors (first %d of %d):", len(f.ErrorSamples), f.Errors)
			p("")
			for _, e := range f.ErrorSamples {
				p("- %s", e)
			}
		}
		p("")
		p("| per student | n | p50 | p95 | p99 | max |")
		p("|---|---|---|---|---|---|")
		row := func(name string, s summary) {
			p("| %s | %d | %s | %s | %s | %s |", name, s.N, secs(s.P50), secs(s.P95), secs(s.P99), secs(s.Max))
		}
		row("sign-in to first byte", f.Total)
		for i, name := range stageNames {
			if i < len(f.Stages) {
				row("… "+name, f.Stages[i])
			}
		}
		row("pod's own time to Ready", f.PodOwn)
		p("")
		p("| client | writes | per second (mean, peak) | API server write latency p50 / p99 | waited on its client-side limit | requests that waited > 25 ms | CPU | peak RSS |")
		p("|---|---|---|---|---|---|---|---|")
		for _, name := range []string{"gateway", "controller"} {
			w, l, t := r.Writes[name], r.Latency[name], r.Throttle[name]
			p("| %s | %d | %.1f, %.0f | %s / %s | %.2f s in total, p99 ≤ %s | %d of %d | %.1f s | %.1f MiB |", name, w.Total, w.PerSecond, w.Peak,
				ms(l.P50), ms(l.P99), t.Sum, bucket(t.Quantile(0.99)), t.Above(0.025), t.Count, r.CPUSeconds[name], float64(r.PeakKiB[name])/1024)
		}
		p("")
		p("Every client's writes (the controller-manager, the scheduler, kwok, the controller, the gateway) as the API server counted them: %d, %.1f a second over the storm.", r.ServerWrites.Total, r.ServerWrites.PerSecond)
	}
}

// bucket names a histogram bucket bound.
func bucket(le float64) string {
	switch {
	case le == 0:
		return "0"
	case math.IsInf(le, 1):
		return "∞"
	case le < 1:
		return fmt.Sprintf("%.0f ms", le*1000)
	}
	return fmt.Sprintf("%.0f s", le)
}
