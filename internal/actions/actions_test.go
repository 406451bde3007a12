package actions

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/userland-dev/userland/api/v1alpha1"
)

func TestPatch(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC)
	stopped := &v1alpha1.Userland{Status: v1alpha1.UserlandStatus{Phase: v1alpha1.PhaseStopped}}
	running := &v1alpha1.Userland{Status: v1alpha1.UserlandStatus{Phase: v1alpha1.PhaseReady}}
	suspended := func(by string) *v1alpha1.Userland {
		ul := stopped.DeepCopy()
		ul.Spec.Suspend = true
		if by != "" {
			ul.Annotations = map[string]string{v1alpha1.AnnotationSuspendedBy: by}
		}
		return ul
	}
	stamp := `{"metadata":{"annotations":{"userland.dev/restarted-at":"2026-11-22T06:00:00Z"}}`
	started := `{"metadata":{"annotations":{"userland.dev/restarted-at":"2026-11-22T06:00:00Z","userland.dev/suspended-by":null}},"spec":{"suspend":false}}`
	tests := map[string]struct {
		verb    Verb
		actor   Actor
		ul      *v1alpha1.Userland
		want    string
		wantErr error
	}{
		"owner stops":                            {Stop, Owner, running, `{"metadata":{"annotations":{"userland.dev/suspended-by":"owner"}},"spec":{"suspend":true}}`, nil},
		"staff stops":                            {Stop, Staff, running, `{"metadata":{"annotations":{"userland.dev/suspended-by":"staff"}},"spec":{"suspend":true}}`, nil},
		"staff takes over an owner's stop":       {Stop, Staff, suspended("owner"), `{"metadata":{"annotations":{"userland.dev/suspended-by":"staff"}},"spec":{"suspend":true}}`, nil},
		"owner cannot downgrade a staff stop":    {Stop, Owner, suspended("staff"), `{"spec":{"suspend":true}}`, nil},
		"start a stopped one counts as activity": {Start, Owner, stopped, started, nil},
		"start a running one does not restart it": {Start, Owner, running,
			`{"metadata":{"annotations":{"userland.dev/suspended-by":null}},"spec":{"suspend":false}}`, nil},
		"owner lifts their own suspension":              {Start, Owner, suspended("owner"), started, nil},
		"owner cannot lift staff's suspension":          {Start, Owner, suspended("staff"), "", ErrSuspendedByStaff},
		"owner cannot lift a suspension set by kubectl": {Start, Owner, suspended(""), "", ErrSuspendedByStaff},
		"staff lifts any suspension":                    {Start, Staff, suspended("staff"), started, nil},
		"restart":                                       {Restart, Owner, running, stamp + `}`, nil},
		"apply":                                         {Apply, Staff, running, stamp + `}`, nil},
		"the patch names the Userland it was decided on": {Stop, Owner, withUID(running, "3f2a"),
			`{"metadata":{"annotations":{"userland.dev/suspended-by":"owner"},"uid":"3f2a"},"spec":{"suspend":true}}`, nil},
		"even when it changes no metadata": {Stop, Owner, withUID(suspended("staff"), "3f2a"),
			`{"metadata":{"uid":"3f2a"},"spec":{"suspend":true}}`, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, err := Patch(tc.verb, tc.actor, tc.ul, now)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			got, _ := p.Data(nil)
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := Parse("delete"); err == nil {
		t.Error("Parse accepted an unknown verb")
	}
}

// withUID is a copy of ul with the given UID.
func withUID(ul *v1alpha1.Userland, uid string) *v1alpha1.Userland {
	ul = ul.DeepCopy()
	ul.UID = types.UID(uid)
	return ul
}

// TestReplaced: only the refusal of a changed metadata.uid counts; any other
// invalid patch, or a refusal of another kind, is an error to report. The
// real API server's refusal is checked in the gateway's namesake test.
func TestReplaced(t *testing.T) {
	gk := schema.GroupKind{Group: v1alpha1.GroupVersion.Group, Kind: "Userland"}
	invalid := func(errs ...*field.Error) error { return apierrors.NewInvalid(gk, "lab", errs) }
	uid := field.Invalid(field.NewPath("metadata", "uid"), "bob", "field is immutable")
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"uid immutable", invalid(uid), true},
		{"uid among others", invalid(field.Required(field.NewPath("spec", "user"), ""), uid), true},
		{"uid wrapped", fmt.Errorf("stop ns/lab: %w", invalid(uid)), true},
		{"another field", invalid(field.Invalid(field.NewPath("spec", "suspend"), "x", "bad")), false},
		{"uid required, not changed", invalid(field.Required(field.NewPath("metadata", "uid"), "")), false},
		{"not found", apierrors.NewNotFound(schema.GroupResource{Resource: "userlands"}, "lab"), false},
		{"conflict", apierrors.NewConflict(schema.GroupResource{Resource: "userlands"}, "lab", errors.New("x")), false},
		{"plain", errors.New("metadata.uid: field is immutable"), false},
		{"nil", nil, false},
	} {
		if got := Replaced(tc.err); got != tc.want {
			t.Errorf("%s: Replaced = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestPassOver: a bulk loop goes on past a Userland gone or replaced, and
// stops at anything else.
func TestPassOver(t *testing.T) {
	gr := schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "userlands"}
	replaced := apierrors.NewInvalid(schema.GroupKind{Group: gr.Group, Kind: "Userland"}, "lab",
		field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), "bob", "field is immutable")})
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"gone", apierrors.NewNotFound(gr, "lab"), true},
		{"replaced", replaced, true},
		{"forbidden", apierrors.NewForbidden(gr, "lab", errors.New("no")), false},
		{"conflict", apierrors.NewConflict(gr, "lab", errors.New("x")), false},
	} {
		if got := PassOver(tc.err); got != tc.want {
			t.Errorf("%s: PassOver = %v, want %v", tc.name, got, tc.want)
		}
	}
}
