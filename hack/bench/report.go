package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/userland-dev/userland/internal/apilimits"
)

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

// routedHow names each gateway target's routing in the report.
var routedHow = map[string]string{targetPath: "path routing", targetSubdomain: "subdomain routing"}

// slowGrowthTargetKiB bounds what slow clients may add to the gateway: an
// eighth of the chart's 512 MiB limit.
const slowGrowthTargetKiB = 64 << 10

func writeReport(o options, results []provisionResult, gw *gatewayResult, class []classResult, warm []classWarmResult, crs *courseResult, pages *pagesResult, rw *realWakeResult) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("# Benchmarks")
	p("")
	p("Written by `make bench` (hack/bench) on %s. Do not edit by hand.", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	p("")
	p("- Machine: %s.", machine())
	p("- Components: kube-apiserver, kube-controller-manager and kube-scheduler v1.37.1, etcd v3.6.16, kwok v0.8.0 (4 simulated nodes), controller-runtime v0.25.2; Userland %s.", gitDescribe())
	p("- The controller and the gateway run as separate processes of `bin/userland`, so their memory and CPU are their own; the load generator, the proxies and the upstream share the machine's cores, as the issue's baselines assume.")
	p("- API requests are counted by the API server itself, from its audit log, for the controller's identity only. The controller and the gateway sign in with client certificates of their own (no impersonation, which would make the API server authorise each request twice), and the audit policy records only their requests and the pods timed for wakes, so auditing does not load the server being measured.")
	p("- Fairness: the baseline creates the same objects Userland's controller does (a Deployment with the Recreate strategy and a headless Service per environment, built by the controller's own functions, without an owner or the label that puts them in the controller's cache) with the same parallelism, and its namespace is deleted, and gone, before the Userlands are created, so both start from the same cluster. Completion is observed with watches, not by listing, on both sides.")
	p("")
	p("## Targets")
	p("")
	p("| area | target | measured | baseline (same run) | ratio | verdict |")
	p("|---|---|---|---|---|---|")
	for _, r := range results {
		bt := float64(r.N) / r.Baseline.Seconds()
		ut := float64(r.N) / r.Userland.Seconds()
		p("| provisioning throughput, N=%d | ≥ 0.85 × baseline | %.1f Userlands/s (%s to all Ready) | %.1f Deployments+Services/s (%s to all Available) | %.2f | %s |",
			r.N, ut, r.Userland.Round(time.Millisecond), bt, r.Baseline.Round(time.Millisecond), ut/bt, verdict(ut/bt >= 0.85))
		perUL := float64(writes(r.Counts)) / float64(r.N)
		shared := float64(r.Counts["patch templates/status"]) / float64(r.N)
		p("| controller writes per Userland to Ready (events included), N=%d, first-status window %s | ≤ 3 | %.2f (%.2f on the Userland and its children, %.2f on the template's shared counts) | 2 (a plain client's Deployment + Service) | %.2f | %s |", r.N, o.firstStatusWindow, perUL, perUL-shared, shared, perUL/2, verdict(perUL <= 3))
		perMin := float64(r.SteadyWrites) / r.SteadyWindow.Minutes()
		p("| steady-state writes, N=%d | 0 | %.1f/min over %s | — | — | %s |", r.N, perMin, r.SteadyWindow, verdict(r.SteadyWrites == 0))
		// The issue sets the 100 MiB target at 1000 Userlands; larger runs
		// are reported beside it without a verdict.
		if r.N >= 1000 {
			target, v := "≤ 100 MiB", verdict(r.PeakKiB <= 100*1024)
			if r.N > 1000 {
				target, v = "none set (100 MiB is for 1000)", "—"
			}
			p("| controller RSS at N=%d%s | %s | settled %.1f MiB, peak %.1f MiB | — | — | %s |", r.N, earlier(totalBefore(results, r.N)), target, float64(r.SettledKiB)/1024, float64(r.PeakKiB)/1024, v)
		}
	}
	if gw != nil {
		for _, name := range []string{targetPath, targetSubdomain} {
			how := routedHow[name]
			ratio := gw.SmallRatio[name]
			p("| gateway throughput, small GETs (%s; signed in, authorised, activity recorded) | ≥ 0.8 × bare proxy | %.0f req/s | %.0f req/s | %.2f | %s |", how, gw.Small[name].RPS, gw.Small[targetBare].RPS, ratio, verdict(ratio >= 0.8))
			ratioBig := gw.BigRatio[name]
			p("| gateway throughput, 1 MiB responses (%s) | ≥ 0.8 × bare proxy | %.0f req/s | %.0f req/s | %.2f | %s |", how, gw.Big[name].RPS, gw.Big[targetBare].RPS, ratioBig, verdict(ratioBig >= 0.8))
		}
		bareAdded := gw.Half[targetBare].P99 - gw.Half[targetDirect].P99
		bareErrors := sumKinds(gw.HalfErrors[targetBare])
		for _, name := range []string{targetPath, targetSubdomain} {
			added := gw.Half[name].P99 - gw.Half[targetDirect].P99
			ratio := 0.0
			if bareAdded > 0 {
				ratio = float64(added) / float64(bareAdded)
			}
			errs := sumKinds(gw.HalfErrors[name])
			p("| gateway added p99 at half its maximum load (%.0f req/s, %s), against the bare proxy's in the same run; errors no more than its | ≤ 1.2 × bare proxy's added p99 | %s added (p99 %s vs direct %s); %d errors | bare proxy adds %s; %d errors | %.2f | %s |",
				gw.HalfRate, routedHow[name], ms(added), ms(gw.Half[name].P99), ms(gw.Half[targetDirect].P99), errs, ms(bareAdded), bareErrors, ratio,
				verdict(bareAdded > 0 && ratio <= 1.2 && errs <= bareErrors))
		}
		if gw.Roster != nil {
			rosterRow(p, gw.Roster)
		}
		if s := gw.Slow; s != nil {
			ok := s.GrowthKiB() <= slowGrowthTargetKiB && s.Cut == s.Clients && s.ProbeErrors == 0
			p("| gateway under %d slow anonymous clients (stalled headers, trickled and flooded sign-in forms) | RSS growth ≤ %d MiB, every one cut off by the gateway, a signed-in user still served | +%.1f MiB at peak (%.1f before, %.1f after); %d of %d cut off, the longest held %s; %d of %d signed-in requests served, p99 %s | — | — | %s |",
				s.Clients, slowGrowthTargetKiB/1024, float64(s.GrowthKiB())/1024, float64(s.BeforeKiB)/1024, float64(s.AfterKiB)/1024, s.Cut, s.Clients, s.Longest.Round(100*time.Millisecond), s.Probes-s.ProbeErrors, s.Probes, ms(s.ProbeP99), verdict(ok))
		}
		for _, n := range o.wsCounts {
			g, bare := gw.WebSockets[n][targetPath], gw.WebSockets[n][targetBare]
			var target string
			ok := g.Dropped == 0
			if n >= 8000 {
				target = "≤ 24 KiB each, none dropped"
				ok = ok && g.KiBPerConn <= 24
			} else {
				target = "none dropped"
			}
			p("| idle proxied WebSockets, %d held | %s | %.1f KiB each, %d opened, %d dropped | bare proxy %.1f KiB each, %d dropped | %.2f | %s |", n, target, g.KiBPerConn, g.Opened, g.Dropped, bare.KiBPerConn, bare.Dropped, g.KiBPerConn/bare.KiBPerConn, verdict(ok))
		}
		fr := measureFrameReader()
		p("| following a browser's WebSocket messages (frame headers and a 256-byte prefix; masked 1 KiB messages in 32 KiB reads) | no allocation per read | %.0f MB/s, %d ns per 32 KiB read, %d allocations | — | — | %s |", fr.MBPerSec, fr.NsPer32KiBRead, fr.AllocsPerRead, verdict(fr.AllocsPerRead == 0))
		if len(gw.Wakes) > 0 {
			m := medianWake(gw.Wakes)
			p("| wake-on-request latency minus the pod's own time to Ready (median of %d) | no target set | %s (request %s, pod %s) | — | — | — |", len(gw.Wakes), ms(m.Overhead()), ms(m.Request), ms(m.Pod))
		}
	}
	realWakeTargets(p, rw)
	classTargets(p, class)
	classWarmTargets(p, warm, class)
	pagesTargets(p, pages)
	p("")
	if len(results) > 0 {
		p("## Provisioning and API economy")
	}
	for _, r := range results {
		p("")
		p("### N = %d", r.N)
		p("")
		p("- Userlands created with %d parallel creates; all Ready after %s. Baseline: the same parallelism creating Deployments and Services, all Available after %s.", parallelism, r.Userland.Round(time.Millisecond), r.Baseline.Round(time.Millisecond))
		p("- The controller ran with the shipped client limit (%v requests a second, burst %d) and waited %.2f s on it in total while provisioning; %d of its %d requests waited more than 25 ms.", apilimits.ControllerQPS, apilimits.ControllerBurst, r.Throttle.Sum, r.Throttle.Above(0.025), r.Throttle.Count)
		p("- Controller CPU while provisioning: %.1f s. RSS peak %.1f MiB, settled %.1f MiB after the steady window.", r.CPUSeconds, float64(r.PeakKiB)/1024, float64(r.SettledKiB)/1024)
		if r.Rollout > 0 {
			p("- Rollout of an image change to all %d running environments (Immediate, maxUnavailable 25%%): %s; controller CPU meanwhile %.1f s.", r.N, r.Rollout.Round(time.Millisecond), r.RolloutCPUSeconds)
		}
		p("- The template's batched counts showed all %d Ready %s after the last Userland was; its writes until then are counted with provisioning, and the steady window of %s starts then. Steady state: %d writes.", r.N, r.CountsSettled.Round(time.Millisecond), r.SteadyWindow, r.SteadyWrites)
		p("")
		writeStages(p, r)
		p("")
		writeQueues(p, r)
		p("")
		for _, name := range []string{"kube-apiserver", "controller"} {
			if top, ok := r.Profiles[name]; ok {
				p("")
				p("CPU profile of the %s, 20 s taken 3 s into provisioning (`go tool pprof -top`):", name)
				p("")
				p("```")
				p("%s", top)
				p("```")
			}
		}
		p("")
		p("Controller requests until all were Ready, per Userland:")
		p("")
		p("| verb and resource | total | per Userland |")
		p("|---|---|---|")
		for _, k := range sortedKeys(r.Counts) {
			p("| %s | %d | %.2f |", k, r.Counts[k], float64(r.Counts[k])/float64(r.N))
		}
		if r.ServerWrites != nil {
			p("")
			p("Writes the API server served, from every client (the benchmark, the controller, the controller-manager, the scheduler and kwok), until all were Ready, per environment: %.2f for Userland, %.2f for the baseline (ratio %.2f). Where the API server is the bottleneck, this ratio bounds the provisioning ratio.",
				perEnv(r.ServerWrites, r.N), perEnv(r.BaselineServerWrites, r.N), perEnv(r.BaselineServerWrites, r.N)/perEnv(r.ServerWrites, r.N))
			p("")
			p("| verb and resource | Userland | baseline |")
			p("|---|---|---|")
			all := map[string]int{}
			for k, v := range r.ServerWrites {
				all[k] += v
			}
			for k, v := range r.BaselineServerWrites {
				all[k] += v
			}
			for _, k := range sortedKeys(all) {
				p("| %s | %.2f | %.2f |", k, float64(r.ServerWrites[k])/float64(r.N), float64(r.BaselineServerWrites[k])/float64(r.N))
			}
		}
	}
	if gw != nil {
		p("")
		p("## Gateway")
		p("")
		p("Closed loop, %d workers for small GETs (64 B) and %d for 1 MiB responses; each target ran %d rounds of %s, interleaved (direct, bare, gateway, subdomain, then in a shuffled order each round, a second apart), and the round with the median throughput is shown (the median p99 for the open loop). The ratios in the targets are the median, over rounds, of each target's throughput over the bare proxy's in the same round, so a slow or fast minute on this shared machine falls on both sides of a ratio. `gateway` is routed by path on the main host with the session cookie; `subdomain` is another environment of the same user on its own host under the environment domain (`--base-domain`), with that host's own cookie from the sign-in hand-off, its Userland read by the readable host label (hashed labels go through an index). Both are authorised against the informer cache and proxied with activity recorded (last activity written: path %v, subdomain %v).", o.concurrency, o.concurrency/4, o.rounds, o.loadFor, gw.ActivityRecorded[targetPath], gw.ActivityRecorded[targetSubdomain])
		p("")
		p("| target | small req/s | small p50 | small p99 | serving process CPU per small GET | 1 MiB req/s | 1 MiB p99 | errors |")
		p("|---|---|---|---|---|---|---|---|")
		for _, name := range targetOrder {
			s, bg := gw.Small[name], gw.Big[name]
			p("| %s | %.0f | %s | %s | %.1f µs | %.0f | %s | %d |", name, s.RPS, ms(s.P50), ms(s.P99), float64(gw.SmallCPU[name])/float64(time.Microsecond), bg.RPS, ms(bg.P99), s.Errors+bg.Errors)
		}
		p("")
		p("CPU per small GET is the serving process's user and system time during each round over the requests it served, median over rounds (direct: the upstream itself; gateway and subdomain: the gateway process). On a shared 2-core machine it moves less than throughput does, so it shows what the gateway's own work costs beside the bare proxy's. The CPU profiles below come from one extra run per routing mode after the scored rounds, so the profiler's cost falls on no round the ratios count.")
		p("")
		p("Open loop at %.0f req/s (half the gateway's closed-loop maximum):", gw.HalfRate)
		p("")
		p("| target | served req/s | p50 | p99 | not served |")
		p("|---|---|---|---|---|")
		for _, name := range targetOrder {
			h := gw.Half[name]
			p("| %s | %.0f | %s | %s | %d |", name, h.RPS, ms(h.P50), ms(h.P99), h.Errors)
		}
		p("")
		writeHalfErrors(p, gw)
		p("")
		p("Peak RSS during the load runs: gateway %.1f MiB, bare proxy %.1f MiB. WebSockets are then held by freshly started gateway and bare-proxy processes, each connection sending a frame every 5 s, and RSS growth is divided by the connections held.", float64(gw.GatewayPeakKiB)/1024, float64(gw.BarePeakKiB)/1024)
		for _, name := range []string{targetPath, targetSubdomain} {
			if top := gw.Profiles[name]; top != "" {
				p("")
				p("CPU profile of the gateway under the small-GET closed loop, %s (`go tool pprof -top`):", routedHow[name])
				p("")
				p("```")
				p("%s", top)
				p("```")
			}
		}
	}
	if gw != nil && gw.Slow != nil {
		p("")
		p("### Slow clients")
		p("")
		p("A freshly started gateway is sent %d anonymous connections, a third of each kind: request headers that never end (a line every 2 s), a sign-in form trickled 100 bytes every 2 s, and a 40 MB multipart sign-in form of which 30 MiB is sent at once before it stalls (the attack that took the gateway to 553 MiB when forms were parsed before any limit). Each client waits up to %s to be cut off; its RSS is sampled every 200 ms, and a signed-in user fetches a page through the gateway every 100 ms throughout.", gw.Slow.Clients, slowHold)
	}
	if gw != nil && len(gw.Wakes) > 0 {
		p("")
		p("### Wake on request")
		p("")
		p("The environment is stopped as idle (its last activity and the last start its Deployment records moved two hours back), then one plain request (not a page load, so the gateway holds it rather than answering with a progress page) is sent through the gateway and timed until its proxied answer. The pod's own time is from its creation to the status write that made it Ready, both as the API server's audit log timed them; the rest is Userland (gateway wake, controller, status, the gateway noticing) plus the controller-manager and scheduler turning a scaled Deployment into a pod.")
		p("")
		p("| sample | request | pod's own | overhead |")
		p("|---|---|---|---|")
		for i, w := range gw.Wakes {
			p("| %d | %s | %s | %s |", i+1, ms(w.Request), ms(w.Pod), ms(w.Overhead()))
		}
	}
	realWakeSection(p, rw)
	if crs != nil {
		courseSection(p, crs)
	}
	if pages != nil {
		pagesSection(p, pages)
	}
	if len(class) > 0 {
		classSection(p, o.class, class)
	}
	if len(warm) > 0 {
		classWarmSection(p, o.class.Window, warm)
	}
	p("")
	if missing := notMeasured(o); len(missing) > 0 {
		p("## Not measured in this run")
		p("")
		for _, m := range missing {
			p("- %s", m)
		}
	}
	if err := os.MkdirAll("docs", 0o755); err != nil {
		return err
	}
	return os.WriteFile(o.out, []byte(b.String()), 0o644)
}

// earlier says how many Userlands an earlier size of the same run left in
// the controller's cache.
func earlier(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (plus %d earlier)", n)
}

// notMeasured lists what the issue asks for that this run's flags left out.
func notMeasured(o options) []string {
	var out []string
	for _, n := range []int{100, 1000, 5000} {
		if !slices.Contains(o.sizes, n) {
			how := fmt.Sprintf("`go run ./hack/bench -n %d`", n)
			if n == 5000 {
				how = "`make bench-large`, about 22 minutes, writes docs/benchmarks-5000.md"
			}
			out = append(out, fmt.Sprintf("Provisioning, API economy and controller footprint at N = %d (%s).", n, how))
		}
	}
	if len(o.sizes) > 0 && !o.rollout {
		out = append(out, "Rollout of an image change (run without `-rollout=false`).")
	}
	if o.class.Students == 0 {
		out = append(out, "The class-start scenario (`-class-students 500`).")
	}
	if o.classWarm == 0 {
		out = append(out, "The class start of a course, cold and warmed by its timetable (`-class-warm-students 200`).")
	}
	if !o.realWake {
		out = append(out, "Each real app's wake on a real node beside kwok (run without `-real-wake=false`).")
	}
	if !o.gateway {
		out = append(out, "The gateway: throughput, latency, held WebSockets and wake latency (run without `-gateway=false`).")
	} else {
		if len(o.wsCounts) == 0 {
			out = append(out, "Held WebSockets (`-websockets 1000,8000`).")
		}
		if o.slowClients == 0 {
			out = append(out, "The gateway under slow clients (`-slow-clients 500`).")
		}
	}
	return out
}

func totalBefore(results []provisionResult, n int) int {
	t := 0
	for _, r := range results {
		if r.N == n {
			break
		}
		t += r.N
	}
	return t
}

func gitDescribe() string {
	out, err := execCommand("git", "describe", "--tags", "--always", "--dirty").Output()
	if err != nil {
		return "(unknown revision)"
	}
	return strings.TrimSpace(string(out))
}

// perEnv is the total of counts per environment.
func perEnv(counts map[string]int, n int) float64 {
	t := 0
	for _, v := range counts {
		t += v
	}
	return float64(t) / float64(n)
}

// writeStages is the per-environment stage table: where an environment's
// time to Ready goes, beside the baseline's create → Available.
func writeStages(p func(string, ...any), r provisionResult) {
	if len(r.Stages) == 0 {
		return
	}
	p("Per-environment stage times (first seen by the benchmark's watches; \"first child\" is the controller's first reconcile making its Service or Deployment; \"pod Ready\" is the cluster's own work):")
	p("")
	p("| stage | p50 | p90 | p99 | environments |")
	p("|---|---|---|---|---|")
	for _, sp := range r.Stages {
		p("| %s → %s | %s | %s | %s | %d |", sp.From, sp.To, ms(sp.P50), ms(sp.P90), ms(sp.P99), sp.N)
	}
	for _, sp := range r.BaselineStages {
		p("| baseline: %s → %s | %s | %s | %s | %d |", sp.From, sp.To, ms(sp.P50), ms(sp.P90), ms(sp.P99), sp.N)
	}
}

func sumKinds(kinds map[string]int) int {
	n := 0
	for _, v := range kinds {
		n += v
	}
	return n
}

// writeHalfErrors lists the half-load runs' errors by kind and target.
func writeHalfErrors(p func(string, ...any), gw *gatewayResult) {
	var kinds []string
	for _, byKind := range gw.HalfErrors {
		for k := range byKind {
			if !slices.Contains(kinds, k) {
				kinds = append(kinds, k)
			}
		}
	}
	if len(kinds) == 0 {
		p("No request failed in the half-load runs.")
		return
	}
	slices.Sort(kinds)
	p("Errors in the half-load runs (all rounds), by kind. \"Not sent\" means the open loop had every allowed request (4 × concurrency) still waiting, so the target had fallen behind the offered rate: a latency spike, not a failed answer.")
	p("")
	p("| kind | %s |", strings.Join(targetOrder, " | "))
	p("|---|%s", strings.Repeat("---|", len(targetOrder)))
	for _, k := range kinds {
		row := make([]string, len(targetOrder))
		for i, name := range targetOrder {
			row[i] = strconv.Itoa(gw.HalfErrors[name][k])
		}
		p("| %s | %s |", k, strings.Join(row, " | "))
	}
}
