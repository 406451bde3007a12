package route

import (
	"errors"
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
