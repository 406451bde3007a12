package dashboard

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/userland-dev/userland/internal/access"
)

// TestCourseChangeRefusal: a refusal names who and what to ask for; a
// failed check refuses too, asking to retry.
func TestCourseChangeRefusal(t *testing.T) {
	denied := &access.Denied{User: "oidc:bob", Action: access.Action{Verb: "update", Group: "userland.dev", Resource: "courses", Namespace: "cs", Name: "db"}}
	cases := map[string]struct {
		err        error
		wantStatus int
		wantSays   []string
	}{
		"denied":          {denied, http.StatusForbidden, []string{"course-manager role", "oidc:bob", "courses.userland.dev/db", "namespace cs"}},
		"wrapped denial":  {errors.Join(errors.New("x"), denied), http.StatusForbidden, []string{"oidc:bob"}},
		"API server down": {errors.New("dial tcp: connection refused"), http.StatusServiceUnavailable, []string{"could not be checked", "nothing was changed"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			status, msg := courseChangeRefusal(tc.err)
			if status != tc.wantStatus {
				t.Errorf("status %d, want %d", status, tc.wantStatus)
			}
			for _, s := range tc.wantSays {
				if !strings.Contains(msg, s) {
					t.Errorf("%q does not say %q", msg, s)
				}
			}
			if strings.Contains(msg, "dial tcp") {
				t.Errorf("%q shows internals", msg)
			}
		})
	}
}
