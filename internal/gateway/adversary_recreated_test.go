package gateway_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/gateway"
	"github.com/userland-dev/userland/internal/testenv"
	"github.com/userland-dev/userland/internal/testobj"
)

// holdFinalizer keeps an object the garbage collector deletes in the API
// server (and the gateway's cache) for as long as a test needs: a slow
// garbage collector, made deterministic.
const holdFinalizer = "test.userland.dev/hold"

// TestAdversaryRecreatedNameReachesTheOldPod: a user manager deletes
// alice's environment "lab" and at once creates "lab" again for bob, from
// the same template (so the new pods' names have the old ones' shape).
// The garbage collector removes alice's children one level at a time
// (Userland → Deployment → ReplicaSet → pod; Service → EndpointSlice),
// and here it is held at two of them:
//   - alice's ReplicaSet, so her pod stays running and Ready with the
//     label userland.dev/userland=lab;
//   - her Service's EndpointSlice, which lists that pod, Ready, under
//     the name "lab".
//
// And a pod with her pod's labels appears after bob's Service exists, as
// her ReplicaSet, not yet reached by the garbage collector, makes one
// when her environment was between pods (waking, restarting, evicted).
// Bob is sent to his own pod throughout: his Service selects his
// Userland's UID, and her Service's left-over slice does not count.
func TestAdversaryRecreatedNameReachesTheOldPod(t *testing.T) {
	t.Parallel()
	startController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	c, _ := gatewayCache(t, "gateway-adv-recreate")
	for _, o := range []client.Object{
		testobj.MakeTemplate(ns, "web").Container("web").Obj(),
		testobj.MakeUserland(ns, "lab", "alice", "web").Obj(),
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "um"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "userland-user-manager"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "um"}},
		},
	} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.CreateFromFile(ctx, filepath.Join(testenv.RepoRoot(), "config", "rbac", "roles.yaml")); err != nil {
		t.Fatal(err)
	}
	um, err := client.New(env.ConfigFor("um"), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	env.WaitPhase(t, ns, "lab", v1alpha1.PhaseReady)
	oldIP := livePodIP(t, ns, "lab")
	var old v1alpha1.Userland
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "lab"}, &old); err != nil {
		t.Fatal(err)
	}
	alicesPod := podAt(t, ns, oldIP)
	held := holdOldChildren(t, ns, "lab", oldIP)

	if err := um.Delete(ctx, &old); err != nil {
		t.Fatal(err)
	}
	var bobs *v1alpha1.Userland
	env.Eventually(t, time.Minute, "lab created again for bob", func(ctx context.Context) (bool, error) {
		ul := testobj.MakeUserland(ns, "lab", "bob", "web").Obj()
		if err := um.Create(ctx, ul); err != nil {
			return false, nil
		}
		bobs = ul
		return true, nil
	})
	// Generous: bob's Deployment waits for the garbage collector to
	// remove alice's, slow when many tests' namespaces are deleted at
	// once under -race.
	createdAt := time.Now()
	env.Eventually(t, 2*time.Minute, "bob's lab Ready", func(ctx context.Context) (bool, error) {
		var ul v1alpha1.Userland
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "lab"}, &ul)
		return err == nil && ul.UID == bobs.UID && ul.Status.Phase == v1alpha1.PhaseReady, client.IgnoreNotFound(err)
	})
	t.Logf("bob's lab Ready %s after it was created", time.Since(createdAt).Round(time.Millisecond))

	// A pod with alice's pod's labels and name shape, made now.
	late := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: alicesPod.Name[:len(alicesPod.Name)-5] + "zzzzz", Labels: alicesPod.Labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "example.org/web:1"}}},
	}
	if err := env.Client.Create(ctx, late); err != nil {
		t.Fatal(err)
	}
	lateIP := podIPWhere(t, ns, late.Name, client.MatchingLabels(late.Labels), func(p *corev1.Pod) bool { return p.Name == late.Name })

	// Alice's pod must still be there, Ready, and listed by the left-over
	// slice in the gateway's cache, or this test proves nothing.
	if p := podAt(t, ns, oldIP); p.UID != alicesPod.UID || p.DeletionTimestamp != nil {
		t.Fatalf("alice's pod is gone or going (%s, deleting %v): the hold did not work", p.Name, p.DeletionTimestamp != nil)
	}
	var stale discoveryv1.EndpointSlice
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: held.slice}, &stale); err != nil || !sliceListsReady(&stale, oldIP) {
		t.Fatalf("the left-over slice does not list alice's pod Ready in the gateway's cache (err %v): this test proves nothing", err)
	}
	bobsIP := podIPWhere(t, ns, "bob's pod", client.MatchingLabels{v1alpha1.LabelUserlandUID: string(bobs.UID)}, func(*corev1.Pod) bool { return true })
	if bobsIP == oldIP || bobsIP == lateIP {
		t.Fatalf("bob's pod shares an address with alice's (%s) or the late pod (%s): this test cannot tell them apart", oldIP, lateIP)
	}

	resolver := gateway.EndpointSliceResolver{Reader: c, Wait: 5 * time.Second, Poll: 10 * time.Millisecond}
	var got string
	var lastErr error
	env.Eventually(t, time.Minute, "bob's lab resolves", func(ctx context.Context) (bool, error) {
		got, lastErr = resolver.Resolve(ctx, ns, "lab", bobs.UID, 8080)
		return lastErr == nil, lastErr
	})
	// For a while: the late pod becomes Ready within it.
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		got, err := resolver.Resolve(ctx, ns, "lab", bobs.UID, 8080)
		if err != nil || got != bobsIP+":8080" {
			t.Fatalf("bob's lab resolved to %q (%v), want his pod's %s:8080 (alice's %s, the late pod's %s); %s", got, err, bobsIP, oldIP, lateIP, recreatedState(t, ns, "lab"))
		}
	}
	// The API server's slices of bob's Service list only his pod.
	var slices discoveryv1.EndpointSliceList
	if err := env.Client.List(ctx, &slices, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: "lab"}); err != nil {
		t.Fatal(err)
	}
	for _, s := range slices.Items {
		if s.Name == held.slice {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.TargetRef != nil && (ep.TargetRef.Name == alicesPod.Name || ep.TargetRef.Name == late.Name) {
				t.Errorf("bob's Service's slice %s lists %s", s.Name, ep.TargetRef.Name)
			}
		}
	}
	// Alice's request, authorised before her lab was deleted, goes nowhere.
	if addr, err := resolver.Resolve(ctx, ns, "lab", old.UID, 8080); err == nil {
		t.Errorf("alice's deleted lab resolved to %s", addr)
	}
	t.Logf("bob resolved to his pod at %s; alice's pod (still Ready, listed by her Service's left-over slice %s) at %s, the late pod at %s", got, held.slice, oldIP, lateIP)
}

// podAt is the pod of namespace ns with address ip.
func podAt(t *testing.T, ns, ip string) *corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := env.Client.List(context.Background(), &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		if pods.Items[i].Status.PodIP == ip {
			return &pods.Items[i]
		}
	}
	t.Fatalf("no pod at %s", ip)
	return nil
}

// heldChildren are the deleted environment's objects a test keeps.
type heldChildren struct {
	replicaSet, slice string
}

// holdOldChildren puts holdFinalizer on the environment's ReplicaSet and
// on its Service's slice that lists ip, and removes both finalizers when
// the test ends.
func holdOldChildren(t *testing.T, ns, name, ip string) *heldChildren {
	t.Helper()
	ctx := context.Background()
	h := &heldChildren{}
	var sets appsv1.ReplicaSetList
	if err := env.Client.List(ctx, &sets, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelUserland: name}); err != nil {
		t.Fatal(err)
	}
	if len(sets.Items) != 1 {
		t.Fatalf("%d ReplicaSets of %s, want 1", len(sets.Items), name)
	}
	h.replicaSet = sets.Items[0].Name
	env.Eventually(t, time.Minute, "the Service's slice lists the pod Ready", func(ctx context.Context) (bool, error) {
		var list discoveryv1.EndpointSliceList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: name}); err != nil {
			return false, err
		}
		for i := range list.Items {
			if sliceListsReady(&list.Items[i], ip) {
				h.slice = list.Items[i].Name
				return true, nil
			}
		}
		return false, nil
	})
	hold := func(obj client.Object, key string, add bool) error {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: key}, obj); err != nil {
			return client.IgnoreNotFound(err)
		}
		finalizers := slices.DeleteFunc(obj.GetFinalizers(), func(f string) bool { return f == holdFinalizer })
		if add {
			finalizers = append(finalizers, holdFinalizer)
		}
		patch := client.MergeFromWithOptions(obj.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
		obj.SetFinalizers(finalizers)
		return client.IgnoreNotFound(env.Client.Patch(ctx, obj, patch))
	}
	for _, step := range []func() error{
		func() error { return hold(&appsv1.ReplicaSet{}, h.replicaSet, true) },
		func() error { return hold(&discoveryv1.EndpointSlice{}, h.slice, true) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, err := range []error{
			hold(&appsv1.ReplicaSet{}, h.replicaSet, false),
			hold(&discoveryv1.EndpointSlice{}, h.slice, false),
		} {
			if err != nil {
				t.Errorf("releasing a held object: %v", err)
			}
		}
	})
	return h
}

// sliceListsReady: the slice lists ip as a Ready, not terminating pod.
func sliceListsReady(s *discoveryv1.EndpointSlice, ip string) bool {
	for _, ep := range s.Endpoints {
		c := ep.Conditions
		if slices.Contains(ep.Addresses, ip) && (c.Ready == nil || *c.Ready) && (c.Terminating == nil || !*c.Terminating) {
			return true
		}
	}
	return false
}

// recreatedState describes, for a failure message, the Userland name and
// every object that carries it: which owner each belongs to and whether it
// is being deleted.
func recreatedState(t *testing.T, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	var ul v1alpha1.Userland
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &ul); err != nil {
		fmt.Fprintf(&b, "userland: %v; ", err)
	} else {
		fmt.Fprintf(&b, "userland uid=%s gen=%d observed=%d phase=%s conditions=", ul.UID, ul.Generation, ul.Status.ObservedGeneration, ul.Status.Phase)
		for _, c := range ul.Status.Conditions {
			fmt.Fprintf(&b, "[%s=%s %s: %s]", c.Type, c.Status, c.Reason, c.Message)
		}
		b.WriteString("; ")
	}
	describe := func(kind string, o client.Object) {
		owner := types.UID("none")
		if ref := metav1.GetControllerOf(o); ref != nil {
			owner = ref.UID
		}
		fmt.Fprintf(&b, "%s %s uid=%s owner=%s deleting=%v finalizers=%v; ", kind, o.GetName(), o.GetUID(), owner, o.GetDeletionTimestamp() != nil, o.GetFinalizers())
	}
	var dep appsv1.Deployment
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &dep); err != nil {
		fmt.Fprintf(&b, "deployment: %v; ", err)
	} else {
		describe("deployment", &dep)
		fmt.Fprintf(&b, "(available %d of %d) ", dep.Status.AvailableReplicas, dep.Status.Replicas)
	}
	var pods corev1.PodList
	if err := env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelUserland: name}); err != nil {
		fmt.Fprintf(&b, "pods: %v", err)
	}
	for i := range pods.Items {
		describe("pod", &pods.Items[i])
		fmt.Fprintf(&b, "(%s) ", pods.Items[i].Status.Phase)
	}
	return b.String()
}
