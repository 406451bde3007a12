package gateway_test

// Attacks on the EndpointSlice resolver (commit 14d84a3): who can make the
// gateway send a person's requests to a pod they control, by writing
// slices, Endpoints, Services or pods in an environment's namespace.

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/gateway"
	"github.com/userland-dev/userland/internal/testenv"
	"github.com/userland-dev/userland/internal/testobj"
)

// livePodIP waits for the address of a pod the environment user's
// Deployment made (one with an owner), not being deleted.
func livePodIP(t *testing.T, ns, user string) string {
	t.Helper()
	return podIPWhere(t, ns, user+"'s pod", client.MatchingLabels{v1alpha1.LabelUserland: user},
		func(p *corev1.Pod) bool { return len(p.OwnerReferences) > 0 })
}

// podIPWhere waits for the address of a pod of ns that labels selects and
// keep accepts, not being deleted; what names it in a failure.
func podIPWhere(t *testing.T, ns, what string, labels client.MatchingLabels, keep func(*corev1.Pod) bool) string {
	t.Helper()
	var ip string
	env.Eventually(t, time.Minute, what+" has an address", func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := env.Client.List(ctx, &pods, client.InNamespace(ns), labels); err != nil {
			return false, err
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.DeletionTimestamp == nil && p.Status.PodIP != "" && keep(p) {
				ip = p.Status.PodIP
				return true, nil
			}
		}
		return false, nil
	})
	return ip
}

// TestAdversaryBuiltinRolesCannotWriteEndpointSlices: the resolver trusts
// any slice carrying the EndpointSlice controller's managed-by label, so
// whoever may create or update EndpointSlices in a namespace can send its
// environments' viewers anywhere. None of Kubernetes' aggregated roles
// (edit, admin, view) nor Userland's own may, in the real API server's
// bootstrap policy; nor may they write Endpoints (the mirroring
// controller's input; its slices are excluded anyway, see
// TestAdversaryMirroredAndUnlabelledSlicesAreIgnored).
func TestAdversaryBuiltinRolesCannotWriteEndpointSlices(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	if err := env.CreateFromFile(ctx, filepath.Join(testenv.RepoRoot(), "config", "rbac", "roles.yaml")); err != nil {
		t.Fatal(err)
	}
	roles := []string{"view", "edit", "admin", "userland-user-manager", "userland-course-manager", "userland-template-author", "userland-viewer", "userland-gateway"}
	for _, role := range roles {
		user := "adv-slices-" + role
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		}
		if err := env.Client.Create(ctx, rb); err != nil {
			t.Fatal(err)
		}
	}
	for _, role := range roles {
		user := "adv-slices-" + role
		for _, check := range []struct{ group, resource, verb string }{
			{"discovery.k8s.io", "endpointslices", "create"},
			{"discovery.k8s.io", "endpointslices", "update"},
			{"discovery.k8s.io", "endpointslices", "patch"},
			{"", "endpoints", "create"},
			{"", "endpoints", "update"},
		} {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:               user,
				Groups:             []string{"system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Group: check.group, Resource: check.resource, Verb: check.verb},
			}}
			if err := env.Client.Create(ctx, sar); err != nil {
				t.Fatal(err)
			}
			t.Logf("%-26s %-6s %-15s allowed=%v", role, check.verb, check.resource, sar.Status.Allowed)
			if sar.Status.Allowed {
				t.Errorf("%s may %s %s in an environment namespace: it could point viewers at any address", role, check.verb, check.resource)
			}
		}
	}
	// And concretely: an editor's forged slice is refused.
	forged := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice-forged", Labels: map[string]string{
			discoveryv1.LabelServiceName: "alice", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
			v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "x"}}},
	}
	editor, err := client.New(env.ConfigFor("adv-slices-edit"), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := editor.Create(ctx, forged); err == nil {
		t.Errorf("an editor created a slice the resolver trusts")
	} else {
		t.Logf("editor's forged slice: %v", err)
	}
}

// TestAdversaryMirroredAndUnlabelledSlicesAreIgnored: a slice the
// EndpointSliceMirroring controller writes from hand-made Endpoints (for a
// selectorless Service carrying Userland's label and an environment's
// name) is never an environment's address; a slice of a Service without
// Userland's label never even enters the gateway's cache (the watch's
// label selector), so the cache holds environments' slices only.
func TestAdversaryMirroredAndUnlabelledSlicesAreIgnored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	c, _ := gatewayCache(t, "gateway-adv-mirror")
	// carol's Service is her Userland's, as the controller's would be: the
	// slice is refused for who wrote it, not for whose Service it names.
	carol := testobj.MakeUserland(ns, "carol", "carol", "none").Obj()
	if err := env.Client.Create(ctx, carol); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"carol", "dave"} {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{
				Name: "http", Port: 8080, TargetPort: intstr.FromInt32(8080)}}},
		}
		if name == "carol" {
			svc.Labels = map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}
			svc.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(carol, v1alpha1.GroupVersion.WithKind("Userland"))}
		}
		eps := &corev1.Endpoints{ //nolint:staticcheck // the mirroring controller's input
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: svc.Labels},
			Subsets: []corev1.EndpointSubset{{ //nolint:staticcheck
				Addresses: []corev1.EndpointAddress{{IP: "10.244.99.9", TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: name + "-pod"}}},
				Ports:     []corev1.EndpointPort{{Name: "http", Port: 8080}},
			}},
		}
		for _, o := range []client.Object{svc, eps} {
			if err := env.Client.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The API server's view: both got mirrored slices.
	mirrored := map[string]discoveryv1.EndpointSlice{}
	env.Eventually(t, time.Minute, "both Services have mirrored slices", func(ctx context.Context) (bool, error) {
		var all discoveryv1.EndpointSliceList
		if err := env.Client.List(ctx, &all, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, s := range all.Items {
			mirrored[s.Labels[discoveryv1.LabelServiceName]] = s
		}
		return len(mirrored) == 2, nil
	})
	t.Logf("carol's mirrored slice labels: %v", mirrored["carol"].Labels)
	// The gateway's cache: carol's (labelled) slice arrives, dave's never.
	env.Eventually(t, time.Minute, "carol's mirrored slice is in the gateway's cache", func(ctx context.Context) (bool, error) {
		var s discoveryv1.EndpointSlice
		err := c.Get(ctx, client.ObjectKeyFromObject(ptrTo(mirrored["carol"])), &s)
		return err == nil, client.IgnoreNotFound(err)
	})
	var cached discoveryv1.EndpointSliceList
	if err := c.List(ctx, &cached, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, s := range cached.Items {
		if s.Labels[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByValue {
			t.Errorf("the gateway caches slice %s without Userland's label (%v)", s.Name, s.Labels)
		}
	}
	_, err := gateway.EndpointSliceResolver{Reader: c, Wait: 500 * time.Millisecond}.Resolve(ctx, ns, "carol", carol.UID, 8080)
	if !errors.Is(err, gateway.ErrNoReadyEndpoint) {
		t.Errorf("a mirrored slice was taken as an environment's address: %v", err)
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestAdversaryPodCreatorJoinsAnEnvironment: someone who may only create
// pods in a namespace (no exec, no Secrets, no Services, no slices, no
// Userlands: a CI ServiceAccount, a lab's job runner) creates pods
// labelled userland.dev/userland=alice and named as her Deployment's
// would be, before her environment exists. Her Service selects her
// Userland's UID too, which mallory cannot know, so it never selects
// them, and alice is sent to her own pod.
func TestAdversaryPodCreatorJoinsAnEnvironment(t *testing.T) {
	t.Parallel()
	startController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	c, _ := gatewayCache(t, "gateway-adv-podlabel")
	tmpl := testobj.MakeTemplate(ns, "web").Container("web").Obj()
	if err := env.Client.Create(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	// mallory may create pods, nothing else.
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pod-creator"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create"}}},
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mallory"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "mallory"}},
	}
	for _, o := range []client.Object{role, rb} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	mallory, err := client.New(env.ConfigFor("mallory"), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"get", "exec"} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "mallory",
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Resource: "pods", Subresource: map[string]string{"exec": "exec"}[verb], Verb: map[string]string{"get": "get", "exec": "create"}[verb]}}}
		if err := env.Client.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed {
			t.Fatalf("mallory may %s pods: the test's premise is wrong", verb)
		}
	}
	// Her pods, made before alice's environment starts, so that the
	// simulated cluster's IPAM gives them lower addresses, and named as a
	// Deployment's pods of alice would be (<name>-<hash>-<5 characters>).
	var mine []string
	for i := range 3 {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("alice-bcdfghjk-xz24%c", "bcd"[i]),
				Labels: map[string]string{v1alpha1.LabelUserland: "alice"}},
			Spec: *tmpl.Spec.PodTemplate.Spec.DeepCopy(),
		}
		if err := mallory.Create(ctx, p); err != nil {
			t.Fatalf("mallory creating a pod: %v", err)
		}
		mine = append(mine, p.Name)
	}
	if err := env.Client.Create(ctx, testobj.MakeUserland(ns, "alice", "alice", "web").Obj()); err != nil {
		t.Fatal(err)
	}
	env.WaitPhase(t, ns, "alice", v1alpha1.PhaseReady)
	alices := livePodIP(t, ns, "alice")
	malloryIPs := map[string]bool{}
	env.Eventually(t, time.Minute, "mallory's pods run", func(ctx context.Context) (bool, error) {
		for _, name := range mine {
			var p corev1.Pod
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
				return false, err
			}
			if p.Status.PodIP == "" {
				return false, nil
			}
			malloryIPs[p.Status.PodIP] = true
		}
		return true, nil
	})
	// Her slices list her pod, and for a while nothing else.
	listed := func(ctx context.Context) ([]string, error) {
		var list discoveryv1.EndpointSliceList
		if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{gateway.ServiceIndex: "alice"}); err != nil {
			return nil, err
		}
		var addrs []string
		for _, s := range list.Items {
			for _, ep := range s.Endpoints {
				addrs = append(addrs, ep.Addresses...)
			}
		}
		return addrs, nil
	}
	env.Eventually(t, time.Minute, "alice's slices list her pod", func(ctx context.Context) (bool, error) {
		addrs, err := listed(ctx)
		return slices.Contains(addrs, alices), err
	})
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		addrs, err := listed(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range addrs {
			if malloryIPs[a] {
				t.Fatalf("alice's Service selects mallory's pod at %s", a)
			}
		}
	}
	got, err := gateway.EndpointSliceResolver{Reader: c, Wait: 10 * time.Second}.Resolve(ctx, ns, "alice", userlandUID(t, ns, "alice"), 8080)
	t.Logf("alice's pod %s, mallory's pods %v, resolved %s (%v)", alices, malloryIPs, got, err)
	if err != nil {
		t.Fatalf("alice's environment did not resolve: %v", err)
	}
	ip := netip.MustParseAddrPort(got).Addr().String()
	if malloryIPs[ip] {
		t.Errorf("alice's requests go to mallory's pod %s (alice's own is %s): anyone who may create a pod in the namespace can take over a viewer's traffic", ip, alices)
	} else if ip != alices {
		t.Errorf("alice's requests go to %s, neither hers nor mallory's", ip)
	}
}

// TestAdversaryServiceSwapRoutesToAnotherEnvironment: someone who may
// delete and create Services in the namespace (not pods, not exec)
// replaces alice's Service with one of the same name, carrying Userland's
// label and selecting bob's environment's pod. Its slices are written by
// Kubernetes' own EndpointSlice controller under the name alice, so the
// resolver takes them as alice's. The controller stalls alice
// (NameConflict, phase Failed) once it notices; the question is whether
// the gateway sends alice to bob's pod before (or instead).
//
// Before the resolver took only pods named as the environment's
// Deployment's, this broke in two runs of three (a race with the
// controller). TestAdversaryServicePatcherRoutesToAnotherEnvironment is
// the deterministic form.
func TestAdversaryServiceSwapRoutesToAnotherEnvironment(t *testing.T) {
	t.Parallel()
	startController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	c, _ := gatewayCache(t, "gateway-adv-svcswap")
	for _, o := range []client.Object{
		testobj.MakeTemplate(ns, "web").Container("web").Obj(),
		testobj.MakeUserland(ns, "alice", "alice", "web").Obj(),
		testobj.MakeUserland(ns, "bob", "bob", "web").Obj(),
		&rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "service-editor"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"create", "delete"}}},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "trent"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "service-editor"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "trent"}},
		},
	} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	trent, err := client.New(env.ConfigFor("trent"), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	env.WaitPhase(t, ns, "alice", v1alpha1.PhaseReady)
	env.WaitPhase(t, ns, "bob", v1alpha1.PhaseReady)
	alices, bobs := livePodIP(t, ns, "alice"), livePodIP(t, ns, "bob")
	resolver := gateway.EndpointSliceResolver{Reader: c, Wait: 200 * time.Millisecond, Poll: 10 * time.Millisecond}
	if got, err := resolver.Resolve(ctx, ns, "alice", userlandUID(t, ns, "alice"), 8080); err != nil || got != alices+":8080" {
		t.Fatalf("before: %s %v, want alice's %s", got, err, alices)
	}

	// Watch what the gateway would do, as the gateway decides it: the
	// Userland's phase from its cache, then the resolver.
	type seen struct{ phase, addr string }
	done := make(chan []seen)
	stop := make(chan struct{})
	go func() {
		var out []seen
		deadline := time.After(20 * time.Second)
		for {
			select {
			case <-stop:
				done <- out
				return
			case <-deadline:
				done <- out
				return
			default:
			}
			var ul v1alpha1.Userland
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "alice"}, &ul); err != nil {
				continue
			}
			if ul.Status.Phase != v1alpha1.PhaseReady {
				if s := (seen{string(ul.Status.Phase), ""}); len(out) == 0 || out[len(out)-1] != s {
					out = append(out, s)
				}
				time.Sleep(10 * time.Millisecond)
				continue
			}
			addr, _ := resolver.Resolve(ctx, ns, "alice", ul.UID, 8080)
			if len(out) == 0 || out[len(out)-1] != (seen{"Ready", addr}) {
				out = append(out, seen{"Ready", addr})
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()

	var old corev1.Service
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "alice"}, &old); err != nil {
		t.Fatal(err)
	}
	if err := trent.Delete(ctx, &old); err != nil {
		t.Fatalf("trent deleting alice's Service: %v", err)
	}
	swapped := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice", Labels: map[string]string{
			v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelUserland: "alice"}},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone,
			Selector: map[string]string{v1alpha1.LabelUserland: "bob"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromInt32(8080)}}},
	}
	var created bool
	for range 200 {
		err := trent.Create(ctx, swapped.DeepCopy())
		if err == nil {
			created = true
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("trent's Service created: %v", created)
	time.Sleep(15 * time.Second)
	close(stop)
	trace := <-done
	t.Logf("alice as the gateway saw her: %v (alice's pod %s, bob's pod %s)", trace, alices, bobs)
	var final v1alpha1.Userland
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "alice"}, &final); err != nil {
		t.Fatal(err)
	}
	t.Logf("alice's phase at the end: %s", final.Status.Phase)
	for _, s := range trace {
		if s.phase == "Ready" && s.addr == bobs+":8080" {
			t.Errorf("while alice was Ready, the gateway would have sent her to bob's pod %s", bobs)
			break
		}
	}
}

// TestAdversaryServicePatcherRoutesToAnotherEnvironment: someone who may
// only patch Services in the namespace (no pods, no exec, no Userlands)
// points alice's Service's selector at bob's environment. The controller
// keeps a Service in line only when its applied-hash annotation differs
// from the desired one, and the patch leaves that annotation alone, so it
// never puts the selector back; alice stays Ready. Kubernetes' own
// EndpointSlice controller then writes alice's slices with bob's pod, and
// the resolver — which trusts any endpoint of those slices that is a pod
// of the namespace — sends alice, with her identity headers, to bob's
// environment, for as long as trent likes.
func TestAdversaryServicePatcherRoutesToAnotherEnvironment(t *testing.T) {
	t.Parallel()
	startController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	c, _ := gatewayCache(t, "gateway-adv-svcpatch")
	for _, o := range []client.Object{
		testobj.MakeTemplate(ns, "web").Container("web").Obj(),
		testobj.MakeUserland(ns, "alice", "alice", "web").Obj(),
		testobj.MakeUserland(ns, "bob", "bob", "web").Obj(),
		&rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "service-patcher"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"patch"}}},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "trent"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "service-patcher"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "trent"}},
		},
	} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	trent, err := client.New(env.ConfigFor("trent"), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	env.WaitPhase(t, ns, "alice", v1alpha1.PhaseReady)
	env.WaitPhase(t, ns, "bob", v1alpha1.PhaseReady)
	alices, bobs := livePodIP(t, ns, "alice"), livePodIP(t, ns, "bob")
	resolver := gateway.EndpointSliceResolver{Reader: c, Wait: 5 * time.Second}
	if got, err := resolver.Resolve(ctx, ns, "alice", userlandUID(t, ns, "alice"), 8080); err != nil || got != alices+":8080" {
		t.Fatalf("before: %s %v, want alice's %s", got, err, alices)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice"}}
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"selector":{"`+v1alpha1.LabelUserland+`":"bob"}}}`))
	if err := trent.Patch(ctx, svc, patch); err != nil {
		t.Fatalf("trent patching alice's Service: %v", err)
	}
	// Give the controller every chance to notice and undo it.
	time.Sleep(10 * time.Second)
	var now corev1.Service
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "alice"}, &now); err != nil {
		t.Fatal(err)
	}
	var ul v1alpha1.Userland
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "alice"}, &ul); err != nil {
		t.Fatal(err)
	}
	got, err := resolver.Resolve(ctx, ns, "alice", ul.UID, 8080)
	t.Logf("after 10 s: alice's Service selects %v, alice is %s in the gateway's cache, resolves to %s (%v); alice's pod %s, bob's %s",
		now.Spec.Selector, ul.Status.Phase, got, err, alices, bobs)
	if ul.Status.Phase == v1alpha1.PhaseReady && got == bobs+":8080" {
		t.Errorf("alice (Ready) is sent to bob's environment %s: a Service patcher (or bob with one) takes over her traffic", got)
	}
}

// TestAdversaryWakeResolvesWithinTheBudget: the gateway resolves the
// moment its own cache says the woken Userland is Ready; the slice comes
// through another watch. If the slice lagged past the resolver's wait the
// viewer would get a 502 right after every wake. Three stop-wake cycles,
// each resolved as the gateway does it, must find the new pod well within
// the budget and never the old address.
func TestAdversaryWakeResolvesWithinTheBudget(t *testing.T) {
	t.Parallel()
	startController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	c, _ := gatewayCache(t, "gateway-adv-wake")
	for _, o := range []client.Object{
		testobj.MakeTemplate(ns, "web").Container("web").Obj(),
		testobj.MakeUserland(ns, "alice", "alice", "web").Obj(),
	} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cachedPhase := func(want v1alpha1.Phase) {
		t.Helper()
		env.Eventually(t, time.Minute, "alice "+string(want)+" in the gateway's cache", func(ctx context.Context) (bool, error) {
			var ul v1alpha1.Userland
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "alice"}, &ul); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			return ul.Status.Phase == want, nil
		})
	}
	resolver := gateway.EndpointSliceResolver{Reader: c, Wait: 8 * time.Second, Poll: 5 * time.Millisecond}
	cachedPhase(v1alpha1.PhaseReady)
	prev, err := resolver.Resolve(ctx, ns, "alice", userlandUID(t, ns, "alice"), 8080)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		setSuspend(t, ns, "alice", true)
		cachedPhase(v1alpha1.PhaseStopped)
		setSuspend(t, ns, "alice", false)
		cachedPhase(v1alpha1.PhaseReady)
		start := time.Now()
		got, err := resolver.Resolve(ctx, ns, "alice", userlandUID(t, ns, "alice"), 8080)
		took := time.Since(start)
		now := livePodIP(t, ns, "alice") + ":8080"
		t.Logf("wake %d: resolved %s in %v (old %s, new pod %s)", i, got, took, prev, now)
		if err != nil {
			t.Fatalf("wake %d: %v", i, err)
		}
		if got != now {
			t.Errorf("wake %d: resolved %s, the new pod is %s", i, got, now)
		}
		if took > 4*time.Second {
			t.Errorf("wake %d: the slice lagged the Userland by %v, half the budget", i, took)
		}
		prev = got
	}
}
