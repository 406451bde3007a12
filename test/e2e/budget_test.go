package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestBudgetInTheBrowser: a student sees their usage on the home page;
// an environment whose budget ran out opens onto a page that says when it
// resets and whom to ask; staff bound to userland-budget-granter grant a
// student hours from the course page, and the student sees them. The
// budget runs out in real time without waiting: one CPU-hour at a
// weight of 3,600 CPUs lasts a second.
func TestBudgetInTheBrowser(t *testing.T) {
	ctx := context.Background()
	const ns = "demo"
	metered := testobj.MakeTemplate(ns, "e2e-metered").Container("app").Obj()
	metered.Spec.PodTemplate.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3600")}
	metered.Spec.Budget = &v1alpha1.BudgetSpec{Hours: 1, Period: v1alpha1.BudgetWeek, Weighting: v1alpha1.WeightingCPU}
	spent := testobj.MakeUserland(ns, "alice-metered", "alice", "e2e-metered").Obj()
	crs := testobj.MakeCourse(ns, "e2e-budget").Students("bob").Staff("carol").Template("e2e-metered", v1alpha1.ProvisionUpFront).Obj()
	crs.Spec.Limits.Budget = &v1alpha1.BudgetSpec{Hours: 2, Period: v1alpha1.BudgetWeek, Weighting: v1alpha1.WeightingNone}
	granter := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "e2e-budget-carol"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "userland-budget-granter"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "carol"}},
	}
	for _, o := range []client.Object{metered, spent, crs, granter} {
		if err := stack.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = stack.Client.Delete(ctx, granter)
		_ = stack.Client.Delete(ctx, crs)
		_ = stack.Client.Delete(ctx, spent)
		_ = stack.Client.DeleteAllOf(ctx, &v1alpha1.Userland{}, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelCourse: "e2e-budget"})
		_ = stack.Client.Delete(ctx, metered)
	})
	var ul v1alpha1.Userland
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return stack.Client.Get(ctx, client.ObjectKeyFromObject(spent), &ul) == nil && ul.Status.StoppedReason == v1alpha1.StoppedBudgetExhausted, nil
	})
	if err != nil {
		t.Fatalf("alice's metered environment never ran out of budget: %+v", ul.Status)
	}

	alice := session(t)
	signIn(t, alice, "alice")
	usage := `document.querySelector('li.env[data-name="alice-metered"] [data-field="usage"]')`
	waitFor(t, alice, "alice's usage on her home page", "!!"+usage, 10*time.Second)
	if got := eval[string](t, alice, usage+".textContent"); !strings.Contains(got, "of 1h, 0m left") {
		t.Errorf("alice's usage reads %q, want the hour used up", got)
	}
	screenshot(t, alice, "budget-home")
	do(t, alice, "opening the exhausted environment", chromedp.Navigate(ul.Status.URL))
	body := eval[string](t, alice, "document.body.innerText")
	for _, want := range []string{"compute-hour budget for this environment is used up", "It resets on Monday", "ask an administrator"} {
		if !strings.Contains(body, want) {
			t.Errorf("the exhausted page does not say %q:\n%.1500s", want, body)
		}
	}
	screenshot(t, alice, "budget-exhausted")

	staff := session(t)
	signIn(t, staff, "carol")
	page := stack.URL + "/dashboard/course?namespace=demo&name=e2e-budget"
	button := `document.querySelector('tr.member[data-user="bob"] form.grant button')`
	err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(context.Context) (bool, error) {
		if _, err := chromedp.Run(staff, chromedp.Navigate(page)); err != nil {
			return false, err
		}
		return eval[bool](t, staff, "!!"+button), nil
	})
	if err != nil {
		t.Fatalf("carol, a granter, is never offered Grant hours for bob:\n%.2000s", eval[string](t, staff, "document.body.innerText"))
	}
	screenshot(t, staff, "budget-course")
	do(t, staff, "granting bob three hours",
		chromedp.SetValue(chromedp.CSS(`tr.member[data-user="bob"] form.grant input[name="hours"]`), "3"),
		chromedp.Click(chromedp.CSS(`tr.member[data-user="bob"] form.grant button`)),
		chromedp.WaitVisible(chromedp.CSS(".flash")),
	)
	if got := eval[string](t, staff, `document.querySelector(".flash").textContent`); !strings.Contains(got, "Granted bob 3 more hours") {
		t.Errorf("the flash after granting says %q", got)
	}

	student := session(t)
	signIn(t, student, "bob")
	bobUsage := `Array.from(document.querySelectorAll('[data-field="usage"]')).map(function(e){ return e.textContent; }).join("|")`
	waitFor(t, student, "bob's granted hours on his home page", bobUsage+`.indexOf("of 5h, 5h left") >= 0`, 30*time.Second)
}
