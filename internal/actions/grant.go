package actions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/budget"
	"github.com/userland-dev/userland/internal/course"
)

// ErrNoBudget refuses a grant to an environment no budget governs.
var ErrNoBudget = errors.New("no compute-hour budget governs this environment")

// GrantPatch is the change that grants ul hours more in its budget's
// current period, on top of what was granted for it, recorded as by. c is
// ul's course (nil outside one) and tmpl its template's spec: the budget
// that governs it says which period is current. The patch carries ul's
// resourceVersion, so two grants at once cannot lose one (the loser gets
// a conflict and retries with the other's total). Who may grant is RBAC's
// to say: the webhook asks for the verb grant.
func GrantPatch(ul *v1alpha1.Userland, c *v1alpha1.Course, tmpl *v1alpha1.TemplateSpec, hours int64, by string, now time.Time) (client.Patch, error) {
	var spec *v1alpha1.BudgetSpec
	var termStart time.Time
	switch {
	case c != nil:
		spec, termStart = c.Spec.Limits.Budget, c.Spec.Term.Start.Time
	case tmpl != nil:
		spec = tmpl.Budget
	}
	if spec == nil {
		return nil, ErrNoBudget
	}
	period := budget.PeriodAt(*spec, termStart, now)
	value, err := budget.AddGrant(ul.Annotations[v1alpha1.AnnotationBudgetGrant], period.Start, hours, by)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": ul.ResourceVersion,
		"annotations":     map[string]any{v1alpha1.AnnotationBudgetGrant: value},
	}})
	if err != nil {
		return nil, fmt.Errorf("encoding the grant patch: %w", err)
	}
	return client.RawPatch(types.MergePatchType, data), nil
}

// Grant writes GrantPatch to ul, the environment its caller read and
// checked. The controller writes an environment's status (a start, a stop,
// the usage of a period) at any moment, and every write moves the
// resourceVersion the patch carries: a conflict is then not a refusal. On
// one, Grant reads the environment again from live (past any cache, which
// may not have seen the write yet) and adds to the total found there. It
// gives up with NotFound if the name now holds another object (a new UID):
// the caller checked this one, not its successor.
func Grant(ctx context.Context, live client.Reader, w client.Writer, ul *v1alpha1.Userland, c *v1alpha1.Course, tmpl *v1alpha1.TemplateSpec,
	hours int64, by string, now time.Time, opts ...client.PatchOption) error {
	return grant(ctx, live, w, ul, c, tmpl, hours, by, now, nil, opts...)
}

// ErrBudgetChanged refuses a grant whose environment the live Course's
// budget no longer governs, though the copy its caller checked did.
var ErrBudgetChanged = errors.New("the environment is no longer under its course's budget (the roster changed), so nothing was granted")

// ErrGrantChanged refuses a form's grant when the environment's grant is
// no longer the one the page showed.
var ErrGrantChanged = errors.New("hours were granted on it since the page was shown, so nothing was changed; reload the page to see them, and grant again if still needed")

// GrantIfUnchanged is Grant for a form: seen is the grant annotation the
// page showed (empty for none), and the grant is added only while it is
// still that, else ErrGrantChanged. A second press of the same form (a
// double click, a resubmission) or a colleague's grant meanwhile is then
// not added on top unseen; kubectl, which shows nothing first, uses Grant.
func GrantIfUnchanged(ctx context.Context, live client.Reader, w client.Writer, ul *v1alpha1.Userland, c *v1alpha1.Course, tmpl *v1alpha1.TemplateSpec,
	hours int64, by string, now time.Time, seen string, opts ...client.PatchOption) error {
	return grant(ctx, live, w, ul, c, tmpl, hours, by, now, &seen, opts...)
}

func grant(ctx context.Context, live client.Reader, w client.Writer, ul *v1alpha1.Userland, c *v1alpha1.Course, tmpl *v1alpha1.TemplateSpec,
	hours int64, by string, now time.Time, seen *string, opts ...client.PatchOption) error {
	current := ul
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if current == nil {
			fresh := &v1alpha1.Userland{}
			if err := live.Get(ctx, client.ObjectKeyFromObject(ul), fresh); err != nil {
				return fmt.Errorf("reading %s again after a conflict: %w", ul.Name, err)
			}
			if fresh.UID != ul.UID {
				return apierrors.NewNotFound(v1alpha1.GroupVersion.WithResource("userlands").GroupResource(), ul.Name)
			}
			current = fresh
		}
		if c != nil {
			var err error
			if c, err = stillGoverns(ctx, live, c, current); err != nil {
				return err
			}
		}
		if seen != nil && current.Annotations[v1alpha1.AnnotationBudgetGrant] != *seen {
			return ErrGrantChanged
		}
		patch, err := GrantPatch(current, c, tmpl, hours, by, now)
		if err != nil {
			return err
		}
		// A new object to patch into: current may be a cached one.
		target := &v1alpha1.Userland{}
		target.Namespace, target.Name = ul.Namespace, ul.Name
		current = nil
		return w.Patch(ctx, target, patch, opts...)
	})
}

// stillGoverns checks, on the live Course, that c's budget governs ul
// (course.BudgetGoverns), as its caller checked on a cached copy, and
// returns that Course, whose budget the grant is then added under. A
// roster change (the student made staff, the budget removed) does not
// move the environment's resourceVersion, so the write's own precondition
// cannot catch it: the Course is read past any cache before each write.
func stillGoverns(ctx context.Context, live client.Reader, c *v1alpha1.Course, ul *v1alpha1.Userland) (*v1alpha1.Course, error) {
	fresh := &v1alpha1.Course{}
	if err := live.Get(ctx, client.ObjectKeyFromObject(c), fresh); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, ErrBudgetChanged
		}
		return nil, fmt.Errorf("reading course %s again after a conflict: %w", c.Name, err)
	}
	if fresh.UID != c.UID || !course.BudgetGoverns(fresh, ul) {
		return nil, ErrBudgetChanged
	}
	return fresh, nil
}
