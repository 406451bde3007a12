package actions

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/budget"
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
