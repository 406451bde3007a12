package provision

import (
	"testing"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/gateway/session"
)

func TestAdmits(t *testing.T) {
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

func TestProvisionNamesAreDistinct(t *testing.T) {
	a := Name("alice", "Template/vscode-x")
	b := Name("alice-vscode", "Template/x")
	if a == b {
		t.Errorf("two user/template pairs share the name %s", a)
	}
	// Every replica must derive the same name: it is a pure function, so
	// pin one value.
	if got, want := Name("alice", "Template/vscode"), "alice-template-vscode-"; got[:len(want)] != want || len(got) != len(want)+10 {
		t.Errorf("ProvisionName = %q, want %q plus a 10-character hash", got, want)
	}
}
