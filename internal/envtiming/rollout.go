package envtiming

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/internal/controller"
)

// Rollout is a template change reaching running environments.
type Rollout struct {
	// Took is from the change to every environment's Deployment running
	// the new pod template, Ready.
	Took time.Duration
	// MostUnavailable is the most environments restarting at once, as
	// the controller's maxUnavailable counts them: a running Deployment
	// not yet rolled out (spec not observed, or its one pod not updated,
	// available and alone).
	MostUnavailable int
	// Restarted is how many Deployments got a new pod template.
	Restarted int
}

// TimeRollout watches the Deployments of names in ns, makes the change
// once every one of them is rolled out, and waits (up to timeout) until
// each has a new pod template (a new template hash) and is rolled out
// again, counting the most that were not rolled out at once. The watch
// sees the Deployments' changes in the order the API server made them,
// as the controller's cache does, so the count is the one its budget saw.
func TimeRollout(ctx context.Context, c client.WithWatch, ns string, names []string, change func(context.Context) error, timeout time.Duration) (Rollout, error) {
	var r Rollout
	w, err := c.Watch(ctx, &appsv1.DeploymentList{}, client.InNamespace(ns))
	if err != nil {
		return r, err
	}
	defer w.Stop()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	hashes := map[string]string{} // the pod template hash before the change
	current := map[string]*appsv1.Deployment{}
	var changed time.Time
	expired := time.After(timeout)
	for {
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-expired:
			return r, fmt.Errorf("rollout in %s: not done after %s: %s", ns, timeout, r.describe(current))
		case ev, ok := <-w.ResultChan():
			if !ok {
				return r, fmt.Errorf("rollout in %s: the watch ended: %s", ns, r.describe(current))
			}
			d, isDep := ev.Object.(*appsv1.Deployment)
			if !isDep || !want[d.Name] {
				continue
			}
			if ev.Type == watch.Deleted {
				return r, fmt.Errorf("rollout in %s: Deployment %s deleted", ns, d.Name)
			}
			current[d.Name] = d
		}
		if changed.IsZero() {
			if len(current) < len(names) || Unavailable(current) > 0 {
				continue
			}
			// Every environment runs its current template: the count
			// starts from the true state.
			for n, d := range current {
				hashes[n] = d.Spec.Template.Annotations[controller.AnnotationTemplateHash]
			}
			changed = time.Now()
			if err := change(ctx); err != nil {
				return r, err
			}
			continue
		}
		r.MostUnavailable = max(r.MostUnavailable, Unavailable(current))
		r.Restarted = 0
		for n, d := range current {
			if d.Spec.Template.Annotations[controller.AnnotationTemplateHash] != hashes[n] {
				r.Restarted++
			}
		}
		if r.Restarted == len(names) && Unavailable(current) == 0 {
			r.Took = time.Since(changed)
			return r, nil
		}
	}
}

func (r Rollout) describe(current map[string]*appsv1.Deployment) string {
	return fmt.Sprintf("%d Deployments seen, %d with a new pod template, %d not rolled out now, at most %d at once",
		len(current), r.Restarted, Unavailable(current), r.MostUnavailable)
}

// Unavailable counts the running Deployments that are not rolled out, as
// the controller's rollout budget counts them.
func Unavailable(deps map[string]*appsv1.Deployment) int {
	n := 0
	for _, d := range deps {
		if replicas(d) > 0 && !RolledOut(d) {
			n++
		}
	}
	return n
}

// RolledOut is the controller's test: the Deployment's spec is observed
// and all its wanted pods are updated and available, and no others are
// left.
func RolledOut(d *appsv1.Deployment) bool {
	want := replicas(d)
	available := false
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			available = c.Status == corev1.ConditionTrue
		}
	}
	return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas >= want &&
		d.Status.AvailableReplicas >= want && d.Status.Replicas == want && available
}
