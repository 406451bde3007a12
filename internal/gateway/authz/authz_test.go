package authz

import (
	"testing"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/gateway/session"
)

func TestAllowed(t *testing.T) {
	t.Parallel()
	ul := &v1alpha1.Userland{Spec: v1alpha1.UserlandSpec{User: "Taro.Yamada@uni.example.ac.jp"}}
	policy := Policy{AdminGroups: []string{"platform-admins"}}
	teaching := map[string]string{InstructorGroupsAnnotation: "cs101-staff, cs101-tas"}
	cases := map[string]struct {
		id          session.Identity
		annotations map[string]string
		want        Reason
	}{
		"owner":                  {session.Identity{User: "Taro.Yamada@uni.example.ac.jp"}, nil, Owner},
		"owner with other case":  {session.Identity{User: "taro.yamada@uni.example.ac.jp"}, nil, ""},
		"someone else":           {session.Identity{User: "hanako@uni.example.ac.jp"}, nil, ""},
		"admin":                  {session.Identity{User: "root", Groups: []string{"platform-admins"}}, nil, Admin},
		"instructor of the ns":   {session.Identity{User: "prof", Groups: []string{"cs101-tas"}}, teaching, Instructor},
		"instructor elsewhere":   {session.Identity{User: "prof", Groups: []string{"cs102-tas"}}, teaching, ""},
		"empty group is nothing": {session.Identity{User: "x", Groups: []string{""}}, map[string]string{InstructorGroupsAnnotation: ","}, ""},
		"no identity":            {session.Identity{Groups: []string{"platform-admins"}}, nil, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := policy.Allowed(tc.id, ul, tc.annotations); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
