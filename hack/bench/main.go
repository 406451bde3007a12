// Command bench measures Userland at scale on this machine and writes
// docs/benchmarks.md (`make bench`): provisioning against a plain-client
// baseline, API economy from the API server's audit log, the controller's
// memory and CPU, rollout time, and the gateway against a bare tuned
// reverse proxy. Every figure is printed next to its baseline and target.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/internal/controller"
	"github.com/userland-dev/userland/internal/simcluster"
	"github.com/userland-dev/userland/internal/testenv"
)

var execCommand = exec.Command

type options struct {
	sizes       []int
	steady      time.Duration
	wsCounts    []int
	out, bin    string
	loadFor     time.Duration
	rounds      int
	concurrency int
	gateway     bool
	rollout     bool
	keep        bool
	slowClients int
	class       classOptions
	// courseStudents is the size of the course-beside-plain scenario.
	courseStudents int
	// firstStatusWindow is the controller's --first-status-window in the
	// provisioning runs.
	firstStatusWindow time.Duration
	// workers is the controller's --workers in the provisioning runs (0:
	// the binary's default, which the chart's equals).
	workers int
	// pages is how many Userlands the list pages are timed at (0: not
	// at all), pagesStudents of them one course's.
	pages, pagesStudents int
	// large is the size of the 10,000-environment scenario (0: not run),
	// in each of largeNamespaces layouts; it runs alone.
	large           int
	budget          int
	budgetLead      time.Duration
	largeNamespaces []int
	// largeRolloutLimit stops the large scenario's rollout, which is
	// then reported as far as it got.
	largeRolloutLimit time.Duration
	// realWake times each real app's wake on a real node beside kwok;
	// onlyRealWake runs nothing else and prints its rows instead of
	// writing the report.
	realWake, onlyRealWake bool
	// classWarm is the size of the course whose class start runs cold and
	// warmed by its timetable (0: not run).
	classWarm int
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

func main() {
	ctrllog.SetLogger(logr.Discard()) // the clients' own logging is noise here
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "upstream":
			raiseFileLimit()
			fatal(serveUpstream())
		case "bareproxy":
			raiseFileLimit()
			fatal(serveBareProxy(os.Args[2]))
		}
	}
	var o options
	var sizes, ws, largeNS string
	flag.StringVar(&sizes, "n", "100,1000", "numbers of Userlands to provision, comma-separated")
	flag.DurationVar(&o.steady, "steady", 2*time.Minute, "steady-state window after convergence")
	flag.StringVar(&ws, "websockets", "1000,8000", "held WebSocket counts, comma-separated")
	flag.StringVar(&o.out, "out", "docs/benchmarks.md", "report to write")
	flag.StringVar(&o.bin, "bin", "bin/userland", "the userland binary (make build)")
	flag.DurationVar(&o.loadFor, "load-duration", 6*time.Second, "duration of each gateway load run")
	flag.IntVar(&o.rounds, "rounds", 5, "interleaved gateway load runs per target; medians and per-round ratios are reported")
	flag.IntVar(&o.concurrency, "concurrency", 32, "closed-loop load concurrency")
	flag.BoolVar(&o.gateway, "gateway", true, "run the gateway benchmarks")
	flag.BoolVar(&o.rollout, "rollout", true, "measure rollouts after provisioning")
	flag.IntVar(&o.slowClients, "slow-clients", 500, "slow anonymous clients held against the gateway (0: none)")
	flag.IntVar(&o.workers, "workers", 0, "the controller's --workers in the provisioning runs (0: the shipped default)")
	flag.DurationVar(&o.firstStatusWindow, "first-status-window", controller.DefaultFirstStatusWindow, "the controller's --first-status-window in the provisioning runs (the shipped default unless set)")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory (profiles, logs, audit log)")
	flag.IntVar(&o.pages, "pages", 0, "Userlands the admin and course pages are timed at, with no controller running (0: none; make bench-pages runs 10000)")
	flag.IntVar(&o.large, "large", 0, "Userlands of the large scenario, run alone on clusters of its own (0: none; make bench-10k runs 10000)")
	flag.IntVar(&o.budget, "budget", 0, "running environments of the budget scenario, run alone on a cluster of its own: steady-state writes and a weekly rollover (0: none; make bench-budget runs 1000)")
	flag.DurationVar(&o.budgetLead, "budget-lead", 5*time.Minute, "how long after the budget scenario's controller starts its clock reaches Monday 00:00 UTC")
	flag.DurationVar(&o.largeRolloutLimit, "large-rollout-limit", 20*time.Minute, "how long the large scenario's rollout may take before it is stopped and reported as far as it got")
	flag.StringVar(&largeNS, "large-namespaces", "1,50", "the large scenario's layouts: namespaces the Userlands are spread over, comma-separated")
	flag.IntVar(&o.pagesStudents, "pages-students", 2000, "of them, students of the one course whose page is timed")
	flag.BoolVar(&o.realWake, "real-wake", true, "time each real app's wake (stopped → first byte) on a real node beside kwok: Linux and root, with "+nodeDirEnv+", "+appImagesEnv+" and "+nodeImagesEnv+" set (make bench sets them); the report says why where it cannot run")
	flag.BoolVar(&o.onlyRealWake, "only-real-wake", false, "run only the real-node wake and print its rows (make bench BENCH_FLAGS=-only-real-wake); writes no report")
	var limits string
	flag.IntVar(&o.courseStudents, "course-students", 500, "students of the course provisioned beside as many plain Userlands (0: none)")
	flag.IntVar(&o.class.Students, "class-students", 500, "students in the class-start scenario (0: none)")
	flag.IntVar(&o.class.New, "class-new", 100, "of them, students whose environment is auto-provisioned at sign-in")
	flag.DurationVar(&o.class.Window, "class-window", time.Minute, "the class signs in within this")
	flag.DurationVar(&o.class.Steady, "class-steady", time.Minute, "steady-state window after the class start")
	flag.IntVar(&o.classWarm, "class-warm-students", 200, "students of the course whose class start runs cold and then warmed by its timetable (0: none)")
	flag.StringVar(&limits, "class-limits", "before,shipped,raised", "client limit sets the class start runs under, comma-separated: before, shipped, raised")
	flag.Parse()
	for _, l := range strings.Split(limits, ",") {
		if l = strings.TrimSpace(l); l != "" {
			o.class.Limits = append(o.class.Limits, l)
		}
	}
	var err error
	if o.sizes, err = parseInts(sizes); err != nil {
		fatal(err)
	}
	if o.wsCounts, err = parseInts(ws); err != nil {
		fatal(err)
	}
	if o.largeNamespaces, err = parseInts(largeNS); err != nil {
		fatal(err)
	}
	raiseFileLimit()
	fatal(run(o))
}

func fatal(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// gatewayHost is the gateway address the controller is told, which
// shapes the identity variables of both sides' pods.
const gatewayHost = "127.0.0.1:8000"

// provisionResult is one N.
type provisionResult struct {
	N                  int
	Baseline, Userland time.Duration
	Counts             map[string]int
	// ServerWrites and BaselineServerWrites are every client's writes
	// the API server served until all were Ready (Available).
	ServerWrites, BaselineServerWrites map[string]int
	SteadyWrites                       int
	PeakKiB, SettledKiB                int64
	CPUSeconds                         float64
	Rollout                            time.Duration
	// RolloutCPUSeconds is the controller's CPU during the rollout:
	// deciding, restart by restart, whether the template's budget has room.
	RolloutCPUSeconds float64
	SteadyWindow      time.Duration
	// CountsSettled is how long after the last Userland was Ready the
	// template's batched counts showed them all.
	CountsSettled time.Duration
	// Profiles are the top entries of CPU profiles taken while
	// provisioning: the API server's and the controller's.
	Profiles map[string]string
	// Throttle is the controller's wait on its client-side limit while
	// provisioning.
	Throttle histogram
	// Stages and BaselineStages are per-environment stage times
	// (percentiles), Userland's and the baseline's.
	Stages, BaselineStages []stageSpan
	// Queues are the controller's work queues while provisioning.
	Queues []queueStats
}

// wakeSamples is how many wakes are timed.
const wakeSamples = 5

func run(o options) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "userland-bench-")
	if err != nil {
		return err
	}
	if o.keep {
		logf("work directory (kept): %s", dir)
	} else {
		defer func() { _ = os.RemoveAll(dir) }()
	}
	bin, err := filepath.Abs(o.bin)
	if err != nil {
		return err
	}
	if o.onlyRealWake {
		return onlyRealWake(ctx, dir)
	}
	if o.budget > 0 {
		r, err := benchBudget(ctx, o.budget, o.budgetLead, time.Minute, dir)
		if err != nil {
			return err
		}
		return writeBudgetReport(o, r)
	}
	if o.large > 0 {
		large, err := benchLarge(ctx, o, dir, bin)
		if err != nil {
			return err
		}
		return writeLargeReport(o, large)
	}
	logf("starting the simulated cluster (4 kwok nodes) with an audit log")
	env, auditLog, err := startCluster(ctx, dir)
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	// A client that can watch, so waiting costs the API server nothing.
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		return err
	}
	for _, f := range []string{"role.yaml", "roles.yaml"} {
		if err := env.CreateFromFile(ctx, filepath.Join(testenv.RepoRoot(), "config", "rbac", f)); err != nil {
			return err
		}
	}
	ctrlCfg, err := env.CertConfigBoundTo(ctx, controllerUser, "userland-controller")
	if err != nil {
		return err
	}
	ctrlKubeconfig := filepath.Join(dir, "controller.kubeconfig")
	if err := kubeconfigFor(ctrlCfg, ctrlKubeconfig); err != nil {
		return err
	}
	pprofPort, err := simcluster.FreePort()
	if err != nil {
		return err
	}
	pprofAddr := fmt.Sprintf("127.0.0.1:%d", pprofPort)
	metricsPort, err := simcluster.FreePort()
	if err != nil {
		return err
	}
	ctrlMetrics := fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)
	// The chart's flags: its workers and client limits are the binary's
	// own defaults (internal/chartrender's test keeps them equal).
	ctrlArgs := []string{"controller",
		"--kubeconfig", ctrlKubeconfig, "--disable-webhooks", "--leader-elect=false",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort), "--metrics-secure=false", "--health-probe-bind-address=0",
		"--gateway-url=http://" + gatewayHost, "--gateway-namespace=userland-system",
		"--pprof-bind-address", pprofAddr, "--first-status-window", o.firstStatusWindow.String()}
	if o.workers > 0 {
		ctrlArgs = append(ctrlArgs, fmt.Sprintf("--workers=%d", o.workers))
	}
	ctrlProc, err := startProcess("controller", filepath.Join(dir, "controller.log"), bin, ctrlArgs...)
	if err != nil {
		return err
	}
	defer ctrlProc.stop()
	if err := waitHTTP(ctrlMetrics); err != nil {
		return err
	}
	pid := ctrlProc.cmd.Process.Pid

	var results []provisionResult
	for _, n := range o.sizes {
		r := provisionResult{N: n, SteadyWindow: o.steady}
		logf("N=%d: baseline (Deployments + Services from a plain client)", n)
		w0, err := serverWrites(env)
		if err != nil {
			return err
		}
		baseStages := newStages()
		if r.Baseline, err = baseline(ctx, c, n, baseStages); err != nil {
			return err
		}
		w1, err := serverWrites(env)
		if err != nil {
			return err
		}
		r.BaselineServerWrites = since(w0, w1)
		r.BaselineStages = baseStages.baselineSpans()
		logf("N=%d: baseline ready in %s; deleting it", n, r.Baseline.Round(time.Millisecond))
		took, err := deleteNamespace(ctx, c, fmt.Sprintf("baseline-%d", n))
		if err != nil {
			return err
		}
		logf("N=%d: baseline deleted in %s; now Userlands", n, took.Round(time.Millisecond))
		cpu0 := cpuSeconds(pid)
		t0 := time.Now()
		ns := fmt.Sprintf("userland-%d", n)
		var profiles chan map[string]string
		if n == o.sizes[len(o.sizes)-1] {
			// The largest run is profiled a few seconds in, for 20 s.
			profiles = make(chan map[string]string, 1)
			go func() { profiles <- takeProfiles(env, "http://"+pprofAddr, dir, 3*time.Second, 20*time.Second) }()
		}
		w2, err := serverWrites(env)
		if err != nil {
			return err
		}
		m0, err := scrape(ctrlMetrics)
		if err != nil {
			return err
		}
		ulStages := newStages()
		queues := sampleQueues(ctrlMetrics, 500*time.Millisecond)
		r.Userland, err = provision(ctx, c, ns, n, ulStages)
		if err != nil {
			return err
		}
		r.Stages = ulStages.userlandSpans()
		for _, sp := range append(r.Stages, r.BaselineStages...) {
			logf("N=%d: %s", n, sp)
		}
		m1, err := scrape(ctrlMetrics)
		if err != nil {
			return err
		}
		r.Queues = queues.stop(m0, m1)
		r.Throttle = histogramOf(m1, "rest_client_rate_limiter_duration_seconds", nil).minus(histogramOf(m0, "rest_client_rate_limiter_duration_seconds", nil))
		w3, err := serverWrites(env)
		if err != nil {
			return err
		}
		r.ServerWrites = since(w2, w3)
		if profiles != nil {
			r.Profiles = <-profiles
		}
		t1 := time.Now()
		r.CPUSeconds = cpuSeconds(pid) - cpu0
		_, r.PeakKiB = memory(pid)
		logf("N=%d: Userlands ready in %s; steady state for %s", n, r.Userland.Round(time.Millisecond), o.steady)
		// The template's counts are written in batches; the steady window
		// starts once they show every Userland Ready, and the writes that
		// got them there are counted with provisioning.
		if err := waitTemplateCounts(ctx, c, ns, n); err != nil {
			return err
		}
		r.CountsSettled = time.Since(t1)
		time.Sleep(2 * time.Second) // audit entries of the last requests
		if r.Counts, err = apiCounts(auditLog, controllerUser, t0, time.Now()); err != nil {
			return err
		}
		ts := time.Now()
		time.Sleep(o.steady)
		steady, err := apiCounts(auditLog, controllerUser, ts, ts.Add(o.steady))
		if err != nil {
			return err
		}
		r.SteadyWrites = writes(steady)
		var peak int64
		r.SettledKiB, peak = memory(pid)
		r.PeakKiB = max(r.PeakKiB, peak)
		if o.rollout {
			logf("N=%d: rollout of an image change (Immediate, maxUnavailable 25%%)", n)
			cpu0 := cpuSeconds(pid)
			if r.Rollout, err = rollout(ctx, c, ns, n); err != nil {
				return err
			}
			r.RolloutCPUSeconds = cpuSeconds(pid) - cpu0
			logf("N=%d: rollout done in %s (controller CPU %.1f s)", n, r.Rollout.Round(time.Millisecond), r.RolloutCPUSeconds)
		}
		results = append(results, r)
	}
	var crs *courseResult
	if o.courseStudents > 0 {
		logf("a course of %d students beside %d plain Userlands", o.courseStudents, o.courseStudents)
		r, err := courseBeside(ctx, c, o.courseStudents, pid, auditLog)
		if err != nil {
			return err
		}
		logf("plain Userlands Ready in %s; course provisioned in %s", r.PlainReady.Round(time.Millisecond), r.CourseProvisioned.Round(time.Millisecond))
		crs = &r
		if _, err := deleteNamespace(ctx, c, fmt.Sprintf("course-%d", r.N)); err != nil {
			return err
		}
	}
	var gw *gatewayResult
	if o.gateway {
		if gw, err = benchGateway(ctx, o, env, dir, bin, auditLog); err != nil {
			return err
		}
	}
	var pages *pagesResult
	if o.pages > 0 {
		// The pages need the objects, not their pods: without a
		// controller the cluster holds only what the pages list.
		ctrlProc.stop()
		if pages, err = benchPages(ctx, env, c, dir, bin, o.pages, min(o.pagesStudents, o.pages)); err != nil {
			return err
		}
		if o.class.Students > 0 {
			logf("pages: deleting their namespaces before the class start")
			if err := deletePagesNamespaces(ctx, c); err != nil {
				return err
			}
		}
	}
	var class []classResult
	var warm []classWarmResult
	if o.class.Students > 0 || o.classWarm > 0 {
		// Each run of these scenarios starts a controller of its own.
		ctrlProc.stop()
		up, upAddr, err := child("upstream")
		if err != nil {
			return err
		}
		defer up.stop()
		if o.class.Students > 0 {
			if class, err = classStart(ctx, o.class, env, c, dir, bin, auditLog, upAddr); err != nil {
				return err
			}
		}
		if o.classWarm > 0 {
			if warm, err = classWarm(ctx, o.classWarm, o.class.Window, env, c, dir, bin, upAddr); err != nil {
				return err
			}
		}
	}
	var rw *realWakeResult
	if o.realWake {
		// Its own stacks, with the controller of this run stopped.
		ctrlProc.stop()
		rw = benchRealWake(ctx, dir)
	}
	if err := writeReport(o, results, gw, class, warm, crs, pages, rw); err != nil {
		return err
	}
	if rw != nil {
		if err := rw.failed(); err != nil {
			return fmt.Errorf("the real-node wake failed (the report says where): %w", err)
		}
	}
	return nil
}

// onlyRealWake is -only-real-wake: the real-node wake's rows, printed.
func onlyRealWake(ctx context.Context, dir string) error {
	rw := benchRealWake(ctx, dir)
	p := func(format string, args ...any) { fmt.Printf(format+"\n", args...) }
	p("| area | target | measured | baseline (same run) | ratio | verdict |")
	p("|---|---|---|---|---|---|")
	realWakeTargets(p, rw)
	realWakeSection(p, rw)
	if rw.NotRun != "" {
		return fmt.Errorf("the real-node wake was NOT RUN: %s", rw.NotRun)
	}
	return rw.failed()
}

func waitHTTP(u string) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		resp, err := http.Get(u)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s never answered 200", u)
}

func machine() string {
	mem := ""
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		fields := strings.Fields(strings.SplitN(string(data), "\n", 2)[0])
		if len(fields) >= 2 {
			kib, _ := strconv.ParseInt(fields[1], 10, 64)
			mem = fmt.Sprintf("%.1f GiB", float64(kib)/(1<<20))
		}
	}
	return fmt.Sprintf("%d cores, %s memory, %s/%s, %s", runtime.NumCPU(), mem, runtime.GOOS, runtime.GOARCH, runtime.Version())
}
