package authz

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/gateway/session"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestBatchIsChecksRule: the dashboard's lists and a course's page decide
// with a Batch, which must answer exactly as Check does for each
// environment (one rule, one precedence), while reading each namespace and
// course once per request, not once per row.
func TestBatchIsChecksRule(t *testing.T) {
	t.Parallel()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	cs101 := testobj.MakeCourse("teach", "cs101").Term(now.Add(-time.Hour), now.Add(time.Hour)).
		Students("alice", "bob").Staff("tara").Template("lab", v1alpha1.ProvisionUpFront).Obj()
	cs101.UID = "cs101-uid" // what the API server gives it; provenance names it
	made := func(user string) *v1alpha1.Userland {
		ul := course.NewUserland(cs101, user, course.BasisStudentUser, v1alpha1.TemplateReference{Name: "lab"})
		ul.Name = user + "-lab"
		return ul
	}
	adopted := testobj.MakeUserland("teach", "carol-lab", "carol", "lab").Obj()
	adopted.Labels = map[string]string{v1alpha1.LabelCourse: "cs101"} // a label alone
	taras := testobj.MakeUserland("teach", "tara-lab", "tara", "lab").Obj()
	taras.Labels = map[string]string{v1alpha1.LabelCourse: "cs101"}
	own := testobj.MakeUserland("home", "dave", "dave", "lab").Obj()
	envs := []*v1alpha1.Userland{made("alice"), made("bob"), adopted, taras, own}
	objs := []client.Object{cs101,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "teach", Annotations: map[string]string{InstructorGroupsAnnotation: "cs101-instructors"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "home"}}}
	for _, ul := range envs {
		objs = append(objs, ul)
	}
	gets := map[string]int{}
	r := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			gets[fmt.Sprintf("%T %s", obj, key)]++
			return c.Get(ctx, key, obj, opts...)
		},
	}).Build()
	policy := Policy{AdminGroups: []string{"admins"}}

	for _, tc := range []struct {
		id   session.Identity
		want map[string]Reason
	}{
		{session.Identity{User: "tara"}, map[string]Reason{"alice-lab": CourseStaff, "bob-lab": CourseStaff, "tara-lab": Owner}},
		{session.Identity{User: "alice"}, map[string]Reason{"alice-lab": Owner}},
		{session.Identity{User: "ivy", Groups: []string{"cs101-instructors"}},
			map[string]Reason{"alice-lab": Instructor, "bob-lab": Instructor, "carol-lab": Instructor, "tara-lab": Instructor}},
		{session.Identity{User: "root", Groups: []string{"admins"}},
			map[string]Reason{"alice-lab": Admin, "bob-lab": Admin, "carol-lab": Admin, "tara-lab": Admin, "dave": Admin}},
		{session.Identity{User: "mallory"}, map[string]Reason{}},
	} {
		t.Run(tc.id.User, func(t *testing.T) {
			ctx := context.Background()
			clear(gets)
			batch := policy.NewBatch(r, tc.id)
			byBatch, byCheck := map[string]Reason{}, map[string]Reason{}
			for _, ul := range envs {
				if reason := batch.Reason(ctx, ul); reason != "" {
					byBatch[ul.Name] = reason
				}
			}
			for key, n := range gets {
				if n > 1 {
					t.Errorf("the batch read %s %d times, want once", key, n)
				}
			}
			for _, ul := range envs {
				if _, reason := policy.Check(ctx, r, tc.id, types.NamespacedName{Namespace: ul.Namespace, Name: ul.Name}); reason != "" {
					byCheck[ul.Name] = reason
				}
			}
			if diff := cmp.Diff(tc.want, byBatch); diff != "" {
				t.Errorf("Batch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(byCheck, byBatch); diff != "" {
				t.Errorf("Batch differs from Check (-check +batch):\n%s", diff)
			}
		})
	}
}
