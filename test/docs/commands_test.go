package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var (
	// makeInline is a make command in inline code: `make test`.
	makeInline = regexp.MustCompile("`make ([a-z][a-z0-9-]*)")
	// makeCommand is one at the start of a line of a code block.
	makeCommand = regexp.MustCompile(`^\s*make ([a-z][a-z0-9-]*)`)
)

// makeTargets are the make targets a Markdown text tells people to run.
func makeTargets(text string) []string {
	var out []string
	eachLine(text, func(_ int, line string, fenced bool) {
		pattern := makeInline
		if fenced {
			pattern = makeCommand
		}
		for _, m := range pattern.FindAllStringSubmatch(line, -1) {
			out = append(out, m[1])
		}
	})
	return out
}

// TestDocsMakeTargetsExist: every `make X` the README and docs tell people
// to run is a target of the Makefile, so a renamed or removed target
// cannot leave the docs behind.
func TestDocsMakeTargetsExist(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	targets := makefileTargets(t, root)
	files, err := docFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, file := range files {
		b, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, target := range makeTargets(string(b)) {
			seen++
			if !slices.Contains(targets, target) {
				t.Errorf("%s: `make %s` is not a Makefile target (targets: %s)", file, target, strings.Join(targets, ", "))
			}
		}
	}
	if seen == 0 {
		t.Fatal("found no make commands in the docs: the pattern no longer matches them")
	}
	t.Logf("%d make commands in the docs, each a Makefile target", seen)
}

// makefileTargets are the targets of the repository's Makefile.
func makefileTargets(t *testing.T, root string) []string {
	t.Helper()
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):`).FindAllStringSubmatch(string(makefile), -1) {
		targets = append(targets, m[1])
	}
	return targets
}

func TestMakeTargets(t *testing.T) {
	t.Parallel()
	text := "Run `make test`, then\n  make even a prose line start with make,\nnor `makefile`.\n```sh\nmake dev DEV_FLAGS=--reset\n  make verify\n```\n"
	if diff := cmp.Diff([]string{"test", "dev", "verify"}, makeTargets(text)); diff != "" {
		t.Errorf("makeTargets (-want +got):\n%s", diff)
	}
}
