package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// +kubebuilder:rbac:groups="",resources=pods,verbs=create;patch;delete
// +kubebuilder:rbac:groups=apps,resources=daemonsets,verbs=get;list;watch;create;patch;delete

// holdRoomForSession keeps the course's placeholders and image pullers
// from a session's warm-up to its end, and deletes them outside it. The
// schedule phase has already asked to run again at the window's edges
// (timetable.Result.Recheck), so nothing here polls. Writes happen only
// when what is cached differs from what is desired: none in steady state.
func (r *CourseReconciler) holdRoomForSession(ctx context.Context, s *courseState) (ctrl.Result, error) {
	o := r.Room.withDefaults()
	var placeholders []*corev1.Pod
	var pullers []*appsv1.DaemonSet
	if s.holdRoom {
		placeholders = desiredPlaceholders(s.c, s.templates, ptrValue(s.c.Spec.Schedule.Placeholders), o)
		if s.c.Spec.Schedule.PullImages == nil || *s.c.Spec.Schedule.PullImages {
			pullers = desiredPullers(s.c, s.templates, o)
		}
	}
	if err := r.syncPlaceholders(ctx, s, placeholders); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.syncPullers(ctx, s, pullers)
}

func ptrValue(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

func (r *CourseReconciler) syncPlaceholders(ctx context.Context, s *courseState, desired []*corev1.Pod) error {
	var cached corev1.PodList
	if err := r.Client.List(ctx, &cached, client.InNamespace(s.c.Namespace),
		client.MatchingLabels{LabelPlaceholderFor: string(s.c.UID)}); err != nil {
		return fmt.Errorf("listing placeholders of course %s/%s: %w", s.c.Namespace, s.c.Name, err)
	}
	existing := make([]existingChild, 0, len(cached.Items))
	for _, p := range cached.Items {
		existing = append(existing, existingChild{
			name: p.Name, hash: p.Annotations[AnnotationAppliedHash],
			terminating: p.DeletionTimestamp != nil,
			gone:        p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded,
		})
	}
	for _, p := range desired {
		withAppliedHash(p, p.Spec)
	}
	plan := planRoom(desired, func(p *corev1.Pod) (string, string) { return p.Name, p.Annotations[AnnotationAppliedHash] }, existing, true)
	for _, name := range plan.delete {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: s.c.Namespace, Name: name}}
		if err := r.Client.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting placeholder %s/%s: %w", s.c.Namespace, name, err)
		}
	}
	for _, p := range plan.apply {
		if err := r.applyChild(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

func (r *CourseReconciler) syncPullers(ctx context.Context, s *courseState, desired []*appsv1.DaemonSet) error {
	var cached appsv1.DaemonSetList
	if err := r.Client.List(ctx, &cached, client.InNamespace(s.c.Namespace),
		client.MatchingLabels{LabelImagePullerFor: string(s.c.UID)}); err != nil {
		return fmt.Errorf("listing image pullers of course %s/%s: %w", s.c.Namespace, s.c.Name, err)
	}
	existing := make([]existingChild, 0, len(cached.Items))
	for _, ds := range cached.Items {
		existing = append(existing, existingChild{name: ds.Name, hash: ds.Annotations[AnnotationAppliedHash], terminating: ds.DeletionTimestamp != nil})
	}
	for _, ds := range desired {
		withAppliedHash(ds, ds.Spec)
	}
	plan := planRoom(desired, func(ds *appsv1.DaemonSet) (string, string) { return ds.Name, ds.Annotations[AnnotationAppliedHash] }, existing, false)
	for _, name := range plan.delete {
		ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: s.c.Namespace, Name: name}}
		if err := r.Client.Delete(ctx, ds, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting image puller %s/%s: %w", s.c.Namespace, name, err)
		}
	}
	for _, ds := range plan.apply {
		if err := r.applyChild(ctx, ds); err != nil {
			return err
		}
	}
	if s.c.Status.NextSession != nil && len(desired) > 0 {
		// The cached pullers that are desired: one just applied counts
		// from its first status (0 of 0 until the DaemonSet controller
		// has seen it).
		want := map[string]bool{}
		for _, ds := range desired {
			want[ds.Name] = true
		}
		var current []appsv1.DaemonSet
		for _, ds := range cached.Items {
			if want[ds.Name] {
				current = append(current, ds)
			}
		}
		s.c.Status.NextSession.Images = pulledImages(current)
	}
	return nil
}

// applyChild creates or updates obj with a server-side apply under the
// controller's one field owner.
func (r *CourseReconciler) applyChild(ctx context.Context, obj client.Object) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("converting %T to unstructured: %w", obj, err)
	}
	// Typed objects serialise empty status and null creation timestamps;
	// applying those would claim fields the controller does not manage.
	delete(u, "status")
	unstructured.RemoveNestedField(u, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u, "spec", "template", "metadata", "creationTimestamp")
	apply := &unstructured.Unstructured{Object: u}
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(apply), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s/%s: %w", apply.GetKind(), apply.GetNamespace(), apply.GetName(), terminalIfNamespaceTerminating(err))
	}
	return nil
}

// isRoomChild says whether a cached object is a placeholder or puller.
func isRoomChild(obj client.Object) bool {
	l := obj.GetLabels()
	return l[v1alpha1.LabelManagedBy] == v1alpha1.ManagedByValue && (l[LabelPlaceholderFor] != "" || l[LabelImagePullerFor] != "")
}
