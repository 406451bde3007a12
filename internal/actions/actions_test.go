package actions

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/userland-dev/userland/api/v1alpha1"
)

func TestPatch(t *testing.T) {
	now := time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC)
	stopped := &v1alpha1.Userland{Status: v1alpha1.UserlandStatus{Phase: v1alpha1.PhaseStopped}}
	running := &v1alpha1.Userland{Status: v1alpha1.UserlandStatus{Phase: v1alpha1.PhaseReady}}
	stamp := `{"metadata":{"annotations":{"userland.dev/restarted-at":"2026-11-22T06:00:00Z"}}`
	tests := map[string]struct {
		verb Verb
		ul   *v1alpha1.Userland
		want string
	}{
		"stop":                                   {Stop, running, `{"spec":{"suspend":true}}`},
		"start a stopped one counts as activity": {Start, stopped, `{"metadata":{"annotations":{"userland.dev/restarted-at":"2026-11-22T06:00:00Z"}},"spec":{"suspend":false}}`},
		"start a running one does not restart it": {Start, running, `{"spec":{"suspend":false}}`},
		"restart": {Restart, running, stamp + `}`},
		"apply":   {Apply, running, stamp + `}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, err := Patch(tc.verb, tc.ul, now)
			if err != nil {
				t.Fatal(err)
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
