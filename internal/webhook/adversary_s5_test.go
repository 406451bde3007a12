package webhook_test

import (
	"context"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/budget"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/testobj"
)

// s5UsedCourse makes course db in a fresh namespace with student s's
// environment s-lab-db having used an hour this week, and u-lab-db unused.
func s5UsedCourse(t *testing.T) (string, *v1alpha1.Userland) {
	t.Helper()
	ctx := context.Background()
	ns := env.Namespace(t)
	db := testobj.MakeCourse(ns, "db").Students("s@uni.example", "u@uni.example").Template("lab", v1alpha1.ProvisionUpFront).Obj()
	if err := env.Client.Create(ctx, compliant(ns, "lab")); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, db); err != nil {
		t.Fatal(err)
	}
	week := budget.WeekStart(time.Now())
	ul := course.NewUserland(db, "s@uni.example", course.BasisStudentUser, v1alpha1.TemplateReference{Name: "lab"})
	ul.Name = "s-lab-db"
	if err := env.Client.Create(ctx, ul); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(ul.DeepCopy())
	ul.Status.Usage = &v1alpha1.UsageStatus{PeriodStart: metav1.NewTime(week), PeriodEnd: &metav1.Time{Time: week.AddDate(0, 0, 7)},
		UsedSeconds: 3600, LimitSeconds: 3600, WeightMilli: 1000}
	if err := env.Client.Status().Patch(ctx, ul, patch); err != nil {
		t.Fatal(err)
	}
	return ns, ul
}

func s5StillThere(t *testing.T, ns, name string) *v1alpha1.Userland {
	t.Helper()
	var ul v1alpha1.Userland
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &ul); err != nil {
		return nil
	}
	if !ul.DeletionTimestamp.IsZero() {
		return nil
	}
	return &ul
}

// TestAdversaryS5OwnerReferenceHandsTheDeletionToTheGarbageCollector: a
// teaching assistant with edit (userland-user-manager: update and patch on
// userlands) but no grant may not delete an environment that used its
// hours; the webhook lets every kube-system ServiceAccount's deletion
// through, the garbage collector's among them. The assistant plants an
// ownerReference on the used environment naming an owner that does not
// exist (or a ConfigMap they then delete): the garbage collector deletes
// the environment, the course makes it again with none used. Secure: the
// webhook refuses the planted ownerReference (changing who owns a used
// environment is deleting it).
func TestAdversaryS5OwnerReferenceHandsTheDeletionToTheGarbageCollector(t *testing.T) {
	t.Parallel()
	startWebhooks(t)
	loadRoles(t)
	ctx := context.Background()
	ns, used := s5UsedCourse(t)
	ta := clientAs(t, ns, "ta@uni.example", clusterRole("userland-user-manager"))
	waitAuthorized(t, ta, &v1alpha1.UserlandList{}, client.InNamespace(ns))

	// The direct deletion is refused (the baseline).
	if err := ta.Delete(ctx, used.DeepCopy()); err == nil {
		t.Fatal("HOLE (baseline): the assistant deleted the used environment directly")
	}
	// Planting an owner that does not exist: the garbage collector deletes
	// a dependent whose owners are all absent.
	err := patchUserland(ctx, ta, ns, used.Name, func(ul *v1alpha1.Userland) {
		ul.OwnerReferences = append(ul.OwnerReferences, metav1.OwnerReference{
			APIVersion: "v1", Kind: "ConfigMap", Name: "gone", UID: types.UID("00000000-0000-0000-0000-00000000dead"),
		})
	})
	t.Logf("the assistant plants an ownerReference to an absent ConfigMap on the used environment: %v", err)
	if err == nil {
		// What the garbage collector then does (APIOnly runs no
		// kube-controller-manager): it deletes as a kube-system
		// ServiceAccount, which the webhook lets through.
		gc, cerr := client.New(env.ConfigFor("system:serviceaccount:kube-system:generic-garbage-collector",
			"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"), client.Options{Scheme: env.Scheme})
		if cerr != nil {
			t.Fatal(cerr)
		}
		var cur v1alpha1.Userland
		if gerr := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: used.Name}, &cur); gerr != nil {
			t.Fatal(gerr)
		}
		derr := gc.Delete(ctx, &cur, client.Preconditions{UID: &cur.UID})
		t.Logf("the garbage collector's deletion of the now-orphaned used environment: %v", derr)
		t.Errorf("HOLE: an assistant without grant planted an ownerReference (to an absent owner) on an environment that used its hours; " +
			"the garbage collector (system:serviceaccount:kube-system:generic-garbage-collector, skipped by the webhook's matchConditions " +
			"and by ValidateDelete) deletes it, and the course makes it again with none used")
	}
}

// TestAdversaryS5DeleteCollectionIsAskedPerItem: someone RBAC allows
// deletecollection on userlands (a custom role) but not grant empties the
// namespace's environments in one request. Secure: the used one stays.
func TestAdversaryS5DeleteCollectionIsAskedPerItem(t *testing.T) {
	t.Parallel()
	startWebhooks(t)
	loadRoles(t)
	ctx := context.Background()
	ns, used := s5UsedCourse(t)
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bulk-deleter"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"userlands"},
			Verbs: []string{"get", "list", "watch", "delete", "deletecollection"}}},
	}
	if err := env.Client.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	bulk := clientAs(t, ns, "bulk@uni.example", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "bulk-deleter"})
	waitAuthorized(t, bulk, &v1alpha1.UserlandList{}, client.InNamespace(ns))
	for _, opts := range [][]client.DeleteAllOfOption{
		{client.InNamespace(ns)},
		{client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelCourse: "db"}},
		{client.InNamespace(ns), client.PropagationPolicy(metav1.DeletePropagationOrphan)},
	} {
		err := bulk.DeleteAllOf(ctx, &v1alpha1.Userland{}, opts...)
		t.Logf("deletecollection %v: %v", opts, err)
		if s5StillThere(t, ns, used.Name) == nil {
			t.Fatalf("HOLE: deletecollection (%v) by a requester without grant deleted the used environment", opts)
		}
	}
}

// TestAdversaryS5StripUsageThenDelete: the webhook is asked about a
// deletion only when status.usage exists. The assistant tries to remove
// it first: through the main resource (a full update with no usage, a
// merge patch setting status to null) and through the status subresource.
// Secure: the usage stays, and the deletion (and its dry run) is refused.
func TestAdversaryS5StripUsageThenDelete(t *testing.T) {
	t.Parallel()
	startWebhooks(t)
	loadRoles(t)
	ctx := context.Background()
	ns, used := s5UsedCourse(t)
	ta := clientAs(t, ns, "ta@uni.example", clusterRole("userland-user-manager"))
	waitAuthorized(t, ta, &v1alpha1.UserlandList{}, client.InNamespace(ns))

	var cur v1alpha1.Userland
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: used.Name}, &cur); err != nil {
		t.Fatal(err)
	}
	full := cur.DeepCopy()
	full.Status = v1alpha1.UserlandStatus{}
	t.Logf("full update without status: %v", ta.Update(ctx, full))
	raw := client.RawPatch(types.MergePatchType, []byte(`{"status":null}`))
	t.Logf("merge patch status=null on the main resource: %v", ta.Patch(ctx, cur.DeepCopy(), raw))
	t.Logf("merge patch status=null on the status subresource: %v", ta.Status().Patch(ctx, cur.DeepCopy(), raw))
	jp := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/status/usage"}]`))
	t.Logf("JSON patch removing /status/usage on the status subresource: %v", ta.Status().Patch(ctx, cur.DeepCopy(), jp))

	after := s5StillThere(t, ns, used.Name)
	if after == nil {
		t.Fatal("HOLE: the used environment went away while its usage was being stripped")
	}
	if after.Status.Usage == nil {
		t.Fatal("HOLE: an assistant without status rights removed status.usage; the webhook would then never be asked about the deletion")
	}
	dry := ta.Delete(ctx, after.DeepCopy(), client.DryRunAll)
	t.Logf("dry-run deletion: %v", dry)
	if dry == nil {
		t.Error("HOLE: a dry-run deletion of the used environment was admitted (it says the real one would be)")
	}
	if err := ta.Delete(ctx, after.DeepCopy()); err == nil || s5StillThere(t, ns, used.Name) == nil {
		t.Fatalf("HOLE: deletion went through after the strip attempts: %v", err)
	}
}

// TestAdversaryS5GrantRecordedAsAnotherThroughAServiceAccount: a granter
// who runs their namespace (admin, which aggregates edit: create
// ServiceAccounts and RoleBindings for roles they hold, impersonate
// ServiceAccounts) may not record a grant as somebody else's ("a person's
// grant names only themself"). They make a ServiceAccount, bind it the
// roles they hold, and write the grant impersonating it: a ServiceAccount
// may name anyone. Secure: the grant naming the dean is refused.
func TestAdversaryS5GrantRecordedAsAnotherThroughAServiceAccount(t *testing.T) {
	t.Parallel()
	startWebhooks(t)
	loadRoles(t)
	ctx := context.Background()
	ns, used := s5UsedCourse(t)
	// admin as the cluster aggregates it (APIOnly runs no aggregation
	// controller, so its parts are bound one by one): namespace admin,
	// edit and view, userland-user-manager; and the grant role.
	prof := clientAs(t, ns, "prof@uni.example", clusterRole("userland-budget-granter"))
	for _, r := range []string{"system:aggregate-to-admin", "system:aggregate-to-edit", "system:aggregate-to-view", "userland-user-manager"} {
		clientAs(t, ns, "prof@uni.example", clusterRole(r))
	}
	waitAuthorized(t, prof, &v1alpha1.UserlandList{}, client.InNamespace(ns))
	week := budget.WeekStart(time.Now()).UTC().Format(time.RFC3339) + "="

	// The direct forgery is refused (the baseline).
	direct := patchUserland(ctx, prof, ns, used.Name, func(ul *v1alpha1.Userland) {
		ul.Annotations[v1alpha1.AnnotationBudgetGrant] = week + "5;dean@uni.example"
	})
	if direct == nil {
		t.Fatal("HOLE (baseline): the professor recorded a grant as the dean's directly")
	}
	if err := prof.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "helper"}}); err != nil {
		t.Logf("the professor may not create a ServiceAccount: %v", err)
		return
	}
	for _, role := range []string{"userland-budget-granter", "userland-user-manager"} {
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "helper-" + role},
			RoleRef:    clusterRole(role),
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "helper", Namespace: ns}},
		}
		var err error
		for range 30 {
			if err = prof.Create(ctx, rb.DeepCopy()); err == nil {
				break
			}
			time.Sleep(300 * time.Millisecond)
		}
		if err != nil {
			t.Logf("the professor may not bind %s to their ServiceAccount: %v", role, err)
			return
		}
	}
	// Impersonating it takes impersonate on serviceaccounts, which admin
	// (through edit) holds: asked of the API server for the professor, then
	// done with the test's admin credentials (impersonation does not chain).
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "prof@uni.example", Groups: []string{"system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "impersonate", Resource: "serviceaccounts", Namespace: ns, Name: "helper"},
	}}
	if err := env.Client.Create(ctx, sar); err != nil {
		t.Fatal(err)
	}
	t.Logf("may the professor impersonate the ServiceAccount helper? %v (%s)", sar.Status.Allowed, sar.Status.Reason)
	if !sar.Status.Allowed {
		return
	}
	cfg := env.ConfigFor("system:serviceaccount:"+ns+":helper", "system:serviceaccounts", "system:serviceaccounts:"+ns, "system:authenticated")
	asHelper, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	var last error
	forged := false
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		last = patchUserland(ctx, asHelper, ns, used.Name, func(ul *v1alpha1.Userland) {
			ul.Annotations[v1alpha1.AnnotationBudgetGrant] = week + "5;dean@uni.example"
		})
		if last == nil {
			forged = true
			break
		}
		if !apierrors.IsForbidden(last) || strings.Contains(last.Error(), "it must say") {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Logf("the grant written as the professor's own ServiceAccount, naming the dean: %v", last)
	if forged {
		t.Error("HOLE: a granter recorded a grant as dean@uni.example's by writing it through a ServiceAccount they made and bound " +
			"(grantedByMismatch exempts every ServiceAccount, internal/webhook/userland_grant.go)")
	}
}

// TestAdversaryS5UserManagerSwapsTheTemplateOfAUsedEnvironment: the
// assistant (patch on userlands, no grant) points the student's used
// course environment at another template; the course then makes the
// student a fresh one from its own template, with a whole budget
// (internal/controller TestAdversaryS5TemplateSwapForASecondBudget).
// Secure: the webhook refuses moving a used course environment to
// another template without grant.
func TestAdversaryS5UserManagerSwapsTheTemplateOfAUsedEnvironment(t *testing.T) {
	t.Parallel()
	startWebhooks(t)
	loadRoles(t)
	ctx := context.Background()
	ns, used := s5UsedCourse(t)
	if err := env.Client.Create(ctx, compliant(ns, "lab2")); err != nil {
		t.Fatal(err)
	}
	ta := clientAs(t, ns, "ta@uni.example", clusterRole("userland-user-manager"))
	waitAuthorized(t, ta, &v1alpha1.UserlandList{}, client.InNamespace(ns))
	err := patchUserland(ctx, ta, ns, used.Name, func(ul *v1alpha1.Userland) {
		ul.Spec.TemplateRef = v1alpha1.TemplateReference{Name: "lab2"}
	})
	t.Logf("the assistant points the used course environment at template lab2: %v", err)
	if err == nil {
		t.Error("HOLE: a user manager without grant moved a student's used course environment to another template; " +
			"the course then makes the student a new one from its template with a whole budget")
	}
}
