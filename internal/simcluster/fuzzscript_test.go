package simcluster

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFuzzScriptTellsATimeoutFromACrash: make test-faults fuzzes every
// target for a fixed time through hack/fuzz.sh. Go's engine sometimes ends
// such a run with "context deadline exceeded" though nothing crashed (CI
// failed on it once); a crash writes its input under testdata/fuzz. The
// script passes the first and fails the second. A stand-in `go` plays
// each ending.
func TestFuzzScriptTellsATimeoutFromACrash(t *testing.T) {
	t.Parallel()
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	script, err := os.ReadFile(filepath.Join(root, "hack", "fuzz.sh"))
	if err != nil {
		t.Fatal(err)
	}
	fakeGo := `#!/bin/bash
if [ "$ENDING" = timeout ]; then printf -- '--- FAIL: FuzzX (10.09s)\n    context deadline exceeded\nFAIL\n'; exit 1; fi
mkdir -p pkg/testdata/fuzz/FuzzX && echo input > pkg/testdata/fuzz/FuzzX/abc
printf -- '--- FAIL: FuzzX (10.09s)\n    --- FAIL: FuzzX (0.00s)\n        x_test.go:3: boom\n    Failing input written to testdata/fuzz/FuzzX/abc\n    context deadline exceeded\nFAIL\n'; exit 1
`
	run := func(ending string) (string, error) {
		t.Helper()
		dir := t.TempDir()
		for name, text := range map[string]string{
			"hack/fuzz.sh": string(script), "bin/go": fakeGo,
			"pkg/x_test.go": "package pkg\n\nfunc FuzzX(f *testing.F) {}\n",
		} {
			if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(filepath.Join(dir, "hack", "fuzz.sh"))
		cmd.Env = append(os.Environ(), "ENDING="+ending, "PATH="+filepath.Join(dir, "bin")+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		t.Logf("%s: %s", ending, out)
		return string(out), err
	}

	out, err := run("timeout")
	if err != nil || !strings.Contains(out, "no crasher written; not a failure") {
		t.Errorf("a timed-out run with no crasher: %v, want a pass that says why", err)
	}
	out, err = run("crash")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(out, "FuzzX FAILED") || !strings.Contains(out, "boom") {
		t.Errorf("a crash (with the same deadline line): %v, want a failure with the engine's report", err)
	}
}
