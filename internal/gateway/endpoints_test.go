package gateway_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/gateway"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestEndpointSliceResolverFollowsThePod: the gateway, under its shipped
// role and with its own cache settings, sends a person to the pod the
// environment's Service selects, as Kubernetes' EndpointSlice controller
// reports it: nothing while the environment is stopped (rather than a
// stale address of its old pod), the new pod's address after the wake,
// and never an address from a slice the EndpointSlice controller did not
// write.
func TestEndpointSliceResolverFollowsThePod(t *testing.T) {
	t.Parallel()
	startController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	for _, o := range []client.Object{
		testobj.MakeTemplate(ns, "web").Container("web").Obj(),
		testobj.MakeUserland(ns, "alice", "alice", "web").Obj(),
	} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := gatewayCache(t, "gateway-resolver")
	resolver := gateway.EndpointSliceResolver{Reader: c, Wait: 30 * time.Second}

	// A slice someone wrote by hand, naming the Service and carrying the
	// controller's label, pointing elsewhere.
	forged := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice-forged", Labels: map[string]string{
			discoveryv1.LabelServiceName: "alice",
			v1alpha1.LabelManagedBy:      v1alpha1.ManagedByValue,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{"10.0.0.1"},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "elsewhere"},
		}},
	}
	if err := env.Client.Create(ctx, forged); err != nil {
		t.Fatal(err)
	}

	env.WaitPhase(t, ns, "alice", v1alpha1.PhaseReady)
	first := livePodIP(t, ns, "alice")
	start := time.Now()
	got, err := resolver.Resolve(ctx, ns, "alice", userlandUID(t, ns, "alice"), 8080)
	t.Logf("resolved the running environment in %v", time.Since(start))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first+":8080", got); diff != "" {
		t.Errorf("running environment's address (-want +got):\n%s", diff)
	}

	setSuspend(t, ns, "alice", true)
	env.WaitPhase(t, ns, "alice", v1alpha1.PhaseStopped)
	stopped := gateway.EndpointSliceResolver{Reader: c, Wait: time.Second}
	env.Eventually(t, time.Minute, "the stopped environment has no address", func(ctx context.Context) (bool, error) {
		got, err := stopped.Resolve(ctx, ns, "alice", userlandUID(t, ns, "alice"), 8080)
		if err == nil {
			t.Logf("still %s", got)
			return false, nil
		}
		return errors.Is(err, gateway.ErrNoReadyEndpoint), err
	})

	// Bob's environment starts while alice's is stopped: the simulated
	// cluster, like a real node's IPAM, may give bob the address alice's
	// old pod had, which is what a stale DNS answer would send alice to.
	if err := env.Client.Create(ctx, testobj.MakeUserland(ns, "bob", "bob", "web").Obj()); err != nil {
		t.Fatal(err)
	}
	env.WaitPhase(t, ns, "bob", v1alpha1.PhaseReady)
	bobs := livePodIP(t, ns, "bob")
	setSuspend(t, ns, "alice", false)
	env.WaitPhase(t, ns, "alice", v1alpha1.PhaseReady)
	second := livePodIP(t, ns, "alice")
	start = time.Now()
	got, err = resolver.Resolve(ctx, ns, "alice", userlandUID(t, ns, "alice"), 8080)
	t.Logf("resolved the woken environment in %v (alice's old pod %s, bob's pod %s, alice's new pod %s)", time.Since(start), first, bobs, second)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(second+":8080", got); diff != "" {
		t.Errorf("woken environment's address (-want +got):\n%s", diff)
	}
	if got == bobs+":8080" {
		t.Errorf("alice was sent to bob's pod %s", got)
	}
}

func setSuspend(t *testing.T, ns, name string, suspend bool) {
	t.Helper()
	ctx := context.Background()
	var ul v1alpha1.Userland
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &ul); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(ul.DeepCopy())
	ul.Spec.Suspend = suspend
	if err := env.Client.Patch(ctx, &ul, patch); err != nil {
		t.Fatal(err)
	}
}

// TestReadyAddress: which endpoint of an environment's slices a person is
// sent to.
func TestReadyAddress(t *testing.T) {
	t.Parallel()
	pod := func(ns string) *corev1.ObjectReference {
		return &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "u-6d4b8c9f7c-x2x4z", UID: "uid-p"}
	}
	other := &corev1.ObjectReference{Kind: "Pod", Namespace: "cs101", Name: "u-6d4b8c9f7c-q2q4z", UID: "uid-q"}
	elsewhere := &corev1.ObjectReference{Kind: "Pod", Namespace: "cs101", Name: "v-6d4b8c9f7c-x2x4z", UID: "uid-v"}
	ep := func(addr string, ready, terminating *bool, ref *corev1.ObjectReference) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{addr}, TargetRef: ref,
			Conditions: discoveryv1.EndpointConditions{Ready: ready, Terminating: terminating}}
	}
	// The slices the EndpointSlice controller writes for a Service are
	// controlled by it.
	sliceOf := func(owner []metav1.OwnerReference, family discoveryv1.AddressType, eps ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
		return discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{OwnerReferences: owner}, AddressType: family, Endpoints: eps}
	}
	service := func(uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "u", UID: uid, Controller: ptr.To(true)}}
	}
	slice := func(family discoveryv1.AddressType, eps ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
		return sliceOf(service("svc-now"), family, eps...)
	}
	v4, v6, fqdn := discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN
	yes, no := ptr.To(true), ptr.To(false)
	for name, tc := range map[string]struct {
		slices []discoveryv1.EndpointSlice
		want   string
		pods   int
	}{
		"none":                       {nil, "", 0},
		"ready":                      {[]discoveryv1.EndpointSlice{slice(v4, ep("10.0.0.7", yes, nil, pod("cs101")))}, "10.0.0.7", 1},
		"ready unset means ready":    {[]discoveryv1.EndpointSlice{slice(v4, ep("10.0.0.7", nil, nil, pod("cs101")))}, "10.0.0.7", 1},
		"not ready":                  {[]discoveryv1.EndpointSlice{slice(v4, ep("10.0.0.7", no, nil, pod("cs101")))}, "", 0},
		"terminating":                {[]discoveryv1.EndpointSlice{slice(v4, ep("10.0.0.7", yes, yes, pod("cs101")))}, "", 0},
		"no target":                  {[]discoveryv1.EndpointSlice{slice(v4, ep("10.0.0.7", yes, nil, nil))}, "", 0},
		"a pod of another namespace": {[]discoveryv1.EndpointSlice{slice(v4, ep("10.0.0.7", yes, nil, pod("other")))}, "", 0},
		"another environment's pod":  {[]discoveryv1.EndpointSlice{slice(v4, ep("10.0.0.7", yes, nil, elsewhere))}, "", 0},
		"not a pod": {[]discoveryv1.EndpointSlice{slice(v4, ep("10.0.0.7", yes, nil,
			&corev1.ObjectReference{Kind: "Node", Namespace: "cs101", Name: "n"}))}, "", 0},
		"FQDN slices are ignored": {[]discoveryv1.EndpointSlice{slice(fqdn, ep("evil.example.com", yes, nil, pod("cs101")))}, "", 0},
		"not an address":          {[]discoveryv1.EndpointSlice{slice(v4, ep("evil.example.com", yes, nil, pod("cs101")))}, "", 1},
		"the old pod terminating, the new one ready": {[]discoveryv1.EndpointSlice{slice(v4,
			ep("10.0.0.3", no, yes, pod("cs101")), ep("10.0.0.9", yes, nil, pod("cs101")))}, "10.0.0.9", 1},
		"IPv4 before IPv6, one dual-stack pod": {[]discoveryv1.EndpointSlice{slice(v6, ep("fd00::1", yes, nil, pod("cs101"))),
			slice(v4, ep("10.0.0.9", yes, nil, pod("cs101")))}, "10.0.0.9", 1},
		"IPv6 alone": {[]discoveryv1.EndpointSlice{slice(v6, ep("fd00::1", yes, nil, pod("cs101")))}, "fd00::1", 1},
		"a slice of an earlier Service of the same name": {[]discoveryv1.EndpointSlice{
			sliceOf(service("svc-before"), v4, ep("10.0.0.3", yes, nil, other)), slice(v4, ep("10.0.0.9", yes, nil, pod("cs101")))}, "10.0.0.9", 1},
		"only an earlier Service's slice": {[]discoveryv1.EndpointSlice{sliceOf(service("svc-before"), v4, ep("10.0.0.3", yes, nil, other))}, "", 0},
		"a slice no Service controls":     {[]discoveryv1.EndpointSlice{sliceOf(nil, v4, ep("10.0.0.3", yes, nil, other))}, "", 0},
		"a slice owned but not controlled by the Service": {[]discoveryv1.EndpointSlice{sliceOf([]metav1.OwnerReference{
			{APIVersion: "v1", Kind: "Service", Name: "u", UID: "svc-now"}}, v4, ep("10.0.0.3", yes, nil, other))}, "", 0},
		"a slice controlled by something else with the Service's UID": {[]discoveryv1.EndpointSlice{sliceOf([]metav1.OwnerReference{
			{APIVersion: "v1", Kind: "Pod", Name: "u", UID: "svc-now", Controller: ptr.To(true)}}, v4, ep("10.0.0.3", yes, nil, other))}, "", 0},
		"two ready pods are counted (the resolver refuses both)": {[]discoveryv1.EndpointSlice{slice(v4,
			ep("10.0.0.9", yes, nil, pod("cs101")), ep("10.0.0.10", yes, nil, other))}, "10.0.0.10", 2},
		"a second pod not ready is not counted": {[]discoveryv1.EndpointSlice{slice(v4,
			ep("10.0.0.9", yes, nil, pod("cs101")), ep("10.0.0.10", no, nil, other))}, "10.0.0.9", 1},
	} {
		addr, pods := gateway.ReadyAddress(tc.slices, "svc-now", "cs101", "u")
		if diff := cmp.Diff(tc.want, addr); diff != "" {
			t.Errorf("%s: address (-want +got):\n%s", name, diff)
		}
		if pods != tc.pods {
			t.Errorf("%s: %d ready pods, want %d", name, pods, tc.pods)
		}
	}
}
