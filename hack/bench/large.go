package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/apilimits"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/simcluster"
	"github.com/userland-dev/userland/internal/testenv"
	"github.com/userland-dev/userland/internal/testobj"
)

// The 10,000-environment scenario (`make bench-10k`): each layout runs on
// a cluster of its own, started fresh, so one layout's leftovers (ten
// thousand objects take longer to delete than a cluster takes to start)
// cannot weigh on the next, and each controller's peak memory is its own.
const (
	// largeTargetControllerKiB and largeTargetGatewayKiB are the issue's
	// bounds at 10,000 environments.
	largeTargetControllerKiB = 400 << 10
	largeTargetGatewayKiB    = 256 << 10
	// largeMaxUnavailable is the bench template's rollout bound.
	largeMaxUnavailable = 0.25
)

// largeResult is one layout of the scenario.
type largeResult struct {
	N, Namespaces int
	// Ready is create of the first Userland to the last one Ready.
	Ready time.Duration
	// PeakKiB is the controller's peak resident set until the end of the
	// steady window (and before any rollout); SettledKiB is its resident
	// set at the end of that window.
	PeakKiB, SettledKiB int64
	CPUSeconds          float64
	SteadyWrites        int
	SteadyWindow        time.Duration
	// Courses is how many courses the Userlands belong to (0: none), and
	// GatewayKiB/GatewayPeakKiB the resident set of a gateway with all of
	// it in its cache, after it served the admin's page.
	Courses                    int
	GatewayKiB, GatewayPeakKiB int64
	// Rollout is a template change until every environment runs it and
	// is Ready, or until the rollout's time limit (RolloutUpdated, how
	// many ran it by then, is then below N); MaxUnavailable the most
	// environments without an available pod at once meanwhile. Zero when
	// not measured.
	Rollout        time.Duration
	RolloutUpdated int
	MaxUnavailable int
	// WorstNamespace is the namespace whose unavailable environments came
	// nearest their template's own bound (a quarter of its environments),
	// WorstUnavailable the most of them at once and WorstBound that bound:
	// in the spread layout each template's budget is its own.
	WorstNamespace               string
	WorstUnavailable, WorstBound int
	// Heap is the top of the controller's in-use heap profile at the end
	// of the steady window: what its memory holds.
	Heap string
	// RolloutPeakKiB is the controller's peak resident set at the end of
	// the rollout, and RolloutCPUSeconds its CPU during the rollout.
	RolloutPeakKiB    int64
	RolloutCPUSeconds float64
}

// largeNamespace names layout's i-th namespace.
func largeNamespace(namespaces, i int) string {
	return fmt.Sprintf("large%d-%d", namespaces, i)
}

// benchLarge runs every layout of the scenario.
func benchLarge(ctx context.Context, o options, dir, bin string) ([]largeResult, error) {
	var results []largeResult
	for _, k := range o.largeNamespaces {
		sub := filepath.Join(dir, fmt.Sprintf("large-%d", k))
		if err := os.MkdirAll(sub, 0o700); err != nil {
			return nil, err
		}
		r, err := benchLargeLayout(ctx, o, sub, bin, k)
		if err != nil {
			return nil, fmt.Errorf("%d Userlands in %d namespaces: %w", o.large, k, err)
		}
		results = append(results, r)
	}
	return results, nil
}

func benchLargeLayout(ctx context.Context, o options, dir, bin string, namespaces int) (largeResult, error) {
	r := largeResult{N: o.large, Namespaces: namespaces, SteadyWindow: o.steady}
	logf("large: %d Userlands in %d namespace(s): starting a cluster of its own", r.N, namespaces)
	env, auditLog, err := startCluster(ctx, dir)
	if err != nil {
		return r, err
	}
	defer func() { _ = env.Stop() }()
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		return r, err
	}
	for _, f := range []string{"role.yaml", "roles.yaml"} {
		if err := env.CreateFromFile(ctx, filepath.Join(testenv.RepoRoot(), "config", "rbac", f)); err != nil {
			return r, err
		}
	}
	pprofPort, err := simcluster.FreePort()
	if err != nil {
		return r, err
	}
	pprofBase := fmt.Sprintf("http://127.0.0.1:%d", pprofPort)
	ctrl, _, err := startBenchController(ctx, env, dir, bin, "large",
		append(limitFlags(apilimits.ControllerQPS, apilimits.ControllerBurst), "--first-status-window", o.firstStatusWindow.String(),
			"--pprof-bind-address", strings.TrimPrefix(pprofBase, "http://"))...)
	if err != nil {
		return r, err
	}
	defer ctrl.stop()
	pid := ctrl.cmd.Process.Pid

	// Courses: in the spread layout each namespace is one course of its
	// students, as a university would lay it out.
	withCourses := namespaces > 1
	perNS := (r.N + namespaces - 1) / namespaces
	courses := make([]*v1alpha1.Course, namespaces)
	for k := range namespaces {
		ns := largeNamespace(namespaces, k)
		if err := namespace(ctx, c, ns); err != nil {
			return r, err
		}
		if err := c.Create(ctx, benchTemplate(ns)); err != nil {
			return r, err
		}
		if !withCourses {
			continue
		}
		users := make([]string, 0, perNS)
		for i := k * perNS; i < min(r.N, (k+1)*perNS); i++ {
			users = append(users, largeUser(i))
		}
		courses[k] = testobj.MakeCourse(ns, "class").Staff("ta").Template("app", v1alpha1.ProvisionOnSignIn).Students(users...).Obj()
		if err := c.Create(ctx, courses[k]); err != nil {
			return r, err
		}
		r.Courses++
	}
	build := func(i int) *v1alpha1.Userland {
		k := i / perNS
		ns := largeNamespace(namespaces, k)
		if !withCourses {
			return testobj.MakeUserland(ns, fmt.Sprintf("u-%d", i), largeUser(i), "app").Obj()
		}
		ul := course.NewUserland(courses[k], largeUser(i), course.BasisStudentUser, v1alpha1.TemplateReference{Name: "app"})
		ul.Name = fmt.Sprintf("u-%d", i)
		// Its student asked for it, as a sign-in's wake does: a course
		// environment nobody asked for is made ahead and not started.
		ul.Annotations[v1alpha1.AnnotationRestartedAt] = time.Now().UTC().Format(time.RFC3339)
		return ul
	}

	stopPeak := samplePeak(pid)
	cpu0 := cpuSeconds(pid)
	start := time.Now()
	progress := progressEvery(time.Minute, "provisioned")
	err = eachParallel(r.N, func(i int) error {
		ul := build(i)
		if err := c.Create(ctx, ul); err != nil {
			return fmt.Errorf("creating Userland %s/%s: %w", ul.Namespace, ul.Name, err)
		}
		return nil
	})
	if err != nil {
		return r, err
	}
	logf("large: %d created in %s; waiting for all Ready", r.N, time.Since(start).Round(time.Second))
	err = waitAll(ctx, c, &v1alpha1.UserlandList{}, "", r.N, func(obj client.Object) bool {
		ready := obj.(*v1alpha1.Userland).Status.Phase == v1alpha1.PhaseReady
		if ready {
			progress(obj.GetNamespace() + "/" + obj.GetName())
		}
		return ready
	})
	if err != nil {
		return r, err
	}
	r.Ready = time.Since(start)
	r.CPUSeconds = cpuSeconds(pid) - cpu0
	logf("large: all %d Ready in %s (controller CPU %.1f s)", r.N, r.Ready.Round(time.Second), r.CPUSeconds)
	for k := range namespaces {
		n := min(r.N, (k+1)*perNS) - k*perNS
		if err := waitTemplateCounts(ctx, c, largeNamespace(namespaces, k), n); err != nil {
			return r, err
		}
	}
	time.Sleep(2 * time.Second) // audit entries of the last requests
	ts := time.Now()
	time.Sleep(o.steady)
	steady, err := apiCounts(auditLog, controllerUser, ts, ts.Add(o.steady))
	if err != nil {
		return r, err
	}
	r.SteadyWrites = writes(steady)
	r.SettledKiB, _ = memory(pid)
	r.PeakKiB = stopPeak()
	logf("large: steady %d writes in %s; controller RSS settled %.1f MiB, peak %.1f MiB", r.SteadyWrites, o.steady, mib(r.SettledKiB), mib(r.PeakKiB))
	r.Heap = heapProfile(pprofBase, filepath.Join(dir, fmt.Sprintf("large-%d-heap.pprof", namespaces)))
	logf("large: controller heap once settled:\n%s", r.Heap)

	if withCourses {
		if r.GatewayKiB, r.GatewayPeakKiB, err = largeGateway(ctx, env, dir, bin, r.N); err != nil {
			return r, err
		}
		logf("large: gateway RSS %.1f MiB (peak %.1f MiB) with %d Userlands and %d courses cached", mib(r.GatewayKiB), mib(r.GatewayPeakKiB), r.N, r.Courses)
	}
	{
		all := make([]string, namespaces)
		for k := range namespaces {
			all[k] = largeNamespace(namespaces, k)
		}
		logf("large: rollout of an image change to all %d (Immediate, maxUnavailable 25%% of each namespace's template)", r.N)
		cpuBefore := cpuSeconds(pid)
		if err := rolloutTracked(ctx, c, all, &r, o.largeRolloutLimit); err != nil {
			return r, err
		}
		r.RolloutCPUSeconds = cpuSeconds(pid) - cpuBefore
		_, r.RolloutPeakKiB = memory(pid)
		logf("large: rollout %s after %s: %d of %d updated and Ready, at most %d unavailable at once (at most %d of %d in %s); controller CPU %.1f s",
			map[bool]string{true: "done", false: "stopped"}[r.RolloutUpdated == r.N], r.Rollout.Round(time.Second), r.RolloutUpdated, r.N, r.MaxUnavailable,
			r.WorstUnavailable, r.WorstBound, r.WorstNamespace, r.RolloutCPUSeconds)
	}
	return r, nil
}

func largeUser(i int) string { return fmt.Sprintf("student%05d@uni.example.ac.jp", i) }

func mib(kib int64) float64 { return float64(kib) / 1024 }

// progressEvery logs how many distinct keys were seen, at most once per
// period, so a run of half an hour shows it is moving.
func progressEvery(period time.Duration, what string) func(key string) {
	seen := map[string]bool{}
	last := time.Now()
	return func(key string) {
		seen[key] = true
		if time.Since(last) >= period {
			last = time.Now()
			logf("large: %d %s", len(seen), what)
		}
	}
}

// samplePeak samples a process's resident set every second until the
// returned function is called, which returns the largest sample or its
// kernel-kept peak, whichever is larger.
func samplePeak(pid int) func() int64 {
	var mu sync.Mutex
	var peak int64
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				rss, _ := memory(pid)
				mu.Lock()
				peak = max(peak, rss)
				mu.Unlock()
			}
		}
	}()
	return func() int64 {
		close(done)
		_, hwm := memory(pid)
		mu.Lock()
		defer mu.Unlock()
		return max(peak, hwm)
	}
}

// largeGateway starts a gateway, waits until its admin page counts every
// Userland (its cache is full), and reads its resident set.
func largeGateway(ctx context.Context, env *testenv.Environment, dir, bin string, n int) (rss, peak int64, err error) {
	gw, err := newBenchGateway(ctx, env, dir, bin, "127.0.0.1:9")
	if err != nil {
		return 0, 0, err
	}
	if err := pagesUsers(dir); err != nil {
		return 0, 0, err
	}
	gw.args = append(gw.args, "--admin-groups=admins")
	proc, gwAddr, err := gw.start()
	if err != nil {
		return 0, 0, err
	}
	defer proc.stop()
	_, port, _ := strings.Cut(gwAddr, ":")
	pc := &pageClient{hc: &http.Client{Timeout: time.Minute, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		addr: gwAddr, host: benchMainHost + ":" + port, cookies: map[string]string{}}
	if err := pc.signIn("admin"); err != nil {
		return 0, 0, err
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		_, body, _, err := pc.get("admin", "/dashboard/admin")
		var count int
		if _, rest, ok := strings.Cut(body, `<h2 id="all">Environments (`); ok && err == nil {
			count, _ = strconv.Atoi(strings.SplitN(rest, ")", 2)[0])
		}
		if count >= n {
			break
		}
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("the admin page never counted %d environments (last %d)", n, count)
		}
		time.Sleep(time.Second)
	}
	rss, peak = memory(proc.cmd.Process.Pid)
	return rss, peak, nil
}

// rolloutTracked changes the template's image, waits until every
// environment runs it and is Ready, and counts the most Deployments
// without an available pod at any one time, as their watch shows them.
func rolloutTracked(ctx context.Context, c client.WithWatch, namespaces []string, r *largeResult, limit time.Duration) error {
	n := r.N
	ours := map[string]bool{}
	for _, ns := range namespaces {
		ours[ns] = true
	}
	// One watch of every namespace: 50 watches would each be a stream the
	// API server keeps, beside the load being measured.
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	events := deploymentEvents(watchCtx, c)
	seen := map[string]bool{}
	unavailable := map[string]bool{}
	updated := map[string]bool{}
	// Per namespace: its environments, its unavailable ones now and the
	// most at once.
	inNS, downInNS, mostInNS := map[string]int{}, map[string]int{}, map[string]int{}
	// The watch starts with every current Deployment; the change is made
	// once all n are seen, so the count starts from the true state.
	var changed time.Time
	most := 0
	var timeout <-chan time.Time // set once the change is made
	// A rollout to 10,000 takes tens of minutes here: say how far it is.
	progress := time.NewTicker(time.Minute)
	defer progress.Stop()
	for len(updated) < n {
		select {
		case <-progress.C:
			if !changed.IsZero() {
				logf("large: rollout %s in: %d of %d updated and Ready, %d unavailable now, at most %d so far",
					time.Since(changed).Round(time.Second), len(updated), n, len(unavailable), most)
			}
		case <-timeout:
			// Stopped, not failed: how far it got in the limit, and the
			// most unavailable meanwhile, are the measurement.
			r.Rollout, r.MaxUnavailable, r.RolloutUpdated = time.Since(changed), most, len(updated)
			worstOf(r, inNS, mostInNS)
			return nil
		case ev := <-events:
			d, isDep := ev.Object.(*appsv1.Deployment)
			if !isDep || !ours[d.Namespace] {
				continue
			}
			key := d.Namespace + "/" + d.Name
			if !seen[key] {
				seen[key] = true
				inNS[d.Namespace]++
			}
			was := unavailable[key]
			if ev.Type != watch.Deleted && d.Status.AvailableReplicas < 1 {
				unavailable[key] = true
			} else {
				delete(unavailable, key)
			}
			if now := unavailable[key]; now != was {
				if now {
					downInNS[d.Namespace]++
				} else {
					downInNS[d.Namespace]--
				}
				mostInNS[d.Namespace] = max(mostInNS[d.Namespace], downInNS[d.Namespace])
			}
			if ev.Type != watch.Deleted && d.Spec.Template.Spec.Containers[0].Image == "example.org/app:2" &&
				d.Status.UpdatedReplicas == 1 && d.Status.AvailableReplicas == 1 && d.Status.Replicas == 1 {
				updated[key] = true
			}
			most = max(most, len(unavailable))
		}
		if changed.IsZero() && len(seen) >= n {
			changed = time.Now()
			timeout = time.After(limit)
			// Each namespace's template is changed at the same moment, as
			// one change of a shared image would be.
			if err := eachParallel(len(namespaces), func(i int) error {
				return setBenchImage(ctx, c, namespaces[i], "example.org/app:2")
			}); err != nil {
				return err
			}
		}
	}
	ns := namespaces[0]
	if len(namespaces) > 1 {
		ns = "" // every namespace: only the benchmark's hold Userlands
	}
	stopWatch() // the count is done; nobody reads its events any more
	err := waitUserlands(ctx, c, ns, n, func(ul *v1alpha1.Userland) bool {
		return ul.Status.Phase == v1alpha1.PhaseReady && !ul.Status.UpdatePending
	})
	r.Rollout, r.MaxUnavailable, r.RolloutUpdated = time.Since(changed), most, len(updated)
	worstOf(r, inNS, mostInNS)
	return err
}

// worstOf records the namespace whose most unavailable environments at
// once came nearest (or furthest past) a quarter of its environments.
func worstOf(r *largeResult, inNS, mostInNS map[string]int) {
	first := true
	for ns, size := range inNS {
		bound := int(float64(size) * largeMaxUnavailable)
		if first || mostInNS[ns]-bound > r.WorstUnavailable-r.WorstBound {
			r.WorstNamespace, r.WorstUnavailable, r.WorstBound = ns, mostInNS[ns], bound
			first = false
		}
	}
}
