package controller_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// TestMovingARestartingEnvironmentAwayLetsItsTemplatesRolloutGoOn: an
// Immediate rollout with one place, held by an environment whose restart
// cannot become available, goes on once that environment is moved to
// another template: the place it held under the old one is free, and the
// move itself must wake the environment waiting for it, since no event of
// the moved one's Deployment names the old template any more.
func TestMovingARestartingEnvironmentAwayLetsItsTemplatesRolloutGoOn(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ns := env.Namespace(t)
	const before, after = "example.org/app:1", "example.org/app:2"
	a := template(ns, "a", before)
	a.Spec.Rollout = v1alpha1.RolloutSpec{Policy: v1alpha1.RolloutImmediate, MaxUnavailable: ptr.To(intstr.FromInt32(1))}
	create(t, a, template(ns, "b", "example.org/other:1"),
		userland(ns, "u0", "alice", "a"), userland(ns, "u1", "bob", "a"))
	waitAllReady(t, ns, 2, 2*time.Minute)

	// No node has the label: the first environment restarted stays
	// unavailable and holds the template's one place.
	updateTemplate(t, ns, "a", func(tmpl *v1alpha1.Template) {
		tmpl.Spec.PodTemplate.Spec.Containers[0].Image = after
		tmpl.Spec.PodTemplate.Spec.NodeSelector = map[string]string{"example.org/no-such-node": "true"}
	})
	var restarted, waiting string
	env.Eventually(t, time.Minute, "one restarted, the other waiting for its place", func(ctx context.Context) (bool, error) {
		for _, pair := range [][2]string{{"u0", "u1"}, {"u1", "u0"}} {
			w, err := get(t, ctx, ns, pair[1])
			if err != nil {
				return false, err
			}
			if imageOf(t, ctx, ns, pair[0]) == after && imageOf(t, ctx, ns, pair[1]) == before && w.Status.UpdatePending {
				restarted, waiting = pair[0], pair[1]
				return true, nil
			}
		}
		return false, nil
	})
	// The premise: with the place held, the other really waits.
	time.Sleep(3 * time.Second)
	if got := imageOf(t, context.Background(), ns, waiting); got != before {
		t.Fatalf("%s was restarted to %q while %s held the one place", waiting, got, restarted)
	}

	moved := time.Now()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ul, err := get(t, context.Background(), ns, restarted)
		if err != nil {
			return err
		}
		ul.Spec.TemplateRef.Name = "b"
		return env.Client.Update(context.Background(), ul)
	})
	if err != nil {
		t.Fatal(err)
	}
	env.Eventually(t, 30*time.Second, "the waiting one restarted into the free place", func(ctx context.Context) (bool, error) {
		return imageOf(t, ctx, ns, waiting) == after, nil
	})
	t.Logf("%s restarted %s after %s was moved to another template", waiting, time.Since(moved).Round(time.Millisecond), restarted)
}
