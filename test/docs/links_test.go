// Package docs checks the README and docs/ tree: every relative link and
// image resolves to a file in the repository, every #anchor to a heading
// of the file it names, and nothing points outside the repository (a
// reader has only the repository). make verify runs it.
package docs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// link is one link in a Markdown file.
type link struct {
	Line   int
	Target string
}

var linkPattern = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// eachLine calls visit with each line of a Markdown text (numbered from
// 1) and whether it is inside a fenced code block; the fence lines
// themselves are skipped.
func eachLine(text string, visit func(n int, line string, fenced bool)) {
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		visit(i+1, line, fenced)
	}
}

// links are the Markdown links and images of text, outside fenced code
// blocks and inline code.
func links(text string) []link {
	var out []link
	eachLine(text, func(n int, line string, fenced bool) {
		if fenced {
			return
		}
		for _, m := range linkPattern.FindAllStringSubmatch(stripCode(line), -1) {
			out = append(out, link{Line: n, Target: m[1]})
		}
	})
	return out
}

// stripCode blanks inline code spans, where brackets are not links.
func stripCode(line string) string {
	parts := strings.Split(line, "`")
	for i := 1; i < len(parts); i += 2 {
		parts[i] = ""
	}
	return strings.Join(parts, "`")
}

// slug is GitHub's anchor for a heading: lower case, punctuation other
// than '-' and '_' dropped, spaces made '-'.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors are the slugs of a Markdown file's headings.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	eachLine(text, func(_ int, line string, fenced bool) {
		if !fenced && strings.HasPrefix(line, "#") {
			out[slug(strings.TrimLeft(line, "#"))] = true
		}
	})
	return out
}

// check returns one problem per broken link of the Markdown files under
// root (README.md and docs/), as "file:line: target: why".
// docFiles are the README and every Markdown file under docs/, relative
// to root: what a reader has.
func docFiles(root string) ([]string, error) {
	var files []string
	if _, err := os.Stat(filepath.Join(root, "README.md")); err == nil {
		files = append(files, "README.md")
	}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".md") {
			return err
		}
		rel, err := filepath.Rel(root, path)
		files = append(files, rel)
		return err
	})
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	return files, nil
}

func check(root string) ([]string, error) {
	files, err := docFiles(root)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, file := range files {
		text, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			return nil, err
		}
		for _, l := range links(string(text)) {
			if why := broken(root, file, string(text), l.Target); why != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: %s: %s", file, l.Line, l.Target, why))
			}
		}
	}
	return problems, nil
}

// broken says why target, linked from file, does not resolve; "" when it
// does. Web links are not fetched.
func broken(root, file, text, target string) string {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return ""
	}
	path, anchor, _ := strings.Cut(target, "#")
	if path != "" {
		resolved := filepath.Join(root, filepath.Dir(file), path)
		rel, err := filepath.Rel(root, resolved)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return "points outside the repository"
		}
		info, err := os.Stat(resolved)
		if err != nil {
			return "no such file"
		}
		if info.IsDir() || !strings.HasSuffix(resolved, ".md") {
			if anchor != "" {
				return "an anchor into something that is not Markdown"
			}
			return ""
		}
		b, err := os.ReadFile(resolved)
		if err != nil {
			return err.Error()
		}
		text = string(b)
	}
	if anchor != "" && !anchors(text)[anchor] {
		return "no heading #" + anchor
	}
	return ""
}

func TestDocsLinksResolve(t *testing.T) {
	t.Parallel()
	problems, err := check(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

func TestDocsPointNowhereOutsideTheRepository(t *testing.T) {
	t.Parallel()
	// A reader has the repository only: a design that once lived beside
	// it (../shared/DESIGN.md) is in docs/development/architecture.md.
	root := filepath.Join("..", "..")
	for _, file := range []string{"README.md", "docs"} {
		err := filepath.WalkDir(filepath.Join(root, file), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".md") {
				return err
			}
			b, err := os.ReadFile(path)
			if err == nil && strings.Contains(string(b), "../shared/") {
				t.Errorf("%s names ../shared/, outside the repository", path)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestSlug(t *testing.T) {
	t.Parallel()
	for heading, want := range map[string]string{
		" Quick start":                         "quick-start",
		"Written by hand, and why":             "written-by-hand-and-why",
		"An instructor's term":                 "an-instructors-term",
		"Client-side limits on the API server": "client-side-limits-on-the-api-server",
		"`make dev`: the first run":            "make-dev-the-first-run",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

func TestLinks(t *testing.T) {
	t.Parallel()
	text := "See [the API](docs/api.md) and ![a picture](docs/images/x.png \"title\").\n" +
		"```sh\n[not](a-link.md)\n```\n" +
		"`[code](not-a-link.md)` but [this](#anchor) and [web](https://example.org).\n"
	want := []link{{1, "docs/api.md"}, {1, "docs/images/x.png"}, {5, "#anchor"}, {5, "https://example.org"}}
	if diff := cmp.Diff(want, links(text)); diff != "" {
		t.Errorf("links (-want +got):\n%s", diff)
	}
}

// TestCheckFindsBrokenLinks: the checker itself fails on what it exists
// for, in a repository made for the test.
func TestCheckFindsBrokenLinks(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "# Top\n\n[guide](docs/guide.md#setting-up) [gone](docs/gone.md)\n[outside](../shared/DESIGN.md)\n")
	write("docs/guide.md", "# Guide\n\n## Setting up\n\n[back](../README.md#top) [self](#nowhere) [img](images/missing.png)\n")
	got, err := check(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"README.md:3: docs/gone.md: no such file",
		"README.md:4: ../shared/DESIGN.md: points outside the repository",
		"docs/guide.md:5: #nowhere: no heading #nowhere",
		"docs/guide.md:5: images/missing.png: no such file",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}
