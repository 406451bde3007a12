package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/naming"
	"github.com/userland-dev/userland/internal/simcluster"
	"github.com/userland-dev/userland/internal/testenv"
)

// gatewayResult is everything measured of the gateway.
type gatewayResult struct {
	// Small, Big and Half are each target's median run; SmallRatio and
	// BigRatio the median per-round throughput against the bare proxy.
	Small, Big map[string]loadResult
	Half       map[string]loadResult
	// HalfErrors is every half-load round's errors per target, by kind.
	HalfErrors           map[string]map[string]int
	SmallRatio, BigRatio map[string]float64
	// SmallCPU is each target's median, over rounds, of the serving
	// process's CPU time per small GET.
	SmallCPU   map[string]time.Duration
	HalfRate   float64
	WebSockets map[int]map[string]wsResult
	// ActivityRecorded is whether each routed environment's last activity
	// was written by the end of the load runs.
	ActivityRecorded            map[string]bool
	GatewayPeakKiB, BarePeakKiB int64
	// Profiles are the tops of the gateway's CPU profiles under small GETs,
	// by target (path and subdomain routing).
	Profiles map[string]string
	// Wakes are requests to an idle-stopped environment.
	Wakes []wakeSample
	// Slow is the gateway under slow anonymous clients.
	Slow *slowResult
	// Roster is the authorization cost of a roster import.
	Roster *rosterResult
}

// Targets of the load runs, in the order each round runs them.
const (
	targetDirect    = "direct"
	targetBare      = "bare"
	targetPath      = "gateway"
	targetSubdomain = "subdomain"
)

var targetOrder = []string{targetDirect, targetBare, targetPath, targetSubdomain}

// The main host and the environment domain the gateway is started with;
// every host is dialled at the gateway's own loopback address.
const (
	benchMainHost  = "userland.bench.test"
	benchEnvDomain = "apps.bench.test"
)

// benchGateway measures the gateway against the bare proxy and the upstream
// itself: one user with two Ready environments, one routed by path on the
// main host and one on its own host under the environment domain.
func benchGateway(ctx context.Context, o options, env *testenv.Environment, dir, bin string, auditLog string) (*gatewayResult, error) {
	res := &gatewayResult{Small: map[string]loadResult{}, Big: map[string]loadResult{}, Half: map[string]loadResult{},
		WebSockets: map[int]map[string]wsResult{}, ActivityRecorded: map[string]bool{}, Profiles: map[string]string{}}
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

	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		return nil, err
	}
	if err := gatewayUserlands(ctx, c); err != nil {
		return nil, err
	}
	gw, err := newBenchGateway(ctx, env, dir, bin, upAddr)
	if err != nil {
		return nil, err
	}
	gwProc, gwAddr, err := gw.start()
	if err != nil {
		return nil, err
	}
	defer func() { gwProc.stop() }()
	_, port, _ := strings.Cut(gwAddr, ":")
	mainHost := benchMainHost + ":" + port
	envHost := naming.HostLabel("gw", "sub") + "." + benchEnvDomain + ":" + port
	sessionCookie, envCookie, err := signInHosts(gwAddr, mainHost, envHost, "bench", "bench-pw")
	if err != nil {
		return nil, err
	}
	targets := map[string]target{
		targetDirect:    {URL: "http://" + upAddr},
		targetBare:      {URL: "http://" + bareAddr},
		targetPath:      {URL: "http://" + gwAddr + "/u/gw/bench", Host: mainHost, Cookie: sessionCookie},
		targetSubdomain: {URL: "http://" + gwAddr, Host: envHost, Cookie: envCookie},
	}
	at := func(name, path string) target { t := targets[name]; t.URL += path; return t }

	logf("gateway: closed loop, %d workers, %d rounds of %s per target", o.concurrency, o.rounds, o.loadFor)
	pids := map[string]int{targetDirect: up.cmd.Process.Pid, targetBare: bare.cmd.Process.Pid,
		targetPath: gwProc.cmd.Process.Pid, targetSubdomain: gwProc.cmd.Process.Pid}
	small := interleaved(o.rounds, targetOrder, func(name string) loadResult {
		before := cpuSeconds(pids[name])
		r := load(at(name, "/small"), o.concurrency, 0, o.loadFor)
		r.ServerCPU = time.Duration((cpuSeconds(pids[name]) - before) * float64(time.Second))
		return r
	})
	// Profiled in runs of their own, after the scored rounds: the
	// profiler's own cost must not fall on a round the ratios count.
	for _, name := range []string{targetPath, targetSubdomain} {
		profile := make(chan string, 1)
		go func() {
			time.Sleep(time.Second)
			profile <- cpuProfile(http.DefaultClient, "http://"+gw.pprof, filepath.Join(dir, "gateway-"+name+".pprof"), o.loadFor-2*time.Second)
		}()
		load(at(name, "/small"), o.concurrency, 0, o.loadFor)
		res.Profiles[name] = <-profile
	}
	big := interleaved(o.rounds, targetOrder, func(name string) loadResult {
		return load(at(name, "/big"), o.concurrency/4, 0, o.loadFor)
	})
	rps := func(r loadResult) float64 { return r.RPS }
	res.Small, res.Big = medians(small, rps), medians(big, rps)
	res.SmallCPU = map[string]time.Duration{}
	for name, runs := range small {
		res.SmallCPU[name] = medianBy(runs, func(r loadResult) float64 { return float64(r.CPUPerRequest()) }).CPUPerRequest()
	}
	res.SmallRatio, res.BigRatio = map[string]float64{}, map[string]float64{}
	for _, name := range targetOrder {
		res.SmallRatio[name] = pairedRatio(small[name], small[targetBare])
		res.BigRatio[name] = pairedRatio(big[name], big[targetBare])
	}
	res.HalfRate = res.Small[targetPath].RPS / 2
	logf("gateway: open loop at %.0f req/s, %d rounds of %s per target", res.HalfRate, o.rounds, o.loadFor)
	halfRuns := interleaved(o.rounds, targetOrder, func(name string) loadResult {
		return load(at(name, "/small"), o.concurrency, res.HalfRate, o.loadFor)
	})
	res.Half = medians(halfRuns, func(r loadResult) float64 { return float64(r.P99) })
	res.HalfErrors = map[string]map[string]int{}
	for name, runs := range halfRuns {
		for _, r := range runs {
			res.HalfErrors[name] = addKinds(res.HalfErrors[name], r.ErrorKinds)
		}
	}
	for name, key := range map[string]string{targetPath: "bench", targetSubdomain: "sub"} {
		var after v1alpha1.Userland
		if err := c.Get(ctx, client.ObjectKey{Namespace: "gw", Name: key}, &after); err == nil {
			res.ActivityRecorded[name] = after.Status.LastActivityTime != nil
		}
	}
	_, res.GatewayPeakKiB = memory(gwProc.cmd.Process.Pid)
	_, res.BarePeakKiB = memory(bare.cmd.Process.Pid)
	// What follows is measured on fresh processes, so the memory it adds
	// is not hidden in heap the load runs left behind.
	gwProc.stop()
	bare.stop()
	if bare, bareAddr, err = child("bareproxy", upAddr); err != nil {
		return nil, err
	}
	if gwProc, gwAddr, err = gw.start(); err != nil {
		return nil, err
	}
	_, port, _ = strings.Cut(gwAddr, ":")
	mainHost = benchMainHost + ":" + port
	if o.slowClients > 0 {
		logf("gateway: %d slow anonymous clients", o.slowClients)
		probe := target{URL: "http://" + gwAddr + "/u/gw/bench/small", Host: mainHost, Cookie: sessionCookie}
		res.Slow = slowClients(ctx, gwAddr, mainHost, gwProc.cmd.Process.Pid, o.slowClients, probe)
		gwProc.stop()
		if gwProc, gwAddr, err = gw.start(); err != nil {
			return nil, err
		}
	}
	logf("gateway: %d roster imports of %d rows", rosterRounds, rosterRows)
	_, port, _ = strings.Cut(gwAddr, ":")
	if res.Roster, err = benchRosterImport(ctx, c, gwAddr, benchMainHost+":"+port, sessionCookie, auditLog); err != nil {
		return nil, err
	}
	// Wakes first, while the fresh gateway has no activity left to record.
	logf("gateway: %d wakes of an idle-stopped environment", wakeSamples)
	if res.Wakes, err = measureWakes(ctx, c, auditLog, "http://"+gwAddr+"/u/gw/bench", sessionCookie, client.ObjectKey{Namespace: "gw", Name: "bench"}, wakeSamples); err != nil {
		return nil, err
	}
	for _, n := range o.wsCounts {
		res.WebSockets[n] = map[string]wsResult{}
		logf("gateway: %d WebSockets through the bare proxy", n)
		res.WebSockets[n][targetBare] = holdWebSockets(ctx, "ws://"+bareAddr+"/ws", "", bare.cmd.Process.Pid, n, 20*time.Second)
		logf("gateway: %d WebSockets through the gateway", n)
		res.WebSockets[n][targetPath] = holdWebSockets(ctx, "ws://"+gwAddr+"/u/gw/bench/ws", sessionCookie, gwProc.cmd.Process.Pid, n, 20*time.Second)
		time.Sleep(3 * time.Second)
	}
	return res, nil
}

// gatewayUserlands creates the gateway's user and its two environments,
// "bench" routed by path and "sub" on its own host, and waits until both
// are Ready.
func gatewayUserlands(ctx context.Context, c client.WithWatch) error {
	if err := namespace(ctx, c, "gw"); err != nil {
		return err
	}
	for name, routing := range map[string]v1alpha1.Routing{"app": v1alpha1.RoutingPath, "app-sub": v1alpha1.RoutingSubdomain} {
		t := benchTemplate("gw")
		t.Name = name
		t.Spec.HTTP.Routing = routing
		// Long enough that the load runs never stop it; wakes are measured
		// by moving its last activity back instead of waiting.
		t.Spec.Idle = &v1alpha1.IdleSpec{Timeout: metav1.Duration{Duration: 10 * time.Minute}}
		if err := c.Create(ctx, t); err != nil {
			return err
		}
	}
	for name, tmpl := range map[string]string{"bench": "app", "sub": "app-sub"} {
		ul := &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: "gw", Name: name},
			Spec: v1alpha1.UserlandSpec{User: "bench", TemplateRef: v1alpha1.TemplateReference{Name: tmpl}}}
		if err := c.Create(ctx, ul); err != nil {
			return err
		}
	}
	return waitUserlands(ctx, c, "gw", 2, func(u *v1alpha1.Userland) bool { return u.Status.Phase == v1alpha1.PhaseReady })
}

// benchGatewayProcess starts gateways that sign the bench user in, reach the
// cluster with a certificate of their own and proxy to the bench upstream.
type benchGatewayProcess struct {
	args  []string
	bin   string
	log   string
	pprof string
}

func newBenchGateway(ctx context.Context, env *testenv.Environment, dir, bin, upAddr string) (*benchGatewayProcess, error) {
	hash, _ := bcrypt.GenerateFromPassword([]byte("bench-pw"), bcrypt.MinCost)
	users := filepath.Join(dir, "users.yaml")
	if err := os.WriteFile(users, []byte("users:\n  - name: bench\n    passwordHash: "+string(hash)+"\n"), 0o600); err != nil {
		return nil, err
	}
	keys := filepath.Join(dir, "session.keys")
	if err := os.WriteFile(keys, []byte(strings.Repeat("A", 86)+"==\n"), 0o600); err != nil {
		return nil, err
	}
	cfg, err := env.CertConfigBoundTo(ctx, "bench-gateway", "userland-gateway")
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "gateway.kubeconfig")
	if err := kubeconfigFor(cfg, kubeconfig); err != nil {
		return nil, err
	}
	pprofPort, err := simcluster.FreePort()
	if err != nil {
		return nil, err
	}
	return &benchGatewayProcess{bin: bin, log: filepath.Join(dir, "gateway.log"), pprof: fmt.Sprintf("127.0.0.1:%d", pprofPort), args: []string{
		"--kubeconfig", kubeconfig, "--metrics-bind-address=0",
		"--auth-mode=static", "--static-users-file", users, "--session-keys-file", keys, "--insecure-cookies",
		"--static-upstream", upAddr, "--activity-interval=1m",
		// One user holds every WebSocket the benchmark opens; the per-user
		// cap (64 by default) would refuse all but the first.
		"--max-websockets-per-user=0",
	}}, nil
}

// start runs a gateway on a free port, its main host and environment
// domain on that port, and waits until it is ready.
func (g *benchGatewayProcess) start() (*process, string, error) {
	port, err := simcluster.FreePort()
	if err != nil {
		return nil, "", err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	args := append([]string{"gateway", "--listen", addr, "--pprof-bind-address", g.pprof,
		"--public-url", fmt.Sprintf("http://%s:%d", benchMainHost, port), "--base-domain", benchEnvDomain}, g.args...)
	p, err := startProcess("gateway", g.log, g.bin, args...)
	if err != nil {
		return nil, "", err
	}
	if err := waitHTTP("http://" + addr + "/readyz"); err != nil {
		p.stop()
		return nil, "", err
	}
	return p, addr, nil
}
