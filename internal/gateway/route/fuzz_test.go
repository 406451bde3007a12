package route

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

// FuzzFromPath checks that whatever the path, an accepted target names
// valid labels and its prefix and rest rebuild exactly the request path: the
// parser never resolves a request to anything but what it literally says.
func FuzzFromPath(f *testing.F) {
	for _, seed := range []string{"/u/ns/name/", "/u/ns/name/a/b?c", "/u/ns/../x/", "/u/ns/n%2Fx/", "/u/ns/N/", "/u//x/", "/u/a/b/%2e%2e/"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, path string) {
		target, err := FromPath(path)
		if err != nil && !errors.Is(err, ErrNeedsSlash) {
			return
		}
		if !validLabel(target.Namespace) || !validLabel(target.Name) {
			t.Fatalf("%q: accepted invalid names %q/%q", path, target.Namespace, target.Name)
		}
		if err == nil && target.Prefix+target.Rest != path {
			t.Fatalf("%q: prefix %q + rest %q does not rebuild the path", path, target.Prefix, target.Rest)
		}
		if hasDotSegment(target.Rest) || strings.Contains(target.Name+target.Namespace, "%") {
			t.Fatalf("%q: accepted a dot segment or escape", path)
		}
	})
}

// FuzzHandWrittenMatchers checks validLabel and hasDotSegment, written out
// for speed, against their plain statements: the DNS-label regular
// expression, and "a segment that is . or .. once %2e is decoded".
func FuzzHandWrittenMatchers(f *testing.F) {
	for _, seed := range []string{"a", "a-b", "-a", "a-", "A", strings.Repeat("a", 63), strings.Repeat("a", 64), "", "/u/a/%2E%2e/", "/u/a/.%2e", "/u/a/...", "/u/a/%2e%2e%2e/", "%2", "./", "/%2e"} {
		f.Add(seed)
	}
	label := regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dotSegment := func(p string) bool {
		for _, seg := range strings.Split(p, "/") {
			s := strings.ReplaceAll(strings.ToLower(seg), "%2e", ".")
			if s == "." || s == ".." {
				return true
			}
		}
		return false
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := validLabel(s), len(s) <= 63 && label.MatchString(s); got != want {
			t.Fatalf("validLabel(%q) = %v, want %v", s, got, want)
		}
		if got, want := hasDotSegment(s), dotSegment(s); got != want {
			t.Fatalf("hasDotSegment(%q) = %v, want %v", s, got, want)
		}
	})
}
