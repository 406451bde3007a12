//go:build faults

package faults

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/naming"
	"github.com/userland-dev/userland/internal/simcluster"
	"github.com/userland-dev/userland/internal/testobj"
)

// leaseName is the controller's leader-election lease, in leaseNamespace.
const (
	leaseName      = "userland-controller.userland.dev"
	leaseNamespace = "default"
)

// startController runs `userland controller` as its own process, with
// leader election on and the shipped defaults unless args override them.
func startController(t *testing.T, name string, args ...string) *simcluster.Process {
	t.Helper()
	all := []string{"controller", "--kubeconfig=" + env.KubeconfigPath,
		"--gateway-namespace=userland-system", "--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--leader-election-namespace=" + leaseNamespace}
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--webhook-port=") }) {
		all = append(all, "--disable-webhooks")
	}
	all = append(all, args...)
	p, err := simcluster.StartProcess(t.TempDir(), name, userlandBin, all...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("%s's log: %s", name, p.LogPath())
		}
	})
	return p
}

// leaseHolder is the lease's current holder ("" when none).
func leaseHolder(ctx context.Context) string {
	var l coordinationv1.Lease
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: leaseNamespace, Name: leaseName}, &l); err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// waitLeader waits for a holder other than not, and returns it.
func waitLeader(t *testing.T, not string, timeout time.Duration) string {
	t.Helper()
	var holder string
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		holder = leaseHolder(ctx)
		return holder != "" && holder != not, nil
	})
	if err != nil {
		t.Fatalf("no new leader within %s (holder %q)", timeout, holder)
	}
	return holder
}

// releaseLease forgets a previous test's holder, so each test elects afresh.
func releaseLease(t *testing.T) {
	t.Helper()
	l := &coordinationv1.Lease{}
	l.Namespace, l.Name = leaseNamespace, leaseName
	if err := client.IgnoreNotFound(env.Client.Delete(context.Background(), l)); err != nil {
		t.Fatal(err)
	}
}

// createUserlands creates n Userlands of template in ns, ten at a time.
func createUserlands(t *testing.T, ns, template string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 10)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ul := testobj.MakeUserland(ns, fmt.Sprintf("u-%03d", i), fmt.Sprintf("student%03d", i), template).Obj()
			if err := env.Client.Create(context.Background(), ul); err != nil {
				t.Errorf("creating %s: %v", ul.Name, err)
			}
		}()
	}
	wg.Wait()
}

// countReady counts Ready Userlands in ns.
func countReady(ctx context.Context, ns string) (int, error) {
	var list v1alpha1.UserlandList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	ready := 0
	for _, ul := range list.Items {
		if ul.Status.Phase == v1alpha1.PhaseReady {
			ready++
		}
	}
	return ready, nil
}

// waitReady waits until at least n Userlands in ns are Ready and returns
// how long it took.
func waitReady(t *testing.T, ns string, n int, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	ready := 0
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		ready, err = countReady(ctx, ns)
		return err == nil && ready >= n, nil
	})
	if err != nil {
		t.Fatalf("%d of %d Userlands Ready after %s", ready, n, timeout)
	}
	return time.Since(start)
}

// checkChildren lists what the controller makes in ns and checks each is
// owned by exactly one existing Userland, one of each kind per Userland.
func checkChildren(t *testing.T, ns string, n int, claimsPerUserland int) {
	t.Helper()
	ctx := context.Background()
	var uls v1alpha1.UserlandList
	var deps appsv1.DeploymentList
	var svcs corev1.ServiceList
	var nps networkingv1.NetworkPolicyList
	var pvcs corev1.PersistentVolumeClaimList
	for _, l := range []client.ObjectList{&uls, &deps, &svcs, &nps, &pvcs} {
		if err := env.Client.List(ctx, l, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
	}
	uids := map[string]string{}
	for _, ul := range uls.Items {
		uids[string(ul.UID)] = ul.Name
	}
	owned := map[string]map[string]int{} // kind -> userland -> count
	check := func(kind string, objs []client.Object) {
		owned[kind] = map[string]int{}
		for _, o := range objs {
			refs := o.GetOwnerReferences()
			if len(refs) != 1 || refs[0].Kind != "Userland" || uids[string(refs[0].UID)] == "" {
				t.Errorf("orphan %s %s: owners %v", kind, o.GetName(), refs)
				continue
			}
			owned[kind][uids[string(refs[0].UID)]]++
		}
	}
	check("Deployment", ptrs(deps.Items))
	check("Service", ptrs(svcs.Items))
	// NetworkPolicies are shared: exactly one per template in use, owned
	// by no Userland.
	wantPolicies := map[string]bool{}
	for _, ul := range uls.Items {
		wantPolicies[naming.TemplateNetworkPolicy(ul.Spec.TemplateRef.Kind, ul.Spec.TemplateRef.Name)] = true
	}
	for _, np := range nps.Items {
		if !wantPolicies[np.Name] || len(np.OwnerReferences) != 0 {
			t.Errorf("NetworkPolicy %s (owners %v): want only the shared policies %v, unowned", np.Name, np.OwnerReferences, wantPolicies)
		}
	}
	if len(nps.Items) != len(wantPolicies) {
		t.Errorf("%d NetworkPolicies, want %d (one per template in use)", len(nps.Items), len(wantPolicies))
	}
	// Retained claims have no owner (so garbage collection never takes
	// user data); they are labelled with their Userland instead.
	owned["PersistentVolumeClaim"] = map[string]int{}
	names := map[string]bool{}
	for _, ul := range uls.Items {
		names[ul.Name] = true
	}
	for _, c := range pvcs.Items {
		if u := c.Labels[v1alpha1.LabelUserland]; names[u] {
			owned["PersistentVolumeClaim"][u]++
		} else {
			t.Errorf("orphan claim %s (labelled %q)", c.Name, u)
		}
	}
	if len(uls.Items) != n {
		t.Errorf("%d Userlands, want %d", len(uls.Items), n)
	}
	for _, ul := range uls.Items {
		for kind, want := range map[string]int{"Deployment": 1, "Service": 1, "PersistentVolumeClaim": claimsPerUserland} {
			if got := owned[kind][ul.Name]; got != want {
				t.Errorf("%s has %d %s(s), want %d", ul.Name, got, kind, want)
			}
		}
	}
	t.Logf("%d Userlands: %d Deployments, %d Services, %d NetworkPolicies, %d claims, none orphaned",
		len(uls.Items), len(deps.Items), len(svcs.Items), len(nps.Items), len(pvcs.Items))
}

func ptrs[T any, P interface {
	*T
	client.Object
}](items []T) []client.Object {
	out := make([]client.Object, len(items))
	for i := range items {
		out[i] = P(&items[i])
	}
	return out
}

// versions maps every object the controller writes in ns to its
// resourceVersion: any write, spec or status, changes it.
func versions(t *testing.T, ns string) map[string]string {
	t.Helper()
	out := map[string]string{}
	lists := map[string]client.ObjectList{
		"Userland": &v1alpha1.UserlandList{}, "Template": &v1alpha1.TemplateList{}, "Deployment": &appsv1.DeploymentList{},
		"Service": &corev1.ServiceList{}, "NetworkPolicy": &networkingv1.NetworkPolicyList{}, "PersistentVolumeClaim": &corev1.PersistentVolumeClaimList{},
	}
	for kind, l := range lists {
		if err := env.Client.List(context.Background(), l, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		objs, err := metaItems(l)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			out[kind+"/"+o.GetName()] = o.GetResourceVersion()
		}
	}
	return out
}

// waitTemplateCounts waits for the template's status to count n Ready
// Userlands: its counts are batched, and convergence includes them.
func waitTemplateCounts(t *testing.T, ns, name string, n int) {
	t.Helper()
	var tmpl v1alpha1.Template
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &tmpl)
		return err == nil && tmpl.Status.Userlands == int32(n) && tmpl.Status.ReadyUserlands == int32(n), nil
	})
	if err != nil {
		t.Fatalf("template %s counts %d Userlands, %d Ready; want %d", name, tmpl.Status.Userlands, tmpl.Status.ReadyUserlands, n)
	}
	// The write that set them is done; give the batch window time to pass.
	time.Sleep(2 * time.Second)
}

// checkQuiet asserts that nothing in ns is written for the given time.
func checkQuiet(t *testing.T, ns string, d time.Duration) {
	t.Helper()
	before := versions(t, ns)
	time.Sleep(d)
	after := versions(t, ns)
	var changed []string
	for k, v := range after {
		if before[k] != v {
			changed = append(changed, k)
		}
	}
	if len(changed) > 0 {
		t.Errorf("%d objects written in the %s after convergence, want none: %s", len(changed), d, strings.Join(head(changed, 10), ", "))
	} else {
		t.Logf("no object of %d written in the %s after convergence", len(after), d)
	}
}

func head(s []string, n int) []string { return s[:min(n, len(s))] }

// TestControllerKilledMidProvisioning kills the controller with SIGKILL
// while it provisions 300 Userlands; a new process takes over once the
// dead one's lease expires. Every Userland becomes Ready with exactly one
// of each child, nothing orphaned, and nothing is written afterwards.
func TestControllerKilledMidProvisioning(t *testing.T) {
	const n = 300
	releaseLease(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	tmpl := testobj.MakeTemplate(ns, "lab").Container("app").Volume("work", "/home/student").Obj()
	if err := env.Client.Create(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	controller1 := startController(t, "controller-1")
	holder := waitLeader(t, "", time.Minute)
	start := time.Now()
	createUserlands(t, ns, "lab", n)
	t.Logf("created %d Userlands in %s", n, time.Since(start).Round(time.Millisecond))
	// Kill it a third of the way through: some environments done, some
	// half-made, most not started.
	waitReady(t, ns, n/3, 5*time.Minute)
	ready, _ := countReady(ctx, ns)
	if err := controller1.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	t.Logf("killed the controller (SIGKILL) with %d of %d Ready, %s after the first create", ready, n, killed.Sub(start).Round(time.Millisecond))

	startController(t, "controller-2")
	waitLeader(t, holder, 2*time.Minute)
	t.Logf("the new process took the lease %s after the kill (lease duration 15s)", time.Since(killed).Round(time.Millisecond))
	waitReady(t, ns, n, 10*time.Minute)
	t.Logf("all %d Ready %s after the kill", n, (time.Since(killed)).Round(time.Millisecond))
	checkChildren(t, ns, n, 1)
	waitTemplateCounts(t, ns, "lab", n)
	checkQuiet(t, ns, 30*time.Second)
}

// TestLeaderFailoverMidRollout runs two controller replicas and kills the
// leader while an Immediate rollout with maxUnavailable 25% is under way.
// The stand-by takes the lease once the dead leader's expires, the number of
// environments unavailable at once never exceeds 25%, and the rollout
// completes.
func TestLeaderFailoverMidRollout(t *testing.T) {
	const n = 40
	const leaseDuration = 15 * time.Second
	releaseLease(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	tmpl := testobj.MakeTemplate(ns, "lab").Image("example.org/lab:1").Rollout(v1alpha1.RolloutImmediate, "25%").Obj()
	if err := env.Client.Create(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	leader := startController(t, "controller-a")
	holderA := waitLeader(t, "", time.Minute)
	startController(t, "controller-b")
	createUserlands(t, ns, "lab", n)
	waitReady(t, ns, n, 5*time.Minute)
	env.WaitDeploymentsAvailable(t, ns, time.Minute)

	// Sample what is unavailable, from the API server, throughout.
	var mu sync.Mutex
	maxSeen, samples, updated := 0, 0, 0
	sampleCtx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for sampleCtx.Err() == nil {
			if seen, err := env.SampleRollout(sampleCtx, ns, "example.org/lab:2"); err == nil {
				mu.Lock()
				maxSeen, samples, updated = max(maxSeen, seen.Unavailable), samples+1, seen.Updated
				mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	progress := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return updated, maxSeen
	}

	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur v1alpha1.Template
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "lab"}, &cur); err != nil {
			return err
		}
		cur.Spec.PodTemplate.Spec.Containers[0].Image = "example.org/lab:2"
		return env.Client.Update(ctx, &cur)
	})
	if err != nil {
		t.Fatal(err)
	}
	rolloutStart := time.Now()
	// Kill the leader once the rollout is visibly under way.
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		up, _ := progress()
		return up >= n/8, nil
	})
	if err != nil {
		t.Fatal("the rollout never started")
	}
	up, _ := progress()
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	t.Logf("killed the leader (SIGKILL) with %d of %d updated, %s into the rollout", up, n, killed.Sub(rolloutStart).Round(time.Millisecond))
	waitLeader(t, holderA, 2*leaseDuration)
	takeover := time.Since(killed)
	t.Logf("the stand-by took the lease %s after the kill (lease duration %s)", takeover.Round(time.Millisecond), leaseDuration)
	// client-go's candidates time the lease from when they last saw it
	// change, and poll every retry period (with jitter): a takeover lands
	// between the lease duration and about that plus two retry periods
	// after the kill. The bound here is generous; the figure is reported.
	if takeover > 2*leaseDuration {
		t.Errorf("takeover took %s, more than twice the lease duration %s", takeover, leaseDuration)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		up, _ := progress()
		ready, err := countReady(ctx, ns)
		return up == n && ready == n && err == nil, nil
	})
	stopSampling()
	<-sampled
	up, maxUnavailable := progress()
	if err != nil {
		t.Fatalf("rollout incomplete: %d of %d updated", up, n)
	}
	t.Logf("rollout complete in %s; at most %d of %d unavailable at once over %d samples (maxUnavailable 25%% = %d)",
		time.Since(rolloutStart).Round(time.Millisecond), maxUnavailable, n, samples, n/4)
	if maxUnavailable > n/4 {
		t.Errorf("%d environments unavailable at once, maxUnavailable is %d", maxUnavailable, n/4)
	}
	checkChildren(t, ns, n, 0)
}
