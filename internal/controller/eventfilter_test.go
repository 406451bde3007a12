package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestEventFiltersPassWhatAReconcileReads: the pod and Deployment updates
// on the way to Ready that change nothing a reconcile reads (the
// scheduler's binding, a container created but not ready, the Deployment
// controller's condition times) do not reconcile; every change health,
// serving, the shared policy or the budget's start time is judged by does.
func TestEventFiltersPassWhatAReconcileReads(t *testing.T) {
	t.Parallel()
	now := metav1.NewTime(time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "u-abc-x", ResourceVersion: "1",
		Labels:      map[string]string{v1alpha1.LabelUserland: "u", LabelNetworkPolicy: "p"},
		Annotations: map[string]string{AnnotationTemplateHash: "h1"}}}
	pod := func(edit func(*corev1.Pod)) *corev1.Pod {
		p := pending.DeepCopy()
		p.ResourceVersion = "2"
		edit(p)
		return p
	}
	waiting := func(reason string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}}
		}
	}
	podCases := map[string]struct {
		after *corev1.Pod
		want  bool
	}{
		"bound to a node": {pod(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now}}
		}), false},
		"a container being created":  {pod(waiting("ContainerCreating")), false},
		"running, not ready yet":     {pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }), false},
		"the image cannot be pulled": {pod(waiting(v1alpha1.ReasonImagePullBackOff)), true},
		"ready": {pod(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}), true},
		"unschedulable": {pod(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes"}}
		}), true},
		"being deleted":                 {pod(func(p *corev1.Pod) { p.DeletionTimestamp = &now }), true},
		"another template's hash":       {pod(func(p *corev1.Pod) { p.Annotations[AnnotationTemplateHash] = "h2" }), true},
		"the shared policy's label":     {pod(func(p *corev1.Pod) { p.Labels[LabelNetworkPolicy] = "q" }), true},
		"a restart request it inherits": {pod(func(p *corev1.Pod) { p.Annotations[v1alpha1.AnnotationRestartedAt] = "t" }), true},
		"another Userland's UID":        {pod(func(p *corev1.Pod) { p.Labels[v1alpha1.LabelUserlandUID] = "uid-2" }), true},
	}
	got, want := map[string]bool{}, map[string]bool{}
	for name, tc := range podCases {
		got[name] = podSeenChanged.Update(event.UpdateEvent{ObjectOld: pending, ObjectNew: tc.after})
		want[name] = tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pod updates that reconcile (-want +got):\n%s", diff)
	}

	one := int32(1)
	created := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "u", Generation: 1, ResourceVersion: "1",
		Annotations: map[string]string{AnnotationStartedAt: "2026-11-26T10:00:00Z"}},
		Spec: appsv1.DeploymentSpec{Replicas: &one},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, UnavailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated", LastUpdateTime: now}}}}
	dep := func(edit func(*appsv1.Deployment)) *appsv1.Deployment {
		d := created.DeepCopy()
		d.ResourceVersion = "2"
		edit(d)
		return d
	}
	later := metav1.NewTime(now.Add(time.Second))
	depCases := map[string]struct {
		after *appsv1.Deployment
		want  bool
	}{
		"progress bookkeeping": {dep(func(d *appsv1.Deployment) {
			d.Status.Conditions[0].LastUpdateTime, d.Status.Conditions[0].Reason = later, "NewReplicaSetAvailable"
		}), false},
		"available": {dep(func(d *appsv1.Deployment) {
			d.Status.ReadyReplicas, d.Status.AvailableReplicas, d.Status.UnavailableReplicas = 1, 1, 0
			d.Status.Conditions = append(d.Status.Conditions, appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue})
		}), true},
		"a new spec":                {dep(func(d *appsv1.Deployment) { d.Generation = 2 }), true},
		"the new spec observed":     {dep(func(d *appsv1.Deployment) { d.Status.ObservedGeneration = 0 }), true},
		"the start time it records": {dep(func(d *appsv1.Deployment) { d.Annotations[AnnotationStartedAt] = "2026-11-26T11:00:00Z" }), true},
		"an owner taken away":       {dep(func(d *appsv1.Deployment) { d.OwnerReferences = []metav1.OwnerReference{{UID: "x"}} }), true},
		"being deleted":             {dep(func(d *appsv1.Deployment) { d.DeletionTimestamp = &later }), true},
	}
	got, want = map[string]bool{}, map[string]bool{}
	for name, tc := range depCases {
		got[name] = deploymentSeenChanged.Update(event.UpdateEvent{ObjectOld: created, ObjectNew: tc.after})
		want[name] = tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Deployment updates that reconcile (-want +got):\n%s", diff)
	}
}

// TestOnlyAFreedPlaceWakesTheWaitingRollouts: a waiting sibling is woken
// by a Deployment that stops counting against the budget (rolled out, or
// stopped while not rolled out) or goes away, and by nothing else: not a
// restart starting, not the Deployment controller's progress, not a
// running one stopped (it held no place), not a new one.
func TestOnlyAFreedPlaceWakesTheWaitingRollouts(t *testing.T) {
	t.Parallel()
	one, zero := int32(1), int32(0)
	rolledOutDep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "u", Generation: 1},
		Spec: appsv1.DeploymentSpec{Replicas: &one},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}}}
	with := func(from *appsv1.Deployment, edit func(*appsv1.Deployment)) *appsv1.Deployment {
		d := from.DeepCopy()
		edit(d)
		return d
	}
	restarted := with(rolledOutDep, func(d *appsv1.Deployment) { d.Generation = 2 })
	observed := with(restarted, func(d *appsv1.Deployment) {
		d.Status.ObservedGeneration, d.Status.UpdatedReplicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas = 2, 0, 0, 0
		d.Status.Conditions[0].Status = corev1.ConditionFalse
	})
	newPodUp := with(observed, func(d *appsv1.Deployment) {
		d.Status.UpdatedReplicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas = 1, 1, 1
		d.Status.Conditions[0].Status = corev1.ConditionTrue
	})
	stopped := func(from *appsv1.Deployment) *appsv1.Deployment {
		return with(from, func(d *appsv1.Deployment) { d.Spec.Replicas, d.Generation = &zero, d.Generation+1 })
	}
	updates := map[string]struct {
		before, after *appsv1.Deployment
		want          bool
	}{
		"a restart written":                      {rolledOutDep, restarted, false},
		"the restart observed, old pod gone":     {restarted, observed, false},
		"the new pod available: rolled out":      {observed, newPodUp, true},
		"one restarting stopped":                 {observed, stopped(observed), true},
		"one running stopped held no place":      {rolledOutDep, stopped(rolledOutDep), false},
		"a resync of one rolled out":             {rolledOutDep, rolledOutDep, false},
		"a resync of one restarting":             {observed, observed, false},
		"one rolled out losing its pod":          {rolledOutDep, observed, false},
		"one stopped started (takes a place)":    {stopped(rolledOutDep), rolledOutDep, false},
		"a crashed pod back without any restart": {with(rolledOutDep, func(d *appsv1.Deployment) { d.Status.AvailableReplicas = 0 }), rolledOutDep, true},
	}
	got, want := map[string]bool{}, map[string]bool{}
	for name, tc := range updates {
		got[name] = freesRolloutPlace.Update(event.UpdateEvent{ObjectOld: tc.before, ObjectNew: tc.after})
		want[name] = tc.want
	}
	got["created"] = freesRolloutPlace.Create(event.CreateEvent{Object: observed})
	want["created"] = false
	got["deleted"] = freesRolloutPlace.Delete(event.DeleteEvent{Object: observed})
	want["deleted"] = true
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Deployment events that wake waiting rollouts (-want +got):\n%s", diff)
	}
}

// TestLeavingATemplateWakesItsWaitingRollouts: a Userland deleted or moved
// to another template (or kind of template) frees the place it held under
// the one it leaves; its other changes (status, annotations, a suspension) free none.
func TestLeavingATemplateWakesItsWaitingRollouts(t *testing.T) {
	t.Parallel()
	listed := testobj.MakeUserland("class", "u", "alice", "vscode").Obj()
	listed.ResourceVersion = "1"
	changed := func(edit func(*v1alpha1.Userland)) *v1alpha1.Userland {
		ul := listed.DeepCopy()
		ul.ResourceVersion = "2"
		edit(ul)
		return ul
	}
	updates := map[string]struct {
		after *v1alpha1.Userland
		want  bool
	}{
		"another template": {changed(func(ul *v1alpha1.Userland) { ul.Spec.TemplateRef.Name = "jupyter" }), true},
		"the cluster template of the same name": {changed(func(ul *v1alpha1.Userland) {
			ul.Spec.TemplateRef.Kind = v1alpha1.TemplateKindClusterTemplate
		}), true},
		"status only": {changed(func(ul *v1alpha1.Userland) { ul.Status.UpdatePending = true }), false},
		"annotated": {changed(func(ul *v1alpha1.Userland) {
			ul.Annotations = map[string]string{"example.org/any": "x"}
		}), false},
		"suspended": {changed(func(ul *v1alpha1.Userland) { ul.Spec.Suspend = true }), false},
	}
	got, want := map[string]bool{}, map[string]bool{}
	for name, tc := range updates {
		got[name] = leavesTemplate.Update(event.UpdateEvent{ObjectOld: listed, ObjectNew: tc.after})
		want[name] = tc.want
	}
	got["created"] = leavesTemplate.Create(event.CreateEvent{Object: listed})
	want["created"] = false
	got["deleted"] = leavesTemplate.Delete(event.DeleteEvent{Object: listed})
	want["deleted"] = true
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Userland events that wake the waiting rollouts of the template left (-want +got):\n%s", diff)
	}
}
