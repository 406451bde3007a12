package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/crypto/bcrypt"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/apilimits"
	"github.com/userland-dev/userland/internal/controller"
	"github.com/userland-dev/userland/internal/naming"
	"github.com/userland-dev/userland/internal/simcluster"
	"github.com/userland-dev/userland/internal/testenv"
)

// classLimits is one set of client-side limits a class start runs under.
type classLimits struct {
	Key, Name                     string
	ControllerQPS, GatewayQPS     float32
	ControllerBurst, GatewayBurst int
}

// classLimitSets are the limits the scenario can run under: what shipped
// before this benchmark existed, what ships, and none at all (the API
// server's priority and fairness alone).
var classLimitSets = map[string]classLimits{
	"before":  {Key: "before", Name: "before (controller 50/100, gateway client-go's 5/10)", ControllerQPS: 50, ControllerBurst: 100, GatewayQPS: 5, GatewayBurst: 10},
	"shipped": {Key: "shipped", Name: fmt.Sprintf("shipped (controller %v/%d, gateway %v/%d)", apilimits.ControllerQPS, apilimits.ControllerBurst, apilimits.GatewayQPS, apilimits.GatewayBurst), ControllerQPS: apilimits.ControllerQPS, ControllerBurst: apilimits.ControllerBurst, GatewayQPS: apilimits.GatewayQPS, GatewayBurst: apilimits.GatewayBurst},
	"raised":  {Key: "raised", Name: "raised (no client-side limit)", ControllerQPS: -1, GatewayQPS: -1},
}

// classOptions shape the scenario.
type classOptions struct {
	// Students sign in within Window; New of them have no environment yet.
	Students, New int
	Window        time.Duration
	// Steady is the window after the storm in which writes are counted.
	Steady time.Duration
	Limits []string
}

// The chart's gateway settings the scenario keeps.
const (
	classActivityInterval = time.Minute
	classPassword         = "class-pw"
	gatewayUser           = "bench-gateway"
	controllerUser        = "bench-controller"
)

// classResult is one run of the scenario.
type classResult struct {
	Limits   classLimits
	Students []studentRun
	// Spread is from the first sign-in to the last; Storm from the first
	// sign-in to the last first byte.
	Spread, Storm time.Duration
	// Writes are each client's writes during the storm (from the audit
	// log); ServerWrites every client's, from the API server's counter.
	Writes       map[string]rate
	ServerWrites rate
	// Latency is the API server's time to serve each client's writes.
	Latency map[string]summary
	// Throttle is each client's rest_client_rate_limiter_duration_seconds
	// over the storm; Requests its rest_client_request_duration_seconds.
	Throttle, Requests map[string]histogram
	PeakKiB            map[string]int64
	CPUSeconds         map[string]float64
	SteadyWrites       int
	SteadyWindow       time.Duration
}

// classStart runs the scenario once per limit set, each with a fresh
// controller and gateway and a namespace of its own.
func classStart(ctx context.Context, o classOptions, env *testenv.Environment, c client.WithWatch, dir, bin, auditLog, upAddr string) ([]classResult, error) {
	var out []classResult
	for _, key := range o.Limits {
		limits, ok := classLimitSets[key]
		if !ok {
			return nil, fmt.Errorf("unknown limit set %q (before, shipped, raised)", key)
		}
		logf("class start, %s: %d students within %s, %d of them new", limits.Name, o.Students, o.Window, o.New)
		r, err := classRun(ctx, o, limits, env, c, dir, bin, auditLog, upAddr)
		if err != nil {
			return nil, fmt.Errorf("class start (%s): %w", key, err)
		}
		out = append(out, *r)
	}
	return out, nil
}

func studentName(i int) string { return fmt.Sprintf("s%03d", i) }

func classRun(ctx context.Context, o classOptions, limits classLimits, env *testenv.Environment, c client.WithWatch, dir, bin, auditLog, upAddr string) (*classResult, error) {
	ns := "class-" + limits.Key
	ref := v1alpha1.TemplateReference{Name: "lab"}
	returning := o.Students - o.New
	if err := namespace(ctx, c, ns); err != nil {
		return nil, err
	}
	tmpl := benchTemplate(ns)
	tmpl.Name = ref.Name
	// Long enough that nothing stops during the run.
	tmpl.Spec.Idle = &v1alpha1.IdleSpec{Timeout: metav1.Duration{Duration: 30 * time.Minute}}
	tmpl.Spec.AutoProvision = &v1alpha1.AutoProvisionSpec{}
	for i := returning; i < o.Students; i++ {
		tmpl.Spec.AutoProvision.Users = append(tmpl.Spec.AutoProvision.Users, studentName(i))
	}
	if err := c.Create(ctx, tmpl); err != nil {
		return nil, err
	}
	ctrl, ctrlMetrics, err := startClassController(ctx, env, dir, bin, limits)
	if err != nil {
		return nil, err
	}
	defer ctrl.stop()
	logf("  %d returning students' environments: created, Ready, then stopped for idleness", returning)
	if err := stoppedForIdleness(ctx, c, ns, ref, returning); err != nil {
		return nil, err
	}
	gw, gwMetrics, gwAddr, err := startClassGateway(ctx, env, dir, bin, upAddr, limits, o.Students)
	if err != nil {
		return nil, err
	}
	defer gw.stop()
	pods := &podWatch{times: map[string]podTimes{}}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go pods.run(watchCtx, c, ns)

	res := &classResult{Limits: limits, Writes: map[string]rate{}, Latency: map[string]summary{},
		Throttle: map[string]histogram{}, Requests: map[string]histogram{}, PeakKiB: map[string]int64{}, CPUSeconds: map[string]float64{}}
	procs := map[string]*process{"controller": ctrl, "gateway": gw}
	endpoints := map[string]string{"controller": ctrlMetrics, "gateway": gwMetrics}
	before := map[string]map[string]*dto.MetricFamily{}
	cpu0 := map[string]float64{}
	for name, p := range procs {
		if before[name], err = scrape(endpoints[name]); err != nil {
			return nil, err
		}
		cpu0[name] = cpuSeconds(p.cmd.Process.Pid)
	}
	w0, err := serverWrites(env)
	if err != nil {
		return nil, err
	}

	start := time.Now()
	students := signInStorm(ctx, o.Students, o.Window, gwAddr, ns, ref, func(i int) bool { return i >= returning })
	end := time.Now()
	first, last := end, start
	for _, s := range students {
		if !s.SignIn.IsZero() {
			first, last = minTime(first, s.SignIn), maxTime(last, s.SignIn)
		}
		if !s.FirstByte.IsZero() {
			end = maxTime(end, s.FirstByte)
		}
	}
	res.Spread, res.Storm = last.Sub(first), end.Sub(first)
	logf("  storm over: %s from the first sign-in to the last first byte", res.Storm.Round(time.Millisecond))
	for name, p := range procs {
		after, err := scrape(endpoints[name])
		if err != nil {
			return nil, err
		}
		res.Throttle[name] = histogramOf(after, "rest_client_rate_limiter_duration_seconds", nil).minus(histogramOf(before[name], "rest_client_rate_limiter_duration_seconds", nil))
		res.Requests[name] = histogramOf(after, "rest_client_request_duration_seconds", nil).minus(histogramOf(before[name], "rest_client_request_duration_seconds", nil))
		res.CPUSeconds[name] = cpuSeconds(p.cmd.Process.Pid) - cpu0[name]
		_, res.PeakKiB[name] = memory(p.cmd.Process.Pid)
	}
	w1, err := serverWrites(env)
	if err != nil {
		return nil, err
	}
	total := 0
	for _, n := range since(w0, w1) {
		total += n
	}
	res.ServerWrites = rate{Total: total, PerSecond: float64(total) / end.Sub(start).Seconds()}

	// Steady state: after the storm and the activity the gateway still
	// owes for it (written at most once an interval), nobody acts.
	quiet := end.Add(classActivityInterval + 10*time.Second)
	logf("  steady state: waiting until %s, then counting writes for %s", quiet.Format("15:04:05"), o.Steady)
	time.Sleep(time.Until(quiet.Add(o.Steady + 2*time.Second)))
	stopWatch()
	records, err := readAudit(auditLog, start)
	if err != nil {
		return nil, err
	}
	res.SteadyWindow = o.Steady
	byClient := map[string][]time.Time{}
	latency := map[string][]time.Duration{}
	for _, r := range records {
		if !r.Write() || (r.User != gatewayUser && r.User != controllerUser) {
			continue
		}
		name := map[string]string{gatewayUser: "gateway", controllerUser: "controller"}[r.User]
		if !r.Done.Before(quiet) && r.Done.Before(quiet.Add(o.Steady)) {
			res.SteadyWrites++
		}
		byClient[name] = append(byClient[name], r.Done)
		if r.Done.Before(end) {
			latency[name] = append(latency[name], r.Done.Sub(r.Received))
		}
	}
	for name := range procs {
		res.Writes[name] = rateOf(byClient[name], start, end)
		res.Latency[name] = summarize(latency[name])
	}
	attribute(students, records, pods.snapshot(), gatewayUser, controllerUser)
	res.Students = students
	gw.stop()
	ctrl.stop()
	logf("  deleting %s", ns)
	if _, err := deleteNamespace(ctx, c, ns); err != nil {
		return nil, err
	}
	return res, nil
}

// signInStorm has n students (s000…) sign in through the gateway at
// gwAddr and open their environment of ref in ns, arriving evenly over
// window in an order shuffled with a fixed seed, so new and returning
// students mix alike in every run.
func signInStorm(ctx context.Context, n int, window time.Duration, gwAddr, ns string, ref v1alpha1.TemplateReference, isNew func(i int) bool) []studentRun {
	_, port, _ := strings.Cut(gwAddr, ":")
	mainHost := benchMainHost + ":" + port
	order := rand.New(rand.NewPCG(7, 11)).Perm(n)
	start := time.Now()
	students := make([]studentRun, n)
	var wg sync.WaitGroup
	for k, i := range order {
		at := start.Add(window * time.Duration(k) / time.Duration(n))
		wg.Go(func() {
			time.Sleep(time.Until(at))
			user := studentName(i)
			st := student{gwAddr: gwAddr, mainHost: mainHost, user: user, password: classPassword, deadline: 5 * time.Minute,
				envHost: naming.HostLabel(ns, naming.CandidateNames(user, ref)[0]) + "." + benchEnvDomain + ":" + port}
			run := st.visit(ctx)
			run.Userland, run.New = naming.CandidateNames(user, ref)[0], isNew(i)
			students[i] = run
		})
	}
	wg.Wait()
	return students
}

// startClassController runs a controller as the chart does, under limits.
func startClassController(ctx context.Context, env *testenv.Environment, dir, bin string, limits classLimits) (*process, string, error) {
	return startBenchController(ctx, env, dir, bin, "class-"+limits.Key, limitFlags(limits.ControllerQPS, limits.ControllerBurst)...)
}

// startBenchController runs a controller as the chart does, signed in as
// controllerUser, with extra flags; name prefixes its files.
func startBenchController(ctx context.Context, env *testenv.Environment, dir, bin, name string, extra ...string) (*process, string, error) {
	cfg, err := env.CertConfigBoundTo(ctx, controllerUser, "userland-controller")
	if err != nil {
		return nil, "", err
	}
	kubeconfig := filepath.Join(dir, name+"-controller.kubeconfig")
	if err := kubeconfigFor(cfg, kubeconfig); err != nil {
		return nil, "", err
	}
	port, err := simcluster.FreePort()
	if err != nil {
		return nil, "", err
	}
	metrics := fmt.Sprintf("127.0.0.1:%d", port)
	p, err := startProcess("controller", filepath.Join(dir, name+"-controller.log"), bin, append([]string{"controller",
		"--kubeconfig", kubeconfig, "--disable-webhooks", "--leader-elect=false",
		"--metrics-bind-address=" + metrics, "--metrics-secure=false", "--health-probe-bind-address=0",
		"--gateway-url=http://" + gatewayHost, "--gateway-namespace=userland-system", "--base-domain=" + benchEnvDomain,
	}, extra...)...)
	if err != nil {
		return nil, "", err
	}
	if err := waitHTTP("http://" + metrics + "/metrics"); err != nil {
		p.stop()
		return nil, "", err
	}
	return p, "http://" + metrics + "/metrics", nil
}

// limitFlags are --kube-api-qps and --kube-api-burst; the shipped values
// are left to the binary's own defaults, as the chart's equal them.
func limitFlags(qps float32, burst int) []string {
	return []string{fmt.Sprintf("--kube-api-qps=%v", qps), fmt.Sprintf("--kube-api-burst=%d", burst)}
}

// startClassGateway runs a gateway as the chart does (static sign-in with
// bcrypt's default cost, environment hosts, a one-minute activity
// interval) for students s000…, under limits.
func startClassGateway(ctx context.Context, env *testenv.Environment, dir, bin, upAddr string, limits classLimits, students int) (*process, string, string, error) {
	hash, err := bcrypt.GenerateFromPassword([]byte(classPassword), bcrypt.DefaultCost)
	if err != nil {
		return nil, "", "", err
	}
	var users strings.Builder
	users.WriteString("users:\n")
	for i := range students {
		fmt.Fprintf(&users, "  - name: %s\n    passwordHash: %s\n", studentName(i), hash)
	}
	usersFile := filepath.Join(dir, "class-users.yaml")
	if err := os.WriteFile(usersFile, []byte(users.String()), 0o600); err != nil {
		return nil, "", "", err
	}
	keys := filepath.Join(dir, "class-session.keys")
	if err := os.WriteFile(keys, []byte(strings.Repeat("B", 86)+"==\n"), 0o600); err != nil {
		return nil, "", "", err
	}
	cfg, err := env.CertConfigBoundTo(ctx, gatewayUser, "userland-gateway")
	if err != nil {
		return nil, "", "", err
	}
	kubeconfig := filepath.Join(dir, "class-gateway.kubeconfig")
	if err := kubeconfigFor(cfg, kubeconfig); err != nil {
		return nil, "", "", err
	}
	ports := make([]int, 2)
	for i := range ports {
		if ports[i], err = simcluster.FreePort(); err != nil {
			return nil, "", "", err
		}
	}
	addr, metrics := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	p, err := startProcess("gateway", filepath.Join(dir, "class-"+limits.Key+"-gateway.log"), bin, append([]string{"gateway",
		"--listen", addr, "--metrics-bind-address", metrics, "--kubeconfig", kubeconfig,
		"--public-url", fmt.Sprintf("http://%s:%d", benchMainHost, ports[0]), "--base-domain", benchEnvDomain,
		"--auth-mode=static", "--static-users-file", usersFile, "--session-keys-file", keys, "--insecure-cookies",
		"--static-upstream", upAddr, "--activity-interval=" + classActivityInterval.String(), "--wake-timeout=1m",
	}, limitFlags(limits.GatewayQPS, limits.GatewayBurst)...)...)
	if err != nil {
		return nil, "", "", err
	}
	if err := waitHTTP("http://" + addr + "/readyz"); err != nil {
		p.stop()
		return nil, "", "", err
	}
	return p, "http://" + metrics + "/metrics", addr, nil
}

// stoppedForIdleness creates the returning students' environments, waits
// until they are Ready, then stops them as idle: their last activity and
// last start move two hours back, as after a night.
func stoppedForIdleness(ctx context.Context, c client.WithWatch, ns string, ref v1alpha1.TemplateReference, n int) error {
	err := createAll(ctx, n, func(i int) []client.Object {
		user := studentName(i)
		return []client.Object{&v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: naming.CandidateNames(user, ref)[0]},
			Spec: v1alpha1.UserlandSpec{User: user, TemplateRef: ref}}}
	}, c)
	if err != nil {
		return err
	}
	if err := waitUserlands(ctx, c, ns, n, func(ul *v1alpha1.Userland) bool { return ul.Status.Phase == v1alpha1.PhaseReady }); err != nil {
		return err
	}
	past := time.Now().Add(-2 * time.Hour).UTC().Format(time.RFC3339)
	err = parallel(n, 16, func(i int) error {
		name := naming.CandidateNames(studentName(i), ref)[0]
		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, controller.AnnotationStartedAt, past)
		return c.Patch(ctx, dep, client.RawPatch(types.MergePatchType, patch))
	})
	if err != nil {
		return fmt.Errorf("moving starts back: %w", err)
	}
	time.Sleep(time.Second) // the controller's cache sees them
	err = parallel(n, 16, func(i int) error {
		ul := &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: naming.CandidateNames(studentName(i), ref)[0]}}
		patch := fmt.Appendf(nil, `{"status":{"lastActivityTime":%q}}`, past)
		return c.Status().Patch(ctx, ul, client.RawPatch(types.MergePatchType, patch))
	})
	if err != nil {
		return fmt.Errorf("moving activity back: %w", err)
	}
	if err := waitUserlands(ctx, c, ns, n, func(ul *v1alpha1.Userland) bool {
		return ul.Status.Phase == v1alpha1.PhaseStopped && ul.Status.StoppedReason == v1alpha1.StoppedIdle
	}); err != nil {
		return err
	}
	return waitAll(ctx, c, &appsv1.DeploymentList{}, ns, n, func(obj client.Object) bool {
		d := obj.(*appsv1.Deployment)
		return d.Spec.Replicas != nil && *d.Spec.Replicas == 0 && d.Status.Replicas == 0
	})
}

// parallel runs f for 0…n-1, width at once, and returns the first error.
func parallel(n, width int, f func(i int) error) error {
	sem := make(chan struct{}, width)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs <- f(i)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// podWatch notes when each pod of a namespace appeared and turned Ready,
// by the time its watch event arrived.
type podWatch struct {
	mu    sync.Mutex
	times map[string]podTimes
}

func (p *podWatch) run(ctx context.Context, c client.WithWatch, ns string) {
	for ctx.Err() == nil {
		w, err := c.Watch(ctx, &corev1.PodList{}, client.InNamespace(ns))
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			p.saw(pod, time.Now())
		}
		w.Stop()
	}
}

func (p *podWatch) saw(pod *corev1.Pod, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, seen := p.times[pod.Name]
	if !seen {
		t.Created = now
	}
	if t.Ready.IsZero() {
		for _, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				t.Ready = now
			}
		}
	}
	p.times[pod.Name] = t
}

func (p *podWatch) snapshot() map[string]podTimes {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]podTimes, len(p.times))
	for k, v := range p.times {
		out[k] = v
	}
	return out
}

// scrape reads a Prometheus text endpoint.
func scrape(u string) (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get(u)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", u, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
