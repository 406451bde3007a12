package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// shellCommand is one command of a `sh` code block in the docs, as a
// reader would type it: continuation lines joined, the comment after #
// dropped, words split as a shell splits them (quotes kept as one word),
// and each stage of a pipeline or list its own command.
type shellCommand struct {
	File string
	Line int
	Args []string
}

func (c shellCommand) String() string {
	return fmt.Sprintf("%s:%d: %s", c.File, c.Line, strings.Join(c.Args, " "))
}

// shellCommands are the commands of a Markdown text's `sh` blocks, the
// only blocks the docs tell people to run.
func shellCommands(file, text string) []shellCommand {
	var out []shellCommand
	inSh, fenced := false, false
	pending, start := "", 0
	for i, line := range strings.Split(text, "\n") {
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "```") {
			fenced = !fenced
			inSh = fenced && strings.TrimPrefix(t, "```") == "sh"
			continue
		}
		if !inSh {
			continue
		}
		if pending == "" {
			start = i + 1
		}
		if strings.HasSuffix(line, `\`) {
			pending += strings.TrimSuffix(line, `\`) + " "
			continue
		}
		for _, stage := range splitShell(pending + line) {
			out = append(out, shellCommand{File: file, Line: start, Args: stage})
		}
		pending = ""
	}
	return out
}

// splitShell splits a command line into the words of each command of its
// pipelines and lists (| and ;), dropping a comment and redirections.
// Quoted strings and $( … ) are one word, kept as written. It is a
// reader's shell, not a full one: enough for the docs, and the test fails
// on anything it does not know rather than guessing.
func splitShell(line string) [][]string {
	var (
		out   [][]string
		words []string
		word  strings.Builder
		depth int // inside $( … )
		quote byte
	)
	flushWord := func() {
		if word.Len() > 0 {
			words = append(words, word.String())
			word.Reset()
		}
	}
	flushCommand := func() {
		flushWord()
		if len(words) > 0 {
			out = append(out, words)
		}
		words = nil
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
			word.WriteByte(c)
		case c == '\'' || c == '"':
			quote = c
			word.WriteByte(c)
		case c == '$' && i+1 < len(line) && line[i+1] == '(':
			depth++
			word.WriteString("$(")
			i++
		case depth > 0:
			if c == ')' {
				depth--
			}
			word.WriteByte(c)
		case c == '#' && word.Len() == 0:
			flushCommand()
			return out
		case c == ' ' || c == '\t':
			flushWord()
		case c == ';':
			flushCommand()
		case c == '|' && word.Len() == 0:
			// " | " is a pipe; "stop|start" (no spaces) is the docs'
			// notation for alternatives, one word.
			flushCommand()
		case c == '>' && word.Len() == 0:
			// A redirection: its target is not an argument.
			flushWord()
			for i+1 < len(line) && line[i+1] == ' ' {
				i++
			}
			for i+1 < len(line) && line[i+1] != ' ' {
				i++
			}
		default:
			word.WriteByte(c)
		}
	}
	flushCommand()
	return out
}

// alternatives expands the docs' "stop|start|restart" words into one
// command per alternative.
func alternatives(args []string) [][]string {
	out := [][]string{nil}
	for _, a := range args {
		choices := []string{a}
		if strings.Contains(a, "|") && !strings.ContainsAny(a, `'"$`) {
			choices = strings.Split(a, "|")
		}
		var next [][]string
		for _, prefix := range out {
			for _, c := range choices {
				next = append(next, append(append([]string(nil), prefix...), c))
			}
		}
		out = next
	}
	return out
}

// docsCommands are the shell commands of the README and every page of
// docs/, with paths relative to the repository root.
func docsCommands(t *testing.T, root string) []shellCommand {
	t.Helper()
	files, err := docFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	var out []shellCommand
	for _, file := range files {
		b, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, shellCommands(file, string(b))...)
	}
	return out
}

func TestShellCommands(t *testing.T) {
	t.Parallel()
	text := "text\n```sh\nkubectl -n x create secret generic s \\\n  --from-literal=k=\"$(openssl rand -base64 64 | tr -d '\\n')\"\n" +
		"kubectl userland stop|start NAME   # two commands\n# a comment\n" +
		"a=1; b=$(printf %s \"$a\" | cut -c1-2)\nkubectl get x -o yaml > x.yaml\n```\n```yaml\nkubectl: not a command\n```\n"
	got := shellCommands("f.md", text)
	want := []shellCommand{
		{"f.md", 3, []string{"kubectl", "-n", "x", "create", "secret", "generic", "s", `--from-literal=k="$(openssl rand -base64 64 | tr -d '\n')"`}},
		{"f.md", 5, []string{"kubectl", "userland", "stop|start", "NAME"}},
		{"f.md", 7, []string{"a=1"}},
		{"f.md", 7, []string{`b=$(printf %s "$a" | cut -c1-2)`}},
		{"f.md", 8, []string{"kubectl", "get", "x", "-o", "yaml"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("shellCommands (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([][]string{{"k", "stop", "N"}, {"k", "start", "N"}}, alternatives([]string{"k", "stop|start", "N"})); diff != "" {
		t.Errorf("alternatives (-want +got):\n%s", diff)
	}
}
