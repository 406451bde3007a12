//go:build realnode

package realnode_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/devcontroller"
	"github.com/userland-dev/userland/internal/devenv"
	"github.com/userland-dev/userland/internal/envtiming"
	"github.com/userland-dev/userland/internal/realnode"
	"github.com/userland-dev/userland/internal/simcluster"
	"github.com/userland-dev/userland/internal/testobj"
)

// rolloutSize and rolloutMax: the rollout restarts this many probe
// environments, at most rolloutMax at a time.
const (
	rolloutSize = 5
	rolloutMax  = 2
)

// lifecycleRun is what one stack measured.
type lifecycleRun struct {
	// started is from creating the probe environments to all Ready.
	started time.Duration
	// stops, wakes and podStarts are per woken environment (by label):
	// the forced idle stop, the wake request's answer, and the woken
	// pod's own created → Ready.
	stops     map[string]time.Duration
	wakes     map[string]envtiming.Answer
	podStarts map[string]string
	rollout   envtiming.Rollout
}

// wakeTarget is an environment woken by a request, and what its app
// answers: the real app's own content on the real node, the built-in
// demo app's page (naming the environment) on kwok.
type wakeTarget struct {
	label, name, path, want string
}

// TestLifecycleRealNodeVsKwok runs the same scenario through
// `userland dev`'s stack (the real controller and the real gateway) on
// kwok's simulated nodes and then on a real node, and logs both sets of
// numbers side by side (TIMING … real node X vs kwok Y):
//   - an environment of the real VS Code image (code-server) and one of
//     the small probe image are stopped as idle by the controller (their
//     clocks moved two hours back): the Userland says Stopped for Idle,
//     the Deployment is at 0 and no pod is left;
//   - each is woken by one plain request through the gateway, timed to
//     the first byte of its app's own answer, beside the woken pod's own
//     created → Ready;
//   - a change to the probe template rolls out Immediately to
//     rolloutSize running environments with maxUnavailable rolloutMax:
//     every one restarts onto the new pod template, and never more than
//     rolloutMax are restarting at once.
func TestLifecycleRealNodeVsKwok(t *testing.T) {
	opts := nodeOptions(t)
	archives, overrides := appImages(t)
	var kwok, real lifecycleRun
	t.Run("kwok", func(t *testing.T) {
		kwok = runLifecycle(t, devenv.Options{ControlPlaneDir: opts.ControlPlaneDir}, func(name, _ string) (string, string) {
			return "/", "Environment " + devenv.DemoNamespace + "/" + name + " "
		})
	})
	t.Run("real node", func(t *testing.T) {
		real = runLifecycle(t, devenv.Options{ControlPlaneDir: opts.ControlPlaneDir, RealNode: &devenv.RealNodeOptions{
			NodeBinariesDir: opts.NodeBinariesDir, Images: append(slices.Clone(opts.Images), archives...),
			ImageOverrides: overrides, LockWait: opts.LockWait,
		}}, func(_, label string) (string, string) {
			if label == "vscode" {
				return "/healthz", `"status"` // code-server's own health answer
			}
			return "/", "hello from " // the probe's greeting
		})
	})
	if real.stops == nil || kwok.stops == nil {
		t.Fatal("one of the stacks measured nothing; see its failure above")
	}
	t.Logf("TIMING lifecycle: %d probe environments created → all Ready: real node %s vs kwok %s", rolloutSize, ms(real.started), ms(kwok.started))
	for _, label := range []string{"vscode", "probe"} {
		t.Logf("TIMING lifecycle: %s idle stop (clocks moved back → Stopped, Deployment at 0, pod gone): real node %s vs kwok %s",
			label, ms(real.stops[label]), ms(kwok.stops[label]))
		rw, kw := real.wakes[label], kwok.wakes[label]
		t.Logf("TIMING lifecycle: %s wake (request → first byte of the app's own answer, through the gateway): real node %s (%s; pod created → Ready %s) vs kwok %s (%s; pod created → Ready %s)",
			label, ms(rw.FirstByte), rw.Requests(), real.podStarts[label], ms(kw.FirstByte), kw.Requests(), kwok.podStarts[label])
	}
	t.Logf("TIMING lifecycle: rollout of a template change to %d environments, maxUnavailable %d: real node %s (at most %d restarting at once) vs kwok %s (at most %d at once)",
		rolloutSize, rolloutMax, ms(real.rollout.Took), real.rollout.MostUnavailable, ms(kwok.rollout.Took), kwok.rollout.MostUnavailable)
}

// runLifecycle starts a dev stack with opts, runs the scenario on it and
// stops it. answer says, for an environment (its name, its label), which
// path to ask and what the answer must hold.
func runLifecycle(t *testing.T, opts devenv.Options, answer func(name, label string) (path, want string)) lifecycleRun {
	listen, err := simcluster.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	opts.StateDir, opts.Listen, opts.Log, opts.NewController = t.TempDir(), listen, testWriter{t}, devcontroller.New
	start := time.Now()
	stack, err := devenv.Start(ctx, opts)
	if err != nil {
		t.Fatalf("starting the dev stack: %v", err)
	}
	t.Cleanup(func() {
		if err := stack.Stop(); err != nil {
			t.Errorf("stopping the dev stack: %v", err)
		}
		if opts.RealNode == nil {
			return
		}
		if left := realnode.Leftovers(realnode.DefaultStateDir); len(left) > 0 {
			t.Errorf("left after the dev stack stopped:\n  %s", strings.Join(left, "\n  "))
		}
	})
	t.Logf("TIMING dev stack up in %s (simulated pods: %v)", time.Since(start).Round(10*time.Millisecond), stack.Simulated)
	c := stack.Client
	ns := devenv.DemoNamespace

	// Only alice's VS Code of the demo's environments is kept: the others
	// would be real apps starting beside the measurements.
	vscode := keepOnlyAliceVSCode(ctx, t, c)

	tmpl := testobj.MakeTemplate(ns, "probe").Image(probeImage).Idle(time.Hour).
		Rollout(v1alpha1.RolloutImmediate, fmt.Sprint(rolloutMax)).Obj()
	tmpl.Spec.PodTemplate.Spec.Containers[0].ReadinessProbe = readiness()
	if err := c.Create(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	var names []string
	created := time.Now()
	for i := range rolloutSize {
		// alice owns the first, which she wakes; the rest are others'.
		user := fmt.Sprintf("student%d", i)
		if i == 0 {
			user = "alice"
		}
		ul := testobj.MakeUserland(ns, fmt.Sprintf("probe-%d", i), user, tmpl.Name).Obj()
		if err := c.Create(ctx, ul); err != nil {
			t.Fatal(err)
		}
		names = append(names, ul.Name)
	}
	var run lifecycleRun
	for _, name := range names {
		waitPhase(ctx, t, c, types.NamespacedName{Namespace: ns, Name: name}, 10*time.Minute)
	}
	run.started = time.Since(created)
	waitPhase(ctx, t, c, types.NamespacedName{Namespace: ns, Name: vscode}, 10*time.Minute)

	alice := envtiming.GatewayClient(listen)
	if err := envtiming.SignIn(ctx, alice, stack.URL, "alice", devenv.DemoPassword); err != nil {
		t.Fatal(err)
	}
	run.stops, run.wakes, run.podStarts = map[string]time.Duration{}, map[string]envtiming.Answer{}, map[string]string{}
	for _, target := range []wakeTarget{{label: "vscode", name: vscode}, {label: "probe", name: names[0]}} {
		target.path, target.want = answer(target.name, target.label)
		wakeOnce(ctx, t, c, alice, target, &run)
	}

	// The change: an environment variable, which changes the pod
	// template and so restarts every running environment of it.
	change := func(ctx context.Context) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var cur v1alpha1.Template
			if err := c.Get(ctx, client.ObjectKeyFromObject(tmpl), &cur); err != nil {
				return err
			}
			cs := &cur.Spec.PodTemplate.Spec.Containers[0]
			cs.Env = append(cs.Env, corev1.EnvVar{Name: "ROLLOUT", Value: "2"})
			return c.Update(ctx, &cur)
		})
	}
	// probe-0 was woken just now, so all rolloutSize are running.
	r, err := envtiming.TimeRollout(ctx, watchClient(t, stack.Config), ns, names, change, 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	run.rollout = r
	t.Logf("rollout: %d of %d restarted onto the new pod template in %s, at most %d restarting at once (maxUnavailable %d)",
		r.Restarted, len(names), ms(r.Took), r.MostUnavailable, rolloutMax)
	if r.MostUnavailable > rolloutMax {
		t.Errorf("the rollout had %d environments restarting at once, more than maxUnavailable %d", r.MostUnavailable, rolloutMax)
	}
	if r.MostUnavailable < 1 {
		t.Errorf("the rollout restarted %d environments but never counted one restarting: the count measures nothing", r.Restarted)
	}
	for _, name := range names {
		key := types.NamespacedName{Namespace: ns, Name: name}
		waitPhase(ctx, t, c, key, 5*time.Minute)
		pod, err := envtiming.ServingPod(ctx, c, key)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(pod.Spec.Containers[0].Env, corev1.EnvVar{Name: "ROLLOUT", Value: "2"}) {
			t.Errorf("%s: its Ready pod %s after the rollout lacks the changed environment: %v", name, pod.Name, pod.Spec.Containers[0].Env)
		}
	}
	return run
}

// wakeOnce opens target through the gateway (which gives hc the cookie
// of the environment's origin), has the controller stop it as idle, then
// wakes it with one request and checks that a new pod answers with the
// app's own content.
func wakeOnce(ctx context.Context, t *testing.T, c client.Client, hc *http.Client, target wakeTarget, run *lifecycleRun) {
	t.Helper()
	key := types.NamespacedName{Namespace: devenv.DemoNamespace, Name: target.name}
	var ul v1alpha1.Userland
	if err := c.Get(ctx, key, &ul); err != nil {
		t.Fatal(err)
	}
	u := strings.TrimSuffix(ul.Status.URL, "/") + target.path
	openedAt := time.Now()
	opened, err := envtiming.Open(ctx, hc, u, target.want, 5*time.Minute)
	if err != nil {
		t.Fatalf("%s: opening it through the gateway: %v", target.label, err)
	}
	t.Logf("%s: opened %s through the gateway (%s): %.100q", target.label, u, opened.Requests(), opened.Body)
	if err := envtiming.ActivityWritten(ctx, c, key, openedAt, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	before, err := envtiming.ServingPod(ctx, c, key)
	if err != nil {
		t.Fatal(err)
	}
	stopped, err := envtiming.IdleStop(ctx, c, key, 5*time.Minute)
	if err != nil {
		t.Fatalf("%s: %v", target.label, err)
	}
	run.stops[target.label] = stopped
	// IdleStop saw no pod listed; the pod itself is gone too, not just
	// hidden from the list (a real pod's object goes only once the
	// kubelet has stopped its containers).
	if err := c.Get(ctx, client.ObjectKeyFromObject(before), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Fatalf("%s: stopped as idle, but its pod %s is still there: %v", target.label, before.Name, err)
	}
	t.Logf("%s: stopped as idle in %s; pod %s gone", target.label, ms(stopped), before.Name)
	time.Sleep(2 * time.Second) // the stopped state reaches the gateway's cache
	// Nothing but the request below may start it: a wake from elsewhere
	// would time the request against a running environment.
	if err := c.Get(ctx, key, &ul); err != nil {
		t.Fatal(err)
	}
	if ul.Status.Phase != v1alpha1.PhaseStopped || ul.Status.StoppedReason != v1alpha1.StoppedIdle {
		t.Fatalf("%s: started again before the wake request: phase %s (%s), last activity %v", target.label, ul.Status.Phase, ul.Status.StoppedReason, ul.Status.LastActivityTime)
	}
	woke, err := envtiming.Wake(ctx, hc, u, target.want, 5*time.Minute)
	if err != nil {
		t.Fatalf("%s: waking it with a request: %v", target.label, err)
	}
	run.wakes[target.label] = woke
	// A request stuck on a dead address (the old pod's, from a cached DNS
	// answer) hung for over a minute before the gateway read pod
	// addresses from EndpointSlices and bounded its dials.
	for i, took := range woke.Took {
		if took > 30*time.Second {
			t.Errorf("%s: wake request %d of %d took %v (%s): the gateway hung on it", target.label, i+1, woke.Attempts, took, woke.Requests())
		}
	}
	after, err := envtiming.ServingPod(ctx, c, key)
	if err != nil {
		t.Fatal(err)
	}
	if after.UID == before.UID {
		t.Fatalf("%s: the answer after the wake came from the pod that was stopped (%s)", target.label, after.Name)
	}
	podStart := "unknown"
	if d, ok := envtiming.CreatedToReady(after); ok {
		podStart = d.String()
	}
	run.podStarts[target.label] = podStart
	t.Logf("%s: woken: first byte of the app's answer %s after the request (%s); new pod %s created → Ready %s: %.100q",
		target.label, ms(woke.FirstByte), woke.Requests(), after.Name, podStart, woke.Body)
}

// keepOnlyAliceVSCode deletes the demo's environments other than alice's
// VS Code and returns its name.
func keepOnlyAliceVSCode(ctx context.Context, t *testing.T, c client.Client) string {
	t.Helper()
	var uls v1alpha1.UserlandList
	if err := c.List(ctx, &uls, client.InNamespace(devenv.DemoNamespace)); err != nil {
		t.Fatal(err)
	}
	keep := ""
	for i := range uls.Items {
		ul := &uls.Items[i]
		if ul.Spec.User == "alice" && ul.Spec.TemplateRef.Name == "vscode" {
			keep = ul.Name
			continue
		}
		if err := c.Delete(ctx, ul); err != nil {
			t.Fatal(err)
		}
	}
	if keep == "" {
		t.Fatalf("the dev stack made no VS Code environment for alice: %d Userlands", len(uls.Items))
	}
	return keep
}

// waitPhase waits until the Userland is Ready with no update pending.
func waitPhase(ctx context.Context, t *testing.T, c client.Client, key types.NamespacedName, timeout time.Duration) {
	t.Helper()
	var ul v1alpha1.Userland
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, key, &ul); err != nil {
			return false, nil
		}
		return ul.Status.Phase == v1alpha1.PhaseReady && !ul.Status.UpdatePending && ul.Status.URL != "", nil
	})
	if err != nil {
		t.Fatalf("%s not Ready within %s: phase %s, %+v", key, timeout, ul.Status.Phase, ul.Status.Conditions)
	}
}

func ms(d time.Duration) string {
	if d == 0 {
		return "not measured"
	}
	return d.Round(time.Millisecond).String()
}

// watchClient can watch, so the rollout is followed event by event.
func watchClient(t *testing.T, cfg *rest.Config) client.WithWatch {
	t.Helper()
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: v1alpha1.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
