package webhook

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/access"
)

// checkPlaceholders refuses a course that asks for more placeholder pods
// than before unless the requester may create pods in its namespace.
// Placeholders are pods the controller creates for whoever wrote the
// number: up to 200 template-sized pods per course, which a cluster
// autoscaler turns into nodes. Editing a Course is not a permission to
// hold that much of the cluster; creating pods in the namespace is what
// Kubernetes itself would ask of someone who ran them by hand. Lowering
// the number, or leaving it, needs nothing: a roster change must not be
// blocked by a number someone else admitted. Each placeholder is sized
// and placed like one of the course's templates in turn, so changing the
// templates of a course that holds any resizes pods someone else
// admitted (a 100m template swapped for a 32-CPU one): that asks the same
// question. Lowering the number to 0 first needs nothing, and then the
// templates change freely.
func (v *CourseValidator) checkPlaceholders(ctx context.Context, old, c *v1alpha1.Course, path *field.Path) (field.ErrorList, error) {
	want, had := placeholders(c), int32(0)
	resized := false
	if old != nil {
		had = placeholders(old)
		resized = want > 0 && !slices.Equal(old.Spec.Templates, c.Spec.Templates)
	}
	if want <= had && !resized {
		return nil, nil
	}
	who, err := requester(ctx)
	if err != nil {
		return nil, err
	}
	act := access.Action{Verb: "create", Resource: "pods", Namespace: c.Namespace}
	ok, err := v.Access.Allowed(ctx, who, act)
	if err != nil {
		return nil, fmt.Errorf("checking who may hold placeholders in %s: %w", c.Namespace, err)
	}
	if ok {
		return nil, nil
	}
	if want <= had {
		return field.ErrorList{field.Forbidden(path, fmt.Sprintf(
			"%s may not %s: placeholders are pods the controller runs for whoever asks for them, sized like the course's templates, so changing the templates of a course that holds %d takes the right to create pods in the namespace (or set placeholders to 0 first)", who.User, act, want))}, nil
	}
	return field.ErrorList{field.Forbidden(path, fmt.Sprintf(
		"%s may not %s: placeholders are pods the controller runs for whoever asks for them, so raising their number (%d to %d) takes the right to create pods in the namespace", who.User, act, had, want))}, nil
}

func placeholders(c *v1alpha1.Course) int32 {
	if c.Spec.Schedule == nil || c.Spec.Schedule.Placeholders == nil {
		return 0
	}
	return *c.Spec.Schedule.Placeholders
}
