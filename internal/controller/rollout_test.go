package controller

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/templates"
)

// The rollout budget is arithmetic over what the cache holds; nothing the
// API server decides is involved, so a fake client stands in for the cache
// (the real one is exercised by TestRolloutImmediateRespectsMaxUnavailable).
func TestRolloutBudgetCountsUnavailableAndInflightRestarts(t *testing.T) {
	t.Parallel()
	const ns = "class"
	now := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	// env builds a sibling: running (or stopped) and available (or not).
	env := func(name string, running, available bool) []client.Object {
		ul := &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.UserlandSpec{User: name, TemplateRef: v1alpha1.TemplateReference{Kind: v1alpha1.TemplateKindTemplate, Name: "t"}}}
		replicas := int32(0)
		if running {
			replicas = 1
		}
		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas)}}
		dep.Spec.Template.Annotations = map[string]string{AnnotationTemplateHash: "old"}
		dep.Status.ObservedGeneration = 1
		if available {
			dep.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: replicas, UpdatedReplicas: replicas, AvailableReplicas: replicas,
				Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}}
		}
		return []client.Object{ul, dep}
	}
	// restarted is a sibling whose Deployment the cache shows with the
	// pod template its recorded restart applies ("new"; the others show
	// "old").
	restarted := func(objs []client.Object) []client.Object {
		objs[1].(*appsv1.Deployment).Spec.Template.Annotations = map[string]string{AnnotationTemplateHash: "new"}
		return objs
	}
	// unobserved is a sibling whose Deployment the cache shows written
	// (generation 2) but not yet observed by the Deployment controller: its
	// status, still the old pod's, says available.
	unobserved := func(objs []client.Object) []client.Object {
		objs[1].(*appsv1.Deployment).Generation = 2
		return objs
	}
	// eight is eight running siblings, a unavailable and the rest
	// available: 25% leaves room for one more restart.
	eight := func() [][]client.Object {
		return [][]client.Object{env("a", true, false), env("b", true, true), env("c", true, true), env("d", true, true),
			env("e", true, true), env("f", true, true), env("g", true, true), env("h", true, true)}
	}
	tests := []struct {
		name           string
		maxUnavailable intstr.IntOrString
		envs           [][]client.Object
		inflight       []string
		// deciding is the environment the decision is for; "new" (not
		// listed) when empty.
		deciding string
		want     bool
		// wantRecheck is when a refusal is looked at again: the expiry of
		// the in-flight restarts counted, if any.
		wantRecheck time.Duration
	}{
		{
			name: "25% of 8 running is 2; one unavailable leaves room", maxUnavailable: intstr.FromString("25%"),
			envs: [][]client.Object{env("a", true, false), env("b", true, true), env("c", true, true), env("d", true, true),
				env("e", true, true), env("f", true, true), env("g", true, true), env("h", true, true)},
			want: true,
		},
		{
			name: "two unavailable fill 25% of 8", maxUnavailable: intstr.FromString("25%"),
			envs: [][]client.Object{env("a", true, false), env("b", true, false), env("c", true, true), env("d", true, true),
				env("e", true, true), env("f", true, true), env("g", true, true), env("h", true, true)},
			want: false,
		},
		{
			name: "a restart the cache does not show yet counts", maxUnavailable: intstr.FromString("25%"),
			envs: [][]client.Object{env("a", true, false), env("b", true, true), env("c", true, true), env("d", true, true),
				env("e", true, true), env("f", true, true), env("g", true, true), env("h", true, true)},
			inflight: []string{"b"},
			want:     false, wantRecheck: inflightExpiry,
		},
		{
			name: "a restart already unavailable in the cache counts once", maxUnavailable: intstr.FromString("25%"),
			envs: [][]client.Object{env("a", true, false), env("b", true, true), env("c", true, true), env("d", true, true),
				env("e", true, true), env("f", true, true), env("g", true, true), env("h", true, true)},
			inflight: []string{"a"},
			want:     true,
		},
		{
			name: "stopped environments are not counted, and the budget is at least one", maxUnavailable: intstr.FromString("25%"),
			envs: [][]client.Object{env("a", true, true), env("b", false, false), env("c", false, false)},
			want: true,
		},
		{
			name: "an absolute maxUnavailable", maxUnavailable: intstr.FromInt32(3),
			envs: [][]client.Object{env("a", true, false), env("b", true, false), env("c", true, false), env("d", true, true)},
			want: false,
		},
		{
			name: "the deciding environment's own restart (a write that failed) does not block its retry", maxUnavailable: intstr.FromString("25%"),
			envs: eight(), inflight: []string{"b"}, deciding: "b",
			want: true,
		},
		{
			name: "a restart the cache shows finished frees its place before its own reconcile", maxUnavailable: intstr.FromString("25%"),
			envs: append(eight()[:7], restarted(env("h", true, true))), inflight: []string{"h"},
			want: true,
		},
		{
			name: "a restart the cache shows started but not finished counts once", maxUnavailable: intstr.FromString("25%"),
			envs: append(eight()[:7], restarted(env("h", true, false))), inflight: []string{"h"},
			want: false,
		},
		{
			name: "a restart the cache shows written but not yet observed counts once", maxUnavailable: intstr.FromString("25%"),
			envs: append(eight()[:7], unobserved(restarted(env("h", true, true)))), inflight: []string{"h"},
			want: false,
		},
		{
			name: "a listed environment whose Deployment the cache does not show (label removed) still counts its restart", maxUnavailable: intstr.FromString("25%"),
			envs: append(eight()[:7], env("h", true, true)[:1]), inflight: []string{"h"},
			want: false, wantRecheck: inflightExpiry,
		},

		{
			name: "the deciding environment, already unavailable (a broken template's), is not counted against itself", maxUnavailable: intstr.FromString("25%"),
			envs: [][]client.Object{env("a", true, false), env("b", true, false), env("c", true, true), env("d", true, true),
				env("e", true, true), env("f", true, true), env("g", true, true), env("h", true, true)},
			deciding: "a",
			want:     true,
		},
		{
			name: "an available deciding environment still sees two others fill 25% of 8", maxUnavailable: intstr.FromString("25%"),
			envs: [][]client.Object{env("a", true, false), env("b", true, false), env("c", true, true), env("d", true, true),
				env("e", true, true), env("f", true, true), env("g", true, true), env("h", true, true)},
			deciding: "c",
			want:     false,
		},
		{
			name: "a deleted environment's restart does not count", maxUnavailable: intstr.FromString("25%"),
			envs: eight(), inflight: []string{"gone"},
			want: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).
				WithIndex(&v1alpha1.Userland{}, IndexTemplateKey, IndexUserlandByTemplate)
			for _, objs := range tt.envs {
				b = b.WithObjects(objs...)
			}
			key := templates.Key(v1alpha1.TemplateKindTemplate, ns, "t")
			r := &UserlandReconciler{Client: b.Build()}
			for _, name := range tt.inflight {
				r.inflight.add(types.NamespacedName{Namespace: ns, Name: name}, now, "new")
			}
			deciding := &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tt.deciding}}
			if tt.deciding == "" {
				deciding.Name = "new"
			}
			spec := &v1alpha1.TemplateSpec{Rollout: v1alpha1.RolloutSpec{Policy: v1alpha1.RolloutImmediate, MaxUnavailable: &tt.maxUnavailable}}
			s := &reconcileState{ul: deciding, now: now, template: &templates.Resolved{Kind: v1alpha1.TemplateKindTemplate, Name: "t", Key: key, Spec: spec}}
			checkBudget(t, r, s, tt.want, tt.wantRecheck)
		})
	}
	// An inflight restart stops counting at its expiry, when the recheck
	// above comes.
	var tr rolloutTracker
	tr.add(types.NamespacedName{Name: "x"}, now, "new")
	if got, _ := tr.count(now.Add(inflightExpiry), nil); got != 0 {
		t.Errorf("an expired restart still counts: %d", got)
	}
}

// TestRestartInFlightEndsOnlyAtThePodTemplateLastWritten: a restart in
// flight ends when its Deployment is seen rolled out at the pod template
// this controller last wrote to it: the restart's own, or a later write's
// (an explicit restart or a start applying a newer template), which the
// restart's own may then never show. A template changed and changed back
// within the cache's lag leaves the cache showing the old pod template,
// rolled out, while the restart was written: that must not end it, or a
// second restart could be applied beside it without a budget check. A
// deleted environment's restart is forgotten, a refused write's is put
// back as it was, a retried restart keeps its start (so a write refused
// and retried cannot hold a place past the expiry), and expired ones are
// swept as new ones are added, so nothing piles up.
func TestRestartInFlightEndsOnlyAtThePodTemplateLastWritten(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	x := types.NamespacedName{Namespace: "class", Name: "x"}
	tests := []struct {
		name  string
		steps func(tr *rolloutTracker)
		at    time.Duration
		want  int
	}{
		{name: "not yet seen", steps: func(*rolloutTracker) {}, want: 1},
		{name: "seen at the pod template from before the restart", steps: func(tr *rolloutTracker) { tr.done(x, "old") }, want: 1},
		{name: "seen at its own pod template", steps: func(tr *rolloutTracker) { tr.done(x, "old"); tr.done(x, "new") }, want: 0},
		{name: "superseded by a later write, seen at that", steps: func(tr *rolloutTracker) { tr.applying(x, "later"); tr.done(x, "later") }, want: 0},
		{name: "superseded by a later write, seen only at its own", steps: func(tr *rolloutTracker) { tr.applying(x, "later"); tr.done(x, "new") }, want: 1},
		{name: "its environment deleted", steps: func(tr *rolloutTracker) { tr.forget(x) }, want: 0},
		{name: "its write refused", steps: func(tr *rolloutTracker) { tr.restore(x, restart{}, false) }, want: 0},
		{name: "retried 5 minutes later, it still expires 10 minutes after it started",
			steps: func(tr *rolloutTracker) { tr.add(x, now.Add(5*time.Minute), "new") }, at: inflightExpiry, want: 0},
		{name: "a different restart 5 minutes later starts afresh",
			steps: func(tr *rolloutTracker) { tr.add(x, now.Add(5*time.Minute), "newer") }, at: inflightExpiry, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tr rolloutTracker
			tr.add(x, now, "new")
			tt.steps(&tr)
			got, _ := tr.count(now.Add(tt.at), nil)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("restarts counted (-want +got):\n%s", diff)
			}
		})
	}
	var tr rolloutTracker
	tr.add(x, now, "new")
	tr.add(types.NamespacedName{Namespace: "class", Name: "y"}, now.Add(inflightExpiry), "new")
	if diff := cmp.Diff(map[types.NamespacedName]restart{{Namespace: "class", Name: "y"}: {at: now.Add(inflightExpiry), to: "new"}},
		tr.restarts, cmp.AllowUnexported(restart{})); diff != "" {
		t.Errorf("restarts kept after an add at x's expiry (-want +got):\n%s", diff)
	}
}

// TestRestartNotWrittenWakesTheWaiting: a restart recorded and then not
// written (refused, or nothing sent) is put back, and the template's
// environments waiting for a place are woken, as no Deployment event will
// come; putting back what did not change wakes nobody.
func TestRestartNotWrittenWakesTheWaiting(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	ul := &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: "class", Name: "x"}}
	x := client.ObjectKeyFromObject(ul)
	r := &UserlandReconciler{budgetFreed: make(chan event.GenericEvent, 1)}
	s := &reconcileState{ul: ul}

	before, had := r.inflight.get(x)
	r.inflight.add(x, now, "new")
	r.restoreInflight(s, x, before, had)
	if n, _ := r.inflight.count(now, nil); n != 0 {
		t.Errorf("%d restarts counted after the write was not made, want 0", n)
	}
	select {
	case e := <-r.budgetFreed:
		if diff := cmp.Diff(x, client.ObjectKeyFromObject(e.Object)); diff != "" {
			t.Errorf("woke the siblings of (-want +got):\n%s", diff)
		}
	default:
		t.Error("nobody woken when a restart's place was freed")
	}

	r.inflight.add(x, now, "new")
	before, had = r.inflight.get(x)
	r.restoreInflight(s, x, before, had)
	if n, _ := r.inflight.count(now, nil); n != 1 {
		t.Errorf("%d restarts counted after putting back an unchanged one, want 1", n)
	}
	select {
	case <-r.budgetFreed:
		t.Error("woken though no place was freed")
	default:
	}
}

// TestDeletedEnvironmentWakesItsTemplatesWaitingRollouts: a deleted
// environment frees the budget its Deployment or restart held, and its
// Deployment's events can no longer name the template (the Userland is
// gone from the cache), so the deletion itself wakes the environments of
// its template waiting for an update, and no others.
func TestDeletedEnvironmentWakesItsTemplatesWaitingRollouts(t *testing.T) {
	t.Parallel()
	const ns = "class"
	ul := func(name, tmpl string, pending bool) *v1alpha1.Userland {
		u := &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.UserlandSpec{User: name, TemplateRef: v1alpha1.TemplateReference{Kind: v1alpha1.TemplateKindTemplate, Name: tmpl}}}
		u.Status.UpdatePending = pending
		return u
	}
	c := fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).
		WithIndex(&v1alpha1.Userland{}, IndexPendingTemplateKey, IndexPendingUserlandByTemplate).
		WithObjects(ul("waiting", "t", true), ul("current", "t", false), ul("other", "u", true)).Build()
	r := &UserlandReconciler{Client: c}
	got := r.pendingSiblingsOfUserland(context.Background(), ul("deleted", "t", false))
	want := []ctrl.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: "waiting"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("woken by the deletion (-want +got):\n%s", diff)
	}
}

// TestARestartRecordedMidDecisionIsJudgedFromTheCache: a restart recorded
// while a decision reads its siblings (a WhenIdle restart takes no
// decision lock), after the decision took note of the restarts in flight,
// is judged as any other: another template's does not take this one's
// place (counted blindly, it would leave the rollout waiting for its
// expiry), and one of a sibling here does.
func TestARestartRecordedMidDecisionIsJudgedFromTheCache(t *testing.T) {
	t.Parallel()
	const ns = "class"
	now := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	sibling := func(name, tmpl string, available bool) []client.Object {
		ul := &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.UserlandSpec{User: name, TemplateRef: v1alpha1.TemplateReference{Kind: v1alpha1.TemplateKindTemplate, Name: tmpl}}}
		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(1))}}
		dep.Spec.Template.Annotations = map[string]string{AnnotationTemplateHash: "old"}
		dep.Status.ObservedGeneration = 1
		if available {
			dep.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1,
				Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}}
		}
		return []client.Object{ul, dep}
	}
	tests := []struct {
		name     string
		recorded string // restarted while the first sibling's Deployment is read
		want     bool
		recheck  time.Duration
	}{
		{name: "another template's environment", recorded: "elsewhere", want: true},
		{name: "a sibling not yet restarted in the cache", recorded: "b", want: false, recheck: inflightExpiry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := &UserlandReconciler{}
			var once sync.Once
			// 25% of 8 is 2: "a" unavailable leaves room for one more.
			b := fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).
				WithIndex(&v1alpha1.Userland{}, IndexTemplateKey, IndexUserlandByTemplate).
				WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					// The siblings' loop reads the first Deployment, before
					// the tracker's lock is held to count (adding under it
					// would deadlock).
					if _, isDeployment := obj.(*appsv1.Deployment); isDeployment {
						once.Do(func() { r.inflight.add(types.NamespacedName{Namespace: ns, Name: tt.recorded}, now, "new") })
					}
					return c.Get(ctx, key, obj, opts...)
				}})
			b = b.WithObjects(sibling("a", "t", false)...).WithObjects(sibling("elsewhere", "u", true)...)
			for _, name := range []string{"b", "c", "d", "e", "f", "g", "h"} {
				b = b.WithObjects(sibling(name, "t", true)...)
			}
			r.Client = b.Build()
			key := templates.Key(v1alpha1.TemplateKindTemplate, ns, "t")
			spec := &v1alpha1.TemplateSpec{Rollout: v1alpha1.RolloutSpec{Policy: v1alpha1.RolloutImmediate, MaxUnavailable: ptr.To(intstr.FromString("25%"))}}
			s := &reconcileState{ul: &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "new"}}, now: now,
				template: &templates.Resolved{Kind: v1alpha1.TemplateKindTemplate, Name: "t", Key: key, Spec: spec}}
			checkBudget(t, r, s, tt.want, tt.recheck)
		})
	}
}

// TestAFinishedRestartIsForgottenWithoutWakingAnyone: the reconcile that
// finds an environment's restart rolled out, with nothing left to write,
// forgets the restart and wakes no one: the Deployment event that showed
// it finished already did. (Forgotten before the tracker was put back as
// the reconcile found it, it came back on every such reconcile, each
// waking every waiting sibling, and stayed tracked until it expired.)
func TestAFinishedRestartIsForgottenWithoutWakingAnyone(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	key := types.NamespacedName{Namespace: "class", Name: "u"}
	r := &UserlandReconciler{budgetFreed: make(chan event.GenericEvent, 1)}
	r.inflight.add(key, now, "new")
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Generation: 2},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(1))},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}}}
	dep.Spec.Template.Annotations = map[string]string{AnnotationTemplateHash: "new"}
	s := &reconcileState{ul: &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}, dep: dep, now: now,
		template: &templates.Resolved{Kind: v1alpha1.TemplateKindTemplate, Name: "t", Spec: &v1alpha1.TemplateSpec{}}}
	desired := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationTemplateHash: "new"}}}

	before, had := r.inflight.get(key)
	if _, pending, _, err := r.choosePodTemplate(context.Background(), s, desired, true, now); err != nil || pending {
		t.Fatalf("choosing the pod template: pending %v, %v", pending, err)
	}
	if s.restartSeenDone != "new" {
		t.Errorf("the restart seen finished at %q, want %q", s.restartSeenDone, "new")
	}
	r.settleInflight(s, key, before, had, false) // the Deployment is as wanted: nothing written

	if rs, ok := r.inflight.get(key); ok {
		t.Errorf("the finished restart is still in flight: %+v", rs)
	}
	select {
	case e := <-r.budgetFreed:
		t.Errorf("woke the waiting siblings of %s", e.Object.GetName())
	default:
	}
}

// checkBudget asks r's budget decision for s and compares its answer and
// recheck with the wanted ones.
func checkBudget(t *testing.T, r *UserlandReconciler, s *reconcileState, want bool, wantRecheck time.Duration) {
	t.Helper()
	ok, recheck, err := r.budgetAvailable(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	type decision struct {
		Available bool
		Recheck   time.Duration
	}
	if diff := cmp.Diff(decision{want, wantRecheck}, decision{ok, recheck}); diff != "" {
		t.Errorf("budget (-want +got):\n%s", diff)
	}
}
