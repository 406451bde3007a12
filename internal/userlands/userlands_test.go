package userlands

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/naming"
)

var lab = v1alpha1.TemplateReference{Kind: v1alpha1.TemplateKindTemplate, Name: "lab"}

func ul(name, user string, ref v1alpha1.TemplateReference) *v1alpha1.Userland {
	return &v1alpha1.Userland{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec:       v1alpha1.UserlandSpec{User: user, TemplateRef: ref},
	}
}

// racingWriter is a client whose Create finds the name just taken by
// another writer (a second gateway replica), which it then reveals.
type racingWriter struct {
	client.Client
	taker *v1alpha1.Userland
}

func (w *racingWriter) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if w.taker != nil && obj.GetName() == w.taker.Name {
		taker := w.taker
		w.taker = nil
		if err := w.Client.Create(ctx, taker); err != nil {
			return err
		}
	}
	return w.Client.Create(ctx, obj, opts...)
}

// TestCreateChoosesNames covers the name rules with a fake client; the
// plugin's tests run them against a real API server.
func TestCreateChoosesNames(t *testing.T) {
	t.Parallel()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	hashed := naming.HashedName("alice@b.example", lab)
	cases := []struct {
		name        string
		existing    []client.Object
		racer       *v1alpha1.Userland
		wantName    string
		wantCreated bool
	}{
		{name: "readable name free", wantName: "alice-lab", wantCreated: true},
		{name: "readable name is another user's", existing: []client.Object{ul("alice-lab", "alice@a.example", lab)}, wantName: hashed, wantCreated: true},
		{name: "an existing environment under an old name", existing: []client.Object{ul("legacy-x", "alice@b.example", lab)}, wantName: "legacy-x"},
		{name: "another replica created it first", racer: ul("alice-lab", "alice@b.example", lab), wantName: "alice-lab"},
		{name: "another user took the name first", racer: ul("alice-lab", "alice@a.example", lab), wantName: hashed, wantCreated: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.existing...).Build()
			w := &racingWriter{Client: c, taker: tc.racer}
			name, created, err := Create(context.Background(), c, w, ul("", "alice@b.example", lab))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]any{tc.wantName, tc.wantCreated}, []any{name, created}); diff != "" {
				t.Errorf("Create (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCourseEnvironmentsAreTheirOwn: a course's environment is created
// beside the user's own environment from the same template, never found
// among them (no adoption); the course's existing one is found under any
// name; another course's is not the course's.
func TestCourseEnvironmentsAreTheirOwn(t *testing.T) {
	t.Parallel()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	inCourse := func(u *v1alpha1.Userland, course string) *v1alpha1.Userland {
		u.Labels = map[string]string{v1alpha1.LabelCourse: course}
		return u
	}
	const user = "alice@b.example"
	names := naming.CourseCandidateNames("db", user, lab)
	cases := []struct {
		name        string
		existing    []client.Object
		racer       *v1alpha1.Userland
		wantName    string
		wantCreated bool
	}{
		{name: "no environment yet", wantName: names[0], wantCreated: true},
		{name: "the user's own environment is not the course's", existing: []client.Object{ul("alice-lab", user, lab)}, wantName: names[0], wantCreated: true},
		{name: "the course's, under any name", existing: []client.Object{inCourse(ul("old-name", user, lab), "db")}, wantName: "old-name"},
		{name: "another course's is not this one's", existing: []client.Object{inCourse(ul(names[0], user, lab), "other")}, wantName: names[1], wantCreated: true},
		{name: "the user's own took the name first", racer: ul(names[0], user, lab), wantName: names[1], wantCreated: true},
		{name: "another replica created it first", racer: inCourse(ul(names[0], user, lab), "db"), wantName: names[0]},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.existing...).Build()
			w := &racingWriter{Client: c, taker: tc.racer}
			name, created, err := Create(context.Background(), c, w, inCourse(ul("", user, lab), "db"))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]any{tc.wantName, tc.wantCreated}, []any{name, created}); diff != "" {
				t.Errorf("Create (-want +got):\n%s", diff)
			}
		})
	}
}
