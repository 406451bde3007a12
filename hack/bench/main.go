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

	"golang.org/x/crypto/bcrypt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
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
	var sizes, ws string
	flag.StringVar(&sizes, "n", "100,1000", "numbers of Userlands to provision, comma-separated")
	flag.DurationVar(&o.steady, "steady", 2*time.Minute, "steady-state window after convergence")
	flag.StringVar(&ws, "websockets", "1000,8000", "held WebSocket counts, comma-separated")
	flag.StringVar(&o.out, "out", "docs/benchmarks.md", "report to write")
	flag.StringVar(&o.bin, "bin", "bin/userland", "the userland binary (make build)")
	flag.DurationVar(&o.loadFor, "load-duration", 6*time.Second, "duration of each gateway load run")
	flag.IntVar(&o.rounds, "rounds", 3, "interleaved gateway load runs per target; the median is reported")
	flag.IntVar(&o.concurrency, "concurrency", 32, "closed-loop load concurrency")
	flag.BoolVar(&o.gateway, "gateway", true, "run the gateway benchmarks")
	flag.BoolVar(&o.rollout, "rollout", true, "measure rollouts after provisioning")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory (profiles, logs, audit log)")
	flag.Parse()
	var err error
	if o.sizes, err = parseInts(sizes); err != nil {
		fatal(err)
	}
	if o.wsCounts, err = parseInts(ws); err != nil {
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
	SteadyWindow                       time.Duration
	// CountsSettled is how long after the last Userland was Ready the
	// template's batched counts showed them all.
	CountsSettled time.Duration
	// Profiles are the top entries of CPU profiles taken while
	// provisioning: the API server's and the controller's.
	Profiles map[string]string
}

type gatewayResult struct {
	Small, Big                  map[string]loadResult
	Half                        map[string]loadResult
	HalfRate                    float64
	WebSockets                  map[int]map[string]wsResult
	ActivityRecorded            bool
	GatewayPeakKiB, BarePeakKiB int64
	// Profile is the top of the gateway's CPU profile under small GETs.
	Profile string
	// Wakes are requests to an idle-stopped environment.
	Wakes []wakeSample
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
	const controllerUser = "bench-controller"
	ctrlCfg, err := env.CertConfigBoundTo(ctx, controllerUser, "userland-controller")
	if err != nil {
		return err
	}
	ctrlKubeconfig := filepath.Join(dir, "controller.kubeconfig")
	if err := kubeconfigFor(ctrlCfg, ctrlKubeconfig); err != nil {
		return err
	}
	pprofPort, err := freePort()
	if err != nil {
		return err
	}
	pprofAddr := fmt.Sprintf("127.0.0.1:%d", pprofPort)
	ctrlProc, err := startProcess("controller", filepath.Join(dir, "controller.log"), bin, "controller",
		"--kubeconfig", ctrlKubeconfig, "--disable-webhooks", "--leader-elect=false",
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--workers=16",
		"--kube-api-qps=500", "--kube-api-burst=1000", "--gateway-url=http://"+gatewayHost, "--gateway-namespace=userland-system",
		"--pprof-bind-address", pprofAddr)
	if err != nil {
		return err
	}
	defer ctrlProc.stop()
	pid := ctrlProc.cmd.Process.Pid

	var results []provisionResult
	for _, n := range o.sizes {
		r := provisionResult{N: n, SteadyWindow: o.steady}
		logf("N=%d: baseline (Deployments + Services from a plain client)", n)
		w0, err := serverWrites(env)
		if err != nil {
			return err
		}
		if r.Baseline, err = baseline(ctx, c, n); err != nil {
			return err
		}
		w1, err := serverWrites(env)
		if err != nil {
			return err
		}
		r.BaselineServerWrites = since(w0, w1)
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
		if r.Userland, err = provision(ctx, c, ns, n); err != nil {
			return err
		}
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
			if r.Rollout, err = rollout(ctx, c, ns, n); err != nil {
				return err
			}
			logf("N=%d: rollout done in %s", n, r.Rollout.Round(time.Millisecond))
		}
		results = append(results, r)
	}
	var gw *gatewayResult
	if o.gateway {
		if gw, err = benchGateway(ctx, o, env, dir, bin, auditLog); err != nil {
			return err
		}
	}
	return writeReport(o, results, gw)
}

func benchGateway(ctx context.Context, o options, env *testenv.Environment, dir, bin, auditLog string) (*gatewayResult, error) {
	res := &gatewayResult{Small: map[string]loadResult{}, Big: map[string]loadResult{}, Half: map[string]loadResult{}, WebSockets: map[int]map[string]wsResult{}}
	up, upAddr, err := child("upstream")
	if err != nil {
		return nil, err
	}
	defer up.stop()
	bare, bareAddr, err := child("bareproxy", upAddr)
	if err != nil {
		return nil, err
	}
	defer func() { bare.stop() }()

	// One signed-in user with a Ready environment.
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		return nil, err
	}
	if err := namespace(ctx, c, "gw"); err != nil {
		return nil, err
	}
	gwTemplate := benchTemplate("gw")
	// Long enough that the load runs never stop it; wakes are measured by
	// moving its last activity back instead of waiting.
	gwTemplate.Spec.Idle = &v1alpha1.IdleSpec{Timeout: metav1.Duration{Duration: 10 * time.Minute}}
	if err := c.Create(ctx, gwTemplate); err != nil {
		return nil, err
	}
	ul := &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: "gw", Name: "bench"},
		Spec: v1alpha1.UserlandSpec{User: "bench", TemplateRef: v1alpha1.TemplateReference{Name: "app"}}}
	if err := c.Create(ctx, ul); err != nil {
		return nil, err
	}
	if err := waitUserlands(ctx, c, "gw", 1, func(u *v1alpha1.Userland) bool { return u.Status.Phase == v1alpha1.PhaseReady }); err != nil {
		return nil, err
	}
	hash, _ := bcrypt.GenerateFromPassword([]byte("bench-pw"), bcrypt.MinCost)
	users := filepath.Join(dir, "users.yaml")
	if err := os.WriteFile(users, []byte("users:\n  - name: bench\n    passwordHash: "+string(hash)+"\n"), 0o600); err != nil {
		return nil, err
	}
	keys := filepath.Join(dir, "session.keys")
	if err := os.WriteFile(keys, []byte(strings.Repeat("A", 86)+"==\n"), 0o600); err != nil {
		return nil, err
	}
	gwCfg, err := env.CertConfigBoundTo(ctx, "bench-gateway", "userland-gateway")
	if err != nil {
		return nil, err
	}
	gwKubeconfig := filepath.Join(dir, "gateway.kubeconfig")
	if err := kubeconfigFor(gwCfg, gwKubeconfig); err != nil {
		return nil, err
	}
	pprofPort, err := freePort()
	if err != nil {
		return nil, err
	}
	gwPprof := fmt.Sprintf("127.0.0.1:%d", pprofPort)
	startGateway := func() (*process, string, error) {
		port, err := freePort()
		if err != nil {
			return nil, "", err
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		p, err := startProcess("gateway", filepath.Join(dir, "gateway.log"), bin, "gateway",
			"--kubeconfig", gwKubeconfig, "--listen", addr, "--metrics-bind-address=0",
			"--auth-mode=static", "--static-users-file", users, "--session-keys-file", keys, "--insecure-cookies",
			"--static-upstream", upAddr, "--activity-interval=1m", "--pprof-bind-address", gwPprof)
		if err != nil {
			return nil, "", err
		}
		if err := waitHTTP("http://" + addr + "/readyz"); err != nil {
			p.stop()
			return nil, "", err
		}
		return p, addr, nil
	}
	gwProc, gwAddr, err := startGateway()
	if err != nil {
		return nil, err
	}
	defer func() { gwProc.stop() }()
	cookie, err := signIn("http://"+gwAddr, "bench", "bench-pw")
	if err != nil {
		return nil, err
	}
	targets := map[string]string{
		"direct":  "http://" + upAddr,
		"bare":    "http://" + bareAddr,
		"gateway": "http://" + gwAddr + "/u/gw/bench",
	}
	order := []string{"direct", "bare", "gateway"}
	cookieFor := func(name string) string {
		if name == "gateway" {
			return cookie
		}
		return ""
	}
	logf("gateway: closed loop, %d workers, %d rounds of %s per target", o.concurrency, o.rounds, o.loadFor)
	profiled := false
	res.Small = interleaved(o.rounds, order, func(name string) loadResult {
		var profile chan string
		if name == "gateway" && !profiled {
			// Profiled from a second in, for most of the first round.
			profiled = true
			profile = make(chan string, 1)
			go func() {
				time.Sleep(time.Second)
				profile <- cpuProfile(http.DefaultClient, "http://"+gwPprof, filepath.Join(dir, "gateway.pprof"), o.loadFor-2*time.Second)
			}()
		}
		r := load(targets[name]+"/small", cookieFor(name), o.concurrency, 0, o.loadFor)
		if profile != nil {
			res.Profile = <-profile
		}
		return r
	}, func(r loadResult) float64 { return r.RPS })
	res.Big = interleaved(o.rounds, order, func(name string) loadResult {
		return load(targets[name]+"/big", cookieFor(name), o.concurrency/4, 0, o.loadFor)
	}, func(r loadResult) float64 { return r.RPS })
	res.HalfRate = res.Small["gateway"].RPS / 2
	logf("gateway: open loop at %.0f req/s, %d rounds of %s per target", res.HalfRate, o.rounds, o.loadFor)
	res.Half = interleaved(o.rounds, order, func(name string) loadResult {
		return load(targets[name]+"/small", cookieFor(name), o.concurrency, res.HalfRate, o.loadFor)
	}, func(r loadResult) float64 { return float64(r.P99) })
	var after v1alpha1.Userland
	if err := c.Get(ctx, client.ObjectKey{Namespace: "gw", Name: "bench"}, &after); err == nil {
		res.ActivityRecorded = after.Status.LastActivityTime != nil
	}
	_, res.GatewayPeakKiB = memory(gwProc.cmd.Process.Pid)
	_, res.BarePeakKiB = memory(bare.cmd.Process.Pid)
	// WebSockets are held by fresh processes, so the memory they add is not
	// hidden in heap the load runs left behind.
	gwProc.stop()
	bare.stop()
	if bare, bareAddr, err = child("bareproxy", upAddr); err != nil {
		return nil, err
	}
	if gwProc, gwAddr, err = startGateway(); err != nil {
		return nil, err
	}
	// Wakes first, while the fresh gateway has no activity left to record.
	logf("gateway: %d wakes of an idle-stopped environment", wakeSamples)
	if res.Wakes, err = measureWakes(ctx, c, auditLog, "http://"+gwAddr+"/u/gw/bench", cookie, client.ObjectKey{Namespace: "gw", Name: "bench"}, wakeSamples); err != nil {
		return nil, err
	}
	for _, n := range o.wsCounts {
		res.WebSockets[n] = map[string]wsResult{}
		logf("gateway: %d WebSockets through the bare proxy", n)
		res.WebSockets[n]["bare"] = holdWebSockets(ctx, "ws://"+bareAddr+"/ws", "", bare.cmd.Process.Pid, n, 20*time.Second)
		logf("gateway: %d WebSockets through the gateway", n)
		res.WebSockets[n]["gateway"] = holdWebSockets(ctx, "ws://"+gwAddr+"/u/gw/bench/ws", cookie, gwProc.cmd.Process.Pid, n, 20*time.Second)
		time.Sleep(3 * time.Second)
	}
	return res, nil
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
