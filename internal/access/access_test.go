package access

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

type ident struct {
	User   string
	Groups []string
}

// TestMappingSubject: the names the gateway asks RBAC about are the IdP's
// with the configured prefixes, and never one of the API server's
// reserved system: names.
func TestMappingSubject(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		mapping Mapping
		id      ident
		want    Subject
	}{
		"no prefix": {
			id:   ident{User: "alice", Groups: []string{"tas"}},
			want: Subject{User: "alice", Groups: []string{"tas", "system:authenticated"}},
		},
		"prefixes": {
			mapping: Mapping{UserPrefix: "oidc:", GroupPrefix: "oidc:"},
			id:      ident{User: "alice", Groups: []string{"tas", "system:masters"}},
			want:    Subject{User: "oidc:alice", Groups: []string{"oidc:tas", "oidc:system:masters", "system:authenticated"}},
		},
		"an IdP group named like a system group grants nothing": {
			id:   ident{User: "mallory", Groups: []string{"system:masters", "tas"}},
			want: Subject{User: "mallory", Groups: []string{"tas", "system:authenticated"}},
		},
		"an IdP user named like a system user is nobody": {
			id:   ident{User: "system:admin", Groups: []string{"tas"}},
			want: Subject{},
		},
		"a user prefix takes a name out of system:": {
			mapping: Mapping{UserPrefix: "idp:"},
			id:      ident{User: "system:admin"},
			want:    Subject{User: "idp:system:admin", Groups: []string{"system:authenticated"}},
		},
		"nobody signed in": {
			want: Subject{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.mapping.Subject(tc.id.User, tc.id.Groups)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}
