// Package envtiming times an environment's lifecycle through the real
// controller and gateway, on whatever runs its pods (kwok's simulated
// nodes or a real node): an idle stop forced by moving its clocks back,
// a wake by one request through the gateway timed to the first byte of
// the app's own answer, and a template rollout with the most environments
// restarting at once. The real-node tests and hack/bench share it, so the
// numbers they report are measured the same way.
package envtiming

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/controller"
)

// IdleStop makes the controller stop the environment key as idle without
// waiting out its idle timeout: idle time counts from the later of the
// last activity and the last start (an annotation on the Deployment), so
// both move two hours back. It returns once the Userland is Stopped for
// Idle, its Deployment is scaled to 0 and no pod of it is left, and says
// how long that took. The clocks are moved back again every 10 s while it
// waits: the gateway may write activity of a request just before.
func IdleStop(ctx context.Context, c client.Client, key types.NamespacedName, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	var moved time.Time
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if time.Since(moved) > 10*time.Second {
			if err := moveClocksBack(ctx, c, key); err != nil {
				return false, err
			}
			moved = time.Now()
		}
		var ul v1alpha1.Userland
		if err := c.Get(ctx, key, &ul); err != nil {
			return false, err
		}
		var dep appsv1.Deployment
		if err := c.Get(ctx, key, &dep); err != nil {
			return false, err
		}
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(key.Namespace), client.MatchingLabels{v1alpha1.LabelUserland: key.Name}); err != nil {
			return false, err
		}
		last = fmt.Sprintf("phase %s (%s), Deployment replicas %v wanted and %d there, %d pods",
			ul.Status.Phase, ul.Status.StoppedReason, replicas(&dep), dep.Status.Replicas, len(pods.Items))
		return ul.Status.Phase == v1alpha1.PhaseStopped && ul.Status.StoppedReason == v1alpha1.StoppedIdle &&
			replicas(&dep) == 0 && dep.Status.Replicas == 0 && len(pods.Items) == 0, nil
	})
	if err != nil {
		return 0, fmt.Errorf("idle stop of %s not done after %s: %s: %w", key, time.Since(start).Round(time.Second), last, err)
	}
	return time.Since(start), nil
}

// ActivityWritten waits (up to timeout) until the Userland's last
// activity is at or after since, as the gateway writes it: in batches, at
// most once an interval per environment. A use the gateway still holds
// would otherwise be written after a forced idle stop and, being newer
// than the stop, start the environment again before any wake request.
func ActivityWritten(ctx context.Context, c client.Client, key types.NamespacedName, since time.Time, timeout time.Duration) error {
	since = since.Truncate(time.Second) // as stored
	var ul v1alpha1.Userland
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, key, &ul); err != nil {
			return false, err
		}
		return ul.Status.LastActivityTime != nil && !ul.Status.LastActivityTime.Time.Before(since), nil
	})
	if err != nil {
		return fmt.Errorf("the gateway wrote no activity of %s since %s within %s (last %v): %w", key, since.Format(time.RFC3339), timeout, ul.Status.LastActivityTime, err)
	}
	return nil
}

func replicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// moveClocksBack moves the Deployment's started-at annotation and the
// Userland's last activity two hours back (as hack/bench's kwok wake
// does).
func moveClocksBack(ctx context.Context, c client.Client, key types.NamespacedName) error {
	past := time.Now().Add(-2 * time.Hour).UTC().Format(time.RFC3339)
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, controller.AnnotationStartedAt, past)
	if err := c.Patch(ctx, dep, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("moving the start of %s back: %w", key, err)
	}
	ul := &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	patch = fmt.Appendf(nil, `{"status":{"lastActivityTime":%q}}`, past)
	if err := c.Status().Patch(ctx, ul, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("moving the last activity of %s back: %w", key, err)
	}
	return nil
}

// ServingPod is the environment's one Ready pod that is not being
// deleted, or an error saying what there is.
func ServingPod(ctx context.Context, c client.Client, key types.NamespacedName) (*corev1.Pod, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(key.Namespace), client.MatchingLabels{v1alpha1.LabelUserland: key.Name}); err != nil {
		return nil, err
	}
	var serving []*corev1.Pod
	for i := range pods.Items {
		if p := &pods.Items[i]; p.DeletionTimestamp == nil && podReady(p) {
			serving = append(serving, p)
		}
	}
	if len(serving) != 1 {
		return nil, fmt.Errorf("%s has %d Ready pods of %d, want one", key, len(serving), len(pods.Items))
	}
	return serving[0], nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// CreatedToReady is the pod's own record of its start: from its creation
// to its Ready condition, in whole seconds as the API server keeps them.
func CreatedToReady(p *corev1.Pod) (time.Duration, bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Sub(p.CreationTimestamp.Time), true
		}
	}
	return 0, false
}
