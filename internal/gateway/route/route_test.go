package route

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

func TestFromPath(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		path string
		want Target
		err  error
	}{
		"root of an environment": {"/u/cs101/taro/", Target{types.NamespacedName{Namespace: "cs101", Name: "taro"}, "/u/cs101/taro", "/"}, nil},
		"deep path kept escaped": {"/u/cs101/taro/lab/a%20b?", Target{types.NamespacedName{Namespace: "cs101", Name: "taro"}, "/u/cs101/taro", "/lab/a%20b?"}, nil},
		"missing slash":          {"/u/cs101/taro", Target{types.NamespacedName{Namespace: "cs101", Name: "taro"}, "/u/cs101/taro", ""}, ErrNeedsSlash},
		"gateway path":           {"/login", Target{}, ErrNotEnvironment},
		"no name":                {"/u/cs101", Target{}, ErrInvalid},
		"empty name":             {"/u/cs101//x", Target{}, ErrInvalid},
		"dot-dot after name":     {"/u/cs101/taro/../hanako/", Target{}, ErrInvalid},
		"dot-dot as name":        {"/u/cs101/../other/hanako/", Target{}, ErrInvalid},
		"encoded dot-dot":        {"/u/cs101/taro/%2e%2E/hanako/", Target{}, ErrInvalid},
		"encoded slash in name":  {"/u/cs101/taro%2Fhanako/", Target{}, ErrInvalid},
		"double-encoded slash":   {"/u/cs101/taro%252Fhanako/", Target{}, ErrInvalid},
		"upper case":             {"/u/cs101/Taro/", Target{}, ErrInvalid},
		"trailing dot":           {"/u/cs101/taro./", Target{}, ErrInvalid},
		"single dot segment":     {"/u/cs101/taro/./x", Target{}, ErrInvalid},
		"name too long":          {"/u/cs101/" + strings.Repeat("a", 64) + "/", Target{}, ErrInvalid},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := FromPath(tc.path)
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if tc.err != nil && !errors.Is(tc.err, ErrNeedsSlash) {
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestLabelFromHost(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		host string
		want string
		err  error
	}{
		"plain":                      {"taro--cs101.u.example.edu", "taro--cs101", nil},
		"with port":                  {"taro--cs101.u.example.edu:8443", "taro--cs101", nil},
		"hashed":                     {"my-lab-0123456789ab.u.example.edu", "my-lab-0123456789ab", nil},
		"the gateway itself":         {"u.example.edu", "", ErrNotEnvironment},
		"another domain":             {"taro--cs101.evil.example", "", ErrNotEnvironment},
		"suffix trick":               {"taro--cs101.u.example.edu.evil.example", "", ErrNotEnvironment},
		"nested label":               {"x.taro--cs101.u.example.edu", "", ErrInvalid},
		"upper case":                 {"Taro--cs101.u.example.edu", "", ErrInvalid},
		"too long":                   {strings.Repeat("a", 64) + ".u.example.edu", "", ErrInvalid},
		"trailing dash":              {"taro-.u.example.edu", "", ErrInvalid},
		"trailing dot on the domain": {"taro--cs101.u.example.edu.", "", ErrNotEnvironment},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := LabelFromHost(tc.host, "u.example.edu")
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
