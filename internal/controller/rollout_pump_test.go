package controller

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/templates"
)

// pumpCase builds a template's environments in a fake cache: the pump's
// choice of whom to wake is bookkeeping over what the cache shows; the
// decisions the woken make are budgetAvailable's (TestRolloutBudget...),
// and whole rollouts run against the real API server in the e2e and
// fault tests (TestLeaderFailoverMidRollout).
type pumpCase struct {
	objs []client.Object
}

func (c *pumpCase) template(name string, policy v1alpha1.RolloutPolicy, maxUnavailable string) *pumpCase {
	t := &v1alpha1.Template{ObjectMeta: metav1.ObjectMeta{Namespace: "class", Name: name}}
	t.Spec.Rollout = v1alpha1.RolloutSpec{Policy: policy, MaxUnavailable: ptr.To(intstr.FromString(maxUnavailable))}
	c.objs = append(c.objs, t)
	return c
}

// env adds a running environment of tmpl: available or not, and waiting
// for the template's update or not.
func (c *pumpCase) env(name, tmpl string, available, waiting bool) *pumpCase {
	ul := &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: "class", Name: name},
		Spec: v1alpha1.UserlandSpec{User: name, TemplateRef: v1alpha1.TemplateReference{Kind: v1alpha1.TemplateKindTemplate, Name: tmpl}}}
	ul.Status.UpdatePending = waiting
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "class", Name: name, Generation: 1},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(1))}}
	dep.Status.ObservedGeneration = 1
	if available {
		dep.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}}
	}
	c.objs = append(c.objs, ul, dep)
	return c
}

func (c *pumpCase) pump(t *testing.T) (*rolloutPump, chan event.GenericEvent) {
	t.Helper()
	cl := fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).
		WithIndex(&v1alpha1.Userland{}, IndexTemplateKey, IndexUserlandByTemplate).
		WithIndex(&v1alpha1.Userland{}, IndexPendingTemplateKey, IndexPendingUserlandByTemplate).
		WithObjects(c.objs...).Build()
	wake := make(chan event.GenericEvent, 100)
	r := &UserlandReconciler{Client: cl, Clock: clocktesting.NewFakePassiveClock(time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC))}
	r.pump = newRolloutPump(r, wake)
	t.Cleanup(r.pump.queue.ShutDown)
	return r.pump, wake
}

func woken(wake chan event.GenericEvent) []string {
	var names []string
	for {
		select {
		case e := <-wake:
			names = append(names, e.Object.GetName())
		default:
			return names
		}
	}
}

// TestRolloutPumpWakesAsManyAsArePlacesFree: the pump wakes as many of the
// template's waiting environments as maxUnavailable leaves room for, in
// turn by name, and none when there is no room, no Immediate rollout, or
// nobody waiting.
func TestRolloutPumpWakesAsManyAsArePlacesFree(t *testing.T) {
	t.Parallel()
	key := templates.Key(v1alpha1.TemplateKindTemplate, "class", "t")
	// Eight running: 25% is two places; "a" unavailable takes one.
	eight := func(policy v1alpha1.RolloutPolicy, unavailable int) *pumpCase {
		c := (&pumpCase{}).template("t", policy, "25%").template("u", v1alpha1.RolloutImmediate, "25%")
		for i, name := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
			c.env(name, "t", i >= unavailable, name != "a")
		}
		return c.env("other", "u", true, true)
	}
	tests := []struct {
		name      string
		c         *pumpCase
		wantTurns [][]string // the woken of successive pumps
		wantAgain bool
	}{
		{name: "one place free", c: eight(v1alpha1.RolloutImmediate, 1),
			wantTurns: [][]string{{"b"}, {"c"}, {"d"}, {"e"}, {"f"}, {"g"}, {"h"}, {"b"}}, wantAgain: true},
		{name: "two places free", c: eight(v1alpha1.RolloutImmediate, 0),
			wantTurns: [][]string{{"b", "c"}, {"d", "e"}, {"f", "g"}, {"h", "b"}}, wantAgain: true},
		{name: "no place free", c: eight(v1alpha1.RolloutImmediate, 2), wantTurns: [][]string{nil}},
		{name: "not an Immediate rollout", c: eight(v1alpha1.RolloutWhenIdle, 0), wantTurns: [][]string{nil}},
		{name: "nobody waiting", c: (&pumpCase{}).template("t", v1alpha1.RolloutImmediate, "25%").env("a", "t", true, false), wantTurns: [][]string{nil}},
		{name: "the template gone", c: (&pumpCase{}).env("a", "t", true, true), wantTurns: [][]string{nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, wake := tt.c.pump(t)
			for i, want := range tt.wantTurns {
				again, err := p.pump(context.Background(), key)
				if err != nil {
					t.Fatalf("pump %d: %v", i, err)
				}
				if diff := cmp.Diff(want, woken(wake)); diff != "" {
					t.Errorf("pump %d woke (-want +got):\n%s", i, diff)
				}
				if again != tt.wantAgain {
					t.Errorf("pump %d: look again %v, want %v", i, again, tt.wantAgain)
				}
			}
		})
	}
}

// TestFreedPlacesPokeThePumpWithTheirTemplate: a deleted or moved
// environment, a restart not written, and a Deployment that stops counting
// poke the pump with their template, and enqueue nobody themselves.
func TestFreedPlacesPokeThePumpWithTheirTemplate(t *testing.T) {
	t.Parallel()
	p, _ := (&pumpCase{}).template("t", v1alpha1.RolloutImmediate, "25%").env("a", "t", true, false).pump(t)
	r := p.r
	ctx := context.Background()
	gone := &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: "class", Name: "gone"},
		Spec: v1alpha1.UserlandSpec{TemplateRef: v1alpha1.TemplateReference{Kind: v1alpha1.TemplateKindTemplate, Name: "u"}}}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "class", Name: "a", Labels: map[string]string{v1alpha1.LabelUserland: "a"}}}
	if reqs := r.pokeRolloutOfUserland(ctx, gone); reqs != nil {
		t.Errorf("a deletion enqueued %v itself", reqs)
	}
	if reqs := r.pokeRolloutOfChild(ctx, dep); reqs != nil {
		t.Errorf("a Deployment enqueued %v itself", reqs)
	}
	var got []string
	for p.queue.Len() > 0 {
		key, _ := p.queue.Get()
		got = append(got, key)
		p.queue.Done(key)
	}
	want := []string{templates.Key(v1alpha1.TemplateKindTemplate, "class", "u"), templates.Key(v1alpha1.TemplateKindTemplate, "class", "t")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("templates poked (-want +got):\n%s", diff)
	}
	// A reconciler made without SetupWithManager has no pump: poking is a
	// no-op, not a panic.
	(&UserlandReconciler{}).pokeRolloutOfUserland(ctx, gone)
}
