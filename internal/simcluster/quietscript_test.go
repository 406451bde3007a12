package simcluster

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestQuietScriptShowsProgressNotNoise: `make build` (and so the first
// screen of `make dev`) runs the toolchain through hack/quiet.sh. Its
// module chatter goes to a log and one line says what was done; when the
// command fails, the log is printed and its exit status kept.
func TestQuietScriptShowsProgressNotNoise(t *testing.T) {
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	script := filepath.Join(root, "hack", "quiet.sh")
	run := func(command string) (string, string, error) {
		t.Helper()
		log := filepath.Join(t.TempDir(), "logs", "build.log")
		cmd := exec.Command(script, "build: bin/thing", log, "sh", "-c", command)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		logged, _ := os.ReadFile(log)
		t.Logf("%q printed %q, logged %q", command, stdout.String()+stderr.String(), logged)
		return stdout.String() + stderr.String(), string(logged), err
	}
	const noise = "echo 'go: downloading k8s.io/api v0.37.1' >&2; echo 'go: downloading k8s.io/client-go v0.37.1' >&2"

	out, logged, err := run(noise)
	if err != nil {
		t.Fatalf("a command that succeeded: %v", err)
	}
	if strings.Contains(out, "go: downloading") || !strings.HasPrefix(out, "build: bin/thing: done in ") {
		t.Errorf("success printed %q, want only the progress line", out)
	}
	if !strings.Contains(logged, "go: downloading k8s.io/client-go") {
		t.Errorf("the log lost the command's output: %q", logged)
	}

	out, _, err = run(noise + "; echo 'main.go:3: undefined: x' >&2; exit 3")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("a command that failed with 3 ended %v, want exit status 3", err)
	}
	if !strings.Contains(out, "build: bin/thing failed after") || !strings.Contains(out, "main.go:3: undefined: x") || !strings.Contains(out, "go: downloading k8s.io/api") {
		t.Errorf("failure printed %q, want the failure line and the whole log", out)
	}
}
