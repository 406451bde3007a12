package main

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// writeBudgetReport is make bench-budget's report.
func writeBudgetReport(o options, r *budgetResult) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	total := writes(r.Rollover)
	p("# Compute-hour budgets at %d running environments", r.N)
	p("")
	p("Written by `make bench-budget` (hack/bench -budget) on %s. Do not edit by hand.", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	p("")
	p("- Machine: %s.", machine())
	p("- Components: kube-apiserver, kube-controller-manager and kube-scheduler v1.37.1, etcd v3.6.16, kwok v0.8.0 (4 simulated nodes), controller-runtime v0.25.2; Userland %s.", gitDescribe())
	p("- %d Userlands of one Template with `spec.budget` (40 hours a week, `period: Week`), created 16 at a time on a fresh simulated cluster, all running. The controller runs in the benchmark's process with its own client certificate, the shipped client limits (200 requests a second, burst 400) and 16 workers, on a clock that is the real one moved so that its Monday 00:00 UTC, the weekly budget's rollover, comes %s after it starts: its timers wait real time.", r.N, r.Lead)
	p("- Writes are the controller's, counted by the API server's audit log for its identity.")
	p("")
	p("## Targets")
	p("")
	p("| area | target | measured | verdict |")
	p("|---|---|---|---|")
	p("| steady-state writes with %d running environments and budgets on | 0 | %d over %s | %s |", r.N, r.SteadyWrites, r.SteadyWindow, verdict(r.SteadyWrites == 0))
	p("| writes at the weekly rollover of %d running environments (each environment's usage starts the new week) | at most one status write per running environment (docs/operators-term.md) | %d (%.2f per environment: %s); the last %s after the rollover; %d of %d count the new week | %s |",
		r.N, total, float64(total)/float64(r.N), describeCounts(r.Rollover), r.RolloverSpan.Round(time.Millisecond), r.RolledOver, r.N,
		verdict(total <= r.N && r.RolledOver == r.N))
	p("")
	p("Provisioning (create → all Ready with usage recorded) took %s. The rollover's writes are spread by nothing but the controller's workers and client limit: every running environment's timer fires at the same instant.", r.Provisioned.Round(time.Millisecond))
	return os.WriteFile(o.out, []byte(b.String()), 0o644)
}
