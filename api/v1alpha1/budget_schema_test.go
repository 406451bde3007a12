package v1alpha1_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// TestBudgetsAreRefusedNamingTheField: a bad budget on a course or a
// template is refused by the API server at the field that is wrong.
func TestBudgetsAreRefusedNamingTheField(t *testing.T) {
	t.Parallel()
	budget := func(fields map[string]any) map[string]any {
		b := map[string]any{"hours": int64(10)}
		for k, v := range fields {
			b[k] = v
		}
		return b
	}
	clusterTemplate := strings.Replace(validTemplate, "kind: Template", "kind: ClusterTemplate", 1)
	cases := map[string]invalidCase{
		"course budget of zero hours": {validCourse, []func(*unstructured.Unstructured){
			set(budget(map[string]any{"hours": int64(0)}), "spec", "limits", "budget"),
		}, "spec.limits.budget.hours", "greater than or equal to 1"},
		"course budget beyond a year of hours": {validCourse, []func(*unstructured.Unstructured){
			set(budget(map[string]any{"hours": int64(10001)}), "spec", "limits", "budget"),
		}, "spec.limits.budget.hours", "less than or equal to 10000"},
		"course budget without hours": {validCourse, []func(*unstructured.Unstructured){
			set(map[string]any{"period": "Week"}, "spec", "limits", "budget"),
		}, "spec.limits.budget.hours", "Required value"},
		"course budget per month": {validCourse, []func(*unstructured.Unstructured){
			set(budget(map[string]any{"period": "Month"}), "spec", "limits", "budget"),
		}, "spec.limits.budget.period", `supported values: "Week", "Term"`},
		"course budget weighted by memory": {validCourse, []func(*unstructured.Unstructured){
			set(budget(map[string]any{"weighting": "Memory"}), "spec", "limits", "budget"),
		}, "spec.limits.budget.weighting", `supported values: "None", "CPU"`},
		"template budget per term": {validTemplate, []func(*unstructured.Unstructured){
			set(budget(map[string]any{"period": "Term"}), "spec", "budget"),
		}, "spec.budget.period", "Term needs a course"},
		"cluster template budget per term": {clusterTemplate, []func(*unstructured.Unstructured){
			set(budget(map[string]any{"period": "Term"}), "spec", "budget"),
		}, "spec.budget.period", "Term needs a course"},
		"template budget of negative hours": {validTemplate, []func(*unstructured.Unstructured){
			set(budget(map[string]any{"hours": int64(-3)}), "spec", "budget"),
		}, "spec.budget.hours", "greater than or equal to 1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			createRefused(t, tc)
		})
	}
}

// TestBudgetsAreAcceptedWithDefaults: hours alone is a weekly, unweighted
// budget, as the API server fills it in.
func TestBudgetsAreAcceptedWithDefaults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := map[string]struct {
		base string
		path []string
		into client.Object
		get  func(client.Object) *v1alpha1.BudgetSpec
	}{
		"course": {validCourse, []string{"spec", "limits", "budget"}, &v1alpha1.Course{},
			func(o client.Object) *v1alpha1.BudgetSpec { return o.(*v1alpha1.Course).Spec.Limits.Budget }},
		"template": {validTemplate, []string{"spec", "budget"}, &v1alpha1.Template{},
			func(o client.Object) *v1alpha1.BudgetSpec { return o.(*v1alpha1.Template).Spec.Budget }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			obj := parse(t, tc.base)
			obj.SetNamespace(env.Namespace(t))
			set(map[string]any{"hours": int64(12)}, tc.path...)(obj)
			if err := env.Client.Create(ctx, obj); err != nil {
				t.Fatalf("create: %v", err)
			}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), tc.into); err != nil {
				t.Fatalf("get: %v", err)
			}
			want := &v1alpha1.BudgetSpec{Hours: 12, Period: v1alpha1.BudgetWeek, Weighting: v1alpha1.WeightingNone}
			if diff := cmp.Diff(want, tc.get(tc.into)); diff != "" {
				t.Errorf("budget read back (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("a course budget per term weighted by CPU", func(t *testing.T) {
		t.Parallel()
		obj := parse(t, validCourse)
		obj.SetNamespace(env.Namespace(t))
		set(map[string]any{"hours": int64(40), "period": "Term", "weighting": "CPU"}, "spec", "limits", "budget")(obj)
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatalf("create: %v", err)
		}
	})
}
