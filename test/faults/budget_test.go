//go:build faults

package faults

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestBudgetUsageSurvivesAControllerKill: running environments' usage
// lives in their status (runningSince), not in the controller's memory.
// The controller is killed with SIGKILL while ten budgeted environments
// run; its successor keeps every run's start (no time lost, nothing
// rewritten), writes nothing once settled, and a stop afterwards counts
// the time the controller was dead.
func TestBudgetUsageSurvivesAControllerKill(t *testing.T) {
	const n = 10
	releaseLease(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	tmpl := testobj.MakeTemplate(ns, "lab").Container("app").Obj()
	tmpl.Spec.Budget = &v1alpha1.BudgetSpec{Hours: 1, Period: v1alpha1.BudgetWeek, Weighting: v1alpha1.WeightingNone}
	if err := env.Client.Create(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	controller1 := startController(t, "controller-1")
	holder := waitLeader(t, "", time.Minute)
	createUserlands(t, ns, "lab", n)
	waitReady(t, ns, n, 5*time.Minute)
	before := runningSince(t, ns)
	if len(before) != n {
		t.Fatalf("%d of %d running environments have usage.runningSince", len(before), n)
	}
	if err := controller1.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()

	startController(t, "controller-2")
	waitLeader(t, holder, 2*time.Minute)
	down := time.Since(killed)
	t.Logf("the new process took the lease %s after the kill", down.Round(time.Millisecond))
	// The new process recounts the template once; then all is quiet.
	waitTemplateCounts(t, ns, "lab", n)
	checkQuiet(t, ns, 10*time.Second)
	if after := runningSince(t, ns); len(after) != n {
		t.Fatalf("after the kill %d of %d environments have usage.runningSince", len(after), n)
	} else {
		for name, since := range before {
			if !after[name].Equal(since) {
				t.Errorf("%s: runningSince %s before the kill, %s after: the run was restarted", name, since, after[name])
			}
		}
	}

	// Stop one: its settled usage covers the time the controller was down.
	var ul v1alpha1.Userland
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "u-000"}, &ul); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(ul.DeepCopy())
	ul.Spec.Suspend = true
	if err := env.Client.Patch(ctx, &ul, patch); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	var used int64
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "u-000"}, &ul); err == nil &&
			ul.Status.Usage != nil && ul.Status.Usage.RunningSince == nil {
			used = ul.Status.Usage.UsedSeconds
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	want := int64(stopped.Sub(before["u-000"]) / time.Second)
	if used < want-2 || used > want+30 {
		t.Errorf("u-000 used %d s once stopped, want about %d s (its whole run, %s of it with the controller down)", used, want, down.Round(time.Second))
	}
}

// runningSince maps each running environment of ns to its usage's start.
func runningSince(t *testing.T, ns string) map[string]time.Time {
	t.Helper()
	var list v1alpha1.UserlandList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string]time.Time{}
	for _, ul := range list.Items {
		if u := ul.Status.Usage; u != nil && u.RunningSince != nil {
			out[ul.Name] = u.RunningSince.Time
		}
	}
	return out
}
