package webhook_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/budget"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestAdversaryDeletingUsedHoursTakesGrant: the course makes a deleted
// student environment again with nothing used (its data claim kept), so
// deleting one that has used hours this period is a grant. An assistant
// with edit (userland-user-manager: delete on userlands) but no grant is
// refused; a granter may; an environment with nothing used is deleted by
// anyone RBAC lets.
func TestAdversaryDeletingUsedHoursTakesGrant(t *testing.T) {
	t.Parallel()
	startWebhooks(t)
	loadRoles(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	db := testobj.MakeCourse(ns, "db").Students("s@uni.example", "u@uni.example").Template("lab", v1alpha1.ProvisionUpFront).Obj()
	if err := env.Client.Create(ctx, compliant(ns, "lab")); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, db); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	week := budget.WeekStart(now)
	mk := func(name, user string, used int64) *v1alpha1.Userland {
		ul := course.NewUserland(db, user, course.BasisStudentUser, v1alpha1.TemplateReference{Name: "lab"})
		ul.Name = name
		if err := env.Client.Create(ctx, ul); err != nil {
			t.Fatal(err)
		}
		if used > 0 {
			patch := client.MergeFrom(ul.DeepCopy())
			ul.Status.Usage = &v1alpha1.UsageStatus{PeriodStart: metav1.NewTime(week), PeriodEnd: &metav1.Time{Time: week.AddDate(0, 0, 7)},
				UsedSeconds: used, LimitSeconds: 3600}
			if err := env.Client.Status().Patch(ctx, ul, patch); err != nil {
				t.Fatal(err)
			}
		}
		return ul
	}
	used := mk("s-lab-db", "s@uni.example", 3600)
	fresh := mk("u-lab-db", "u@uni.example", 0)
	ta := clientAs(t, ns, "ta@uni.example", clusterRole("userland-user-manager"))
	prof := clientAs(t, ns, "prof@uni.example", clusterRole("userland-user-manager"))
	clientAs(t, ns, "prof@uni.example", clusterRole("userland-budget-granter"))
	waitAuthorized(t, ta, &v1alpha1.UserlandList{}, client.InNamespace(ns))

	err := ta.Delete(ctx, used.DeepCopy())
	if err == nil {
		t.Fatal("HOLE: an assistant without grant deleted an environment that used its hours; the course makes it again with none used")
	}
	if !strings.Contains(err.Error(), `verb "grant"`) {
		t.Errorf("refusal %q does not name the verb", err)
	}
	if err := ta.Delete(ctx, fresh.DeepCopy()); err != nil {
		t.Errorf("deleting an environment with nothing used was refused: %v", err)
	}
	env.Eventually(t, 30*time.Second, "the granter's deletion", func(ctx context.Context) (bool, error) {
		return prof.Delete(ctx, used.DeepCopy()) == nil, nil
	})
}
