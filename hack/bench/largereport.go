package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/userland-dev/userland/internal/gctune"
)

// writeLargeReport writes the 10,000-environment scenario's report.
func writeLargeReport(o options, results []largeResult) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("# Benchmarks at %d environments", o.large)
	p("")
	p("Written by `make bench-10k` (hack/bench -large) on %s. Do not edit by hand.", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	p("")
	p("- Machine: %s.", machine())
	p("- Components: kube-apiserver, kube-controller-manager and kube-scheduler v1.37.1, etcd v3.6.16, kwok v0.8.0 (4 simulated nodes), controller-runtime v0.25.2; Userland %s.", gitDescribe())
	p("- Each layout runs on a simulated cluster of its own, started fresh, with one controller process (`bin/userland controller`, the shipped client limits and workers, first-status window %s). Userlands are created 16 at a time; completion is observed with watches.", o.firstStatusWindow)
	p("- Writes are counted by the API server's audit log, for the controller's identity only. RSS is read from /proc: the peak is the largest of one-second samples and the kernel's high-water mark.")
	p("- In the spread layout every namespace is one course whose roster is that namespace's students, and their Userlands are the course's. A gateway process is started once all are Ready and its RSS read after its admin page counts every environment (its informer caches are full).")
	p("- The rollout is an image change under the template's `Immediate` policy with `maxUnavailable: 25%%`, reaching all %d environments: in the one-namespace layout one Template change, in the spread layout the same change made to every namespace's Template at once (the bound is then a quarter of each namespace's environments). Unavailable is a Deployment with no available pod, counted from one informer of the Deployments (it resumes, or lists again, when the API server ends its watch); a layout's rollout stops at %s and is reported as far as it got.", o.large, o.largeRolloutLimit)
	p("")
	p("## Targets")
	p("")
	p("| layout | area | target | measured | verdict |")
	p("|---|---|---|---|---|")
	for _, r := range results {
		l := layoutName(r)
		p("| %s | controller RSS | ≤ %d MiB | peak %.1f MiB, settled %.1f MiB | %s |", l, largeTargetControllerKiB>>10, mib(r.PeakKiB), mib(r.SettledKiB), verdict(r.PeakKiB <= largeTargetControllerKiB))
		p("| %s | steady-state writes | 0 | %d in %s | %s |", l, r.SteadyWrites, r.SteadyWindow, verdict(r.SteadyWrites == 0))
		if r.Courses > 0 {
			p("| %s | gateway RSS with %d Userlands and %d courses cached | ≤ %d MiB | %.1f MiB (peak %.1f MiB) | %s |", l, r.N, r.Courses, largeTargetGatewayKiB>>10, mib(r.GatewayKiB), mib(r.GatewayPeakKiB), verdict(r.GatewayPeakKiB <= largeTargetGatewayKiB))
		}
		if r.Rollout > 0 {
			bound := int(float64(r.N) * largeMaxUnavailable)
			p("| %s | most unavailable at once during a rollout to all %d | ≤ %d (25%%) | %d | %s |", l, r.N, bound, r.MaxUnavailable, verdict(r.MaxUnavailable <= bound))
			if r.Namespaces > 1 {
				p("| %s | most unavailable at once in one namespace, against its own template's bound (the nearest to it: %s) | ≤ %d (25%%) | %d | %s |", l, r.WorstNamespace, r.WorstBound, r.WorstUnavailable, verdict(r.WorstUnavailable <= r.WorstBound))
			}
			if r.RolloutUpdated < r.N {
				p("| %s | rollout to all %d within %s | all updated and Ready | %d | **missed** |", l, r.N, o.largeRolloutLimit, r.RolloutUpdated)
			}
			// The kernel's high-water mark: the most the controller held
			// from its start to the rollout's end.
			p("| %s | controller RSS through the rollout | ≤ %d MiB | peak %.1f MiB | %s |", l, largeTargetControllerKiB>>10, mib(r.RolloutPeakKiB), verdict(r.RolloutPeakKiB <= largeTargetControllerKiB))
		}
	}
	p("")
	p("## Times")
	p("")
	p("| layout | create → all Ready | throughput | controller CPU while provisioning | rollout to all, until every one is Ready again | controller CPU during the rollout | controller peak RSS after the rollout |")
	p("|---|---|---|---|---|---|---|")
	for _, r := range results {
		rollout, rolloutCPU, rolloutRSS := "not measured in this layout", "—", "—"
		if r.Rollout > 0 {
			rollout, rolloutRSS = r.Rollout.Round(time.Second).String(), fmt.Sprintf("%.1f MiB", mib(r.RolloutPeakKiB))
			rolloutCPU = fmt.Sprintf("%.1f s", r.RolloutCPUSeconds)
			if r.RolloutUpdated < r.N {
				rollout = fmt.Sprintf("stopped after %s with %d of %d updated and Ready", r.Rollout.Round(time.Second), r.RolloutUpdated, r.N)
			}
		}
		p("| %s | %s | %.1f Userlands/s | %.1f s | %s | %s | %s |", layoutName(r), r.Ready.Round(time.Second), float64(r.N)/r.Ready.Seconds(), r.CPUSeconds, rollout, rolloutCPU, rolloutRSS)
	}
	p("")
	p("No time target is set at this size: on this machine of %s the API server is the bottleneck (see docs/benchmarks.md), so these times are the cluster's as much as Userland's.", machine())
	for _, r := range results {
		if r.Heap == "" {
			continue
		}
		p("")
		p("## What the controller's memory holds: %s", layoutName(r))
		p("")
		gc := fmt.Sprintf("GOGC %d, the controller's own", gctune.Controller)
		if v := os.Getenv("GOGC"); v != "" {
			gc = "GOGC " + v + " from the benchmark's environment"
		}
		p("Its in-use heap at the end of the steady window (`go tool pprof -top -sample_index=inuse_space`; resident memory adds the collector's headroom, %s, and the runtime's own):", gc)
		p("")
		p("```")
		p("%s", r.Heap)
		p("```")
	}
	return os.WriteFile(o.out, []byte(b.String()), 0o644)
}

func layoutName(r largeResult) string {
	if r.Namespaces == 1 {
		return fmt.Sprintf("%d in one namespace", r.N)
	}
	return fmt.Sprintf("%d over %d namespaces (%d courses)", r.N, r.Namespaces, r.Courses)
}
