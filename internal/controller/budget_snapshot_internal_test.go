package controller

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// TestBudgetViewIsReadAgainOnlyAfterAChange: a template's view is read
// once and kept until a change; one that came while it was read leaves it
// stale at once; a failed read keeps nothing; a nil keeper reads every
// time.
func TestBudgetViewIsReadAgainOnlyAfterAChange(t *testing.T) {
	t.Parallel()
	views := &budgetViews{}
	reads := 0
	read := func() (*budgetView, error) { reads++; return &budgetView{running: reads}, nil }
	var changeWhileRead func()
	readChanging := func() (*budgetView, error) {
		v, err := read()
		changeWhileRead()
		return v, err
	}
	changeWhileRead = views.changed

	steps := []struct {
		name        string
		do          func() (*budgetView, error)
		wantRunning int
	}{
		{"first decision reads", func() (*budgetView, error) { return views.get("t", read) }, 1},
		{"the next one keeps it", func() (*budgetView, error) { return views.get("t", read) }, 1},
		{"another template has its own", func() (*budgetView, error) { return views.get("u", read) }, 2},
		{"after a change it is read again", func() (*budgetView, error) { views.changed(); return views.get("t", read) }, 3},
		{"a change during a read", func() (*budgetView, error) { views.changed(); return views.get("t", readChanging) }, 4},
		{"leaves that read stale", func() (*budgetView, error) { return views.get("t", read) }, 5},
		{"which is then kept", func() (*budgetView, error) { return views.get("t", read) }, 5},
	}
	for _, step := range steps {
		v, err := step.do()
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if diff := cmp.Diff(step.wantRunning, v.running); diff != "" {
			t.Errorf("%s: view read as the nth (-want +got):\n%s", step.name, diff)
		}
	}

	failing := errors.New("cache not synced")
	if _, err := views.get("v", func() (*budgetView, error) { return nil, failing }); !errors.Is(err, failing) {
		t.Errorf("a failed read returned %v, want its error", err)
	}
	if v, _ := views.get("v", read); v == nil || v.running != reads {
		t.Error("a failed read was kept")
	}

	var none *budgetViews
	before := reads
	_, _ = none.get("t", read)
	_, _ = none.get("t", read)
	if diff := cmp.Diff(2, reads-before); diff != "" {
		t.Errorf("reads without a keeper (-want +got):\n%s", diff)
	}
}

// TestChangesBudgetView: only Deployment changes that a view shows end the
// views; the Deployment controller's other status bookkeeping does not.
func TestChangesBudgetView(t *testing.T) {
	t.Parallel()
	available := func(hash string) *appsv1.Deployment {
		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 2},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(1))},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1,
				Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}}}
		dep.Spec.Template.Annotations = map[string]string{AnnotationTemplateHash: hash}
		return dep
	}
	with := func(dep *appsv1.Deployment, change func(*appsv1.Deployment)) *appsv1.Deployment {
		dep = dep.DeepCopy()
		change(dep)
		return dep
	}
	restarted := with(available("new"), func(d *appsv1.Deployment) { d.Generation = 3 })
	tests := []struct {
		name          string
		before, after *appsv1.Deployment
		want          bool
	}{
		{"a condition's message", available("a"), with(available("a"), func(d *appsv1.Deployment) { d.Status.Conditions[0].Message = "x" }), false},
		{"a restart to a new pod template", available("a"), restarted, true},
		{"rolled out", restarted, with(restarted, func(d *appsv1.Deployment) { d.Status.ObservedGeneration = 3 }), true},
		{"stopped", available("a"), with(available("a"), func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To(int32(0)) }), true},
		{"its pod became unavailable", available("a"), with(available("a"), func(d *appsv1.Deployment) { d.Status.AvailableReplicas = 0 }), true},
	}
	for _, tc := range tests {
		got := changesBudgetView.Update(event.UpdateEvent{ObjectOld: tc.before, ObjectNew: tc.after})
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: ends the views (-want +got):\n%s", tc.name, diff)
		}
	}
}
