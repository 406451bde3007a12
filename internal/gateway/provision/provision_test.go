package provision

import (
	"testing"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/gateway/session"
)

func TestAdmits(t *testing.T) {
	t.Parallel()
	ap := &v1alpha1.AutoProvisionSpec{Users: []string{"alice"}, Groups: []string{"cs101"}, EmailDomains: []string{"uni.example.ac.jp"}}
	cases := map[string]struct {
		ap   *v1alpha1.AutoProvisionSpec
		id   session.Identity
		want bool
	}{
		"listed user":             {ap, session.Identity{User: "alice"}, true},
		"group member":            {ap, session.Identity{User: "x", Groups: []string{"cs101"}}, true},
		"e-mail domain":           {ap, session.Identity{User: "x", Email: "x@UNI.example.ac.jp"}, true},
		"subdomain is not enough": {ap, session.Identity{User: "x", Email: "x@evil.uni.example.ac.jp"}, false},
		"nobody else":             {ap, session.Identity{User: "x", Email: "x@example.com"}, false},
		"no rule":                 {nil, session.Identity{User: "alice"}, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Admits(tc.ap, tc.id); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
