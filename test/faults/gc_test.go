//go:build faults

package faults

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestGarbageCollectionInterrupted deletes 30 Userlands, each with a
// claim under Retain and one under Delete, and kills
// kube-controller-manager (which runs the garbage collector) right after.
// Once it is back nothing owned is left, every Delete claim is gone, and
// no Retain claim was ever deleted.
func TestGarbageCollectionInterrupted(t *testing.T) {
	const n = 30
	releaseLease(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	tmpl := testobj.MakeTemplate(ns, "lab").Container("app").Volume("kept", "/kept").Volume("scratch", "/scratch").Obj()
	tmpl.Spec.Volumes[1].ReclaimPolicy = v1alpha1.ReclaimDelete
	if err := env.Client.Create(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	startController(t, "controller")
	createUserlands(t, ns, "lab", n)
	waitReady(t, ns, n, 3*time.Minute)

	// Retain claims are watched throughout: none may ever disappear.
	sampleCtx, stop := context.WithCancel(ctx)
	defer stop()
	minKept := n
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for sampleCtx.Err() == nil {
			var claims corev1.PersistentVolumeClaimList
			if err := env.Client.List(sampleCtx, &claims, client.InNamespace(ns)); err == nil {
				kept := 0
				for _, c := range claims.Items {
					if strings.HasSuffix(c.Name, "-kept") && c.DeletionTimestamp == nil {
						kept++
					}
				}
				minKept = min(minKept, kept)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()

	// Userlands are deleted one after another; kube-controller-manager is
	// killed a third of the way through, so some deletions are being
	// collected and the rest wait for it.
	var killed time.Time
	for i := range n {
		ul := &v1alpha1.Userland{}
		ul.Namespace, ul.Name = ns, fmt.Sprintf("u-%03d", i)
		if err := env.Client.Delete(ctx, ul); err != nil {
			t.Fatal(err)
		}
		if i == n/3 {
			if err := env.StopComponent("kube-controller-manager", true); err != nil {
				t.Fatal(err)
			}
			killed = time.Now()
			var deps appsv1.DeploymentList
			_ = env.Client.List(ctx, &deps, client.InNamespace(ns))
			t.Logf("killed kube-controller-manager after %d deletions, %d of %d Deployments left", i+1, len(deps.Items), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(5 * time.Second)
	if err := env.StartComponent(ctx, "kube-controller-manager"); err != nil {
		t.Fatal(err)
	}
	left := func(ctx context.Context) (int, int, int, int) {
		var deps appsv1.DeploymentList
		var svcs corev1.ServiceList
		var claims corev1.PersistentVolumeClaimList
		var uls v1alpha1.UserlandList
		for _, l := range []client.ObjectList{&deps, &svcs, &claims, &uls} {
			_ = env.Client.List(ctx, l, client.InNamespace(ns))
		}
		scratch := 0
		for _, c := range claims.Items {
			if strings.HasSuffix(c.Name, "-scratch") {
				scratch++
			}
		}
		return len(uls.Items), len(deps.Items), len(svcs.Items), scratch
	}
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		u, d, s, c := left(ctx)
		return u+d+s+c == 0, nil
	})
	u, d, s, c := left(ctx)
	if err != nil {
		t.Fatalf("after the restart: %d Userlands, %d Deployments, %d Services, %d Delete claims left; want none", u, d, s, c)
	}
	t.Logf("everything owned collected %s after the kill", time.Since(killed).Round(time.Millisecond))
	stop()
	<-sampled
	var claims corev1.PersistentVolumeClaimList
	if err := env.Client.List(ctx, &claims, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(claims.Items) != n || minKept != n {
		t.Errorf("%d claims left (at least %d Retain claims at every sample); want the %d Retain claims, always", len(claims.Items), minKept, n)
	}
	for _, c := range claims.Items {
		if !strings.HasSuffix(c.Name, "-kept") || len(c.OwnerReferences) != 0 {
			t.Errorf("claim %s left with owners %v; want only unowned Retain claims (<userland>-kept)", c.Name, c.OwnerReferences)
		}
	}
}
