package simcluster

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTestSummaryRepeatsFailuresAtTheEnd: make test runs go test through
// hack/test-summary.sh. CI shows the tail of a long run, and a package's
// controller logs (namespaces being deleted, the API server stopping at
// the end) filled it, hiding which test failed. On failure the failed
// tests' own lines and the failed packages come last; the exit status is
// go test's.
func TestTestSummaryRepeatsFailuresAtTheEnd(t *testing.T) {
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	script := filepath.Join(root, "hack", "test-summary.sh")
	run := func(output string, code int) (string, error) {
		t.Helper()
		log := filepath.Join(t.TempDir(), "logs", "test.log")
		cmd := exec.Command(script, log, "sh", "-c", "printf '%s' \"$OUT\"; exit "+strconv.Itoa(code))
		cmd.Env = append(cmd.Environ(), "OUT="+output)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	const passed = "ok  \tgithub.com/x/a\t1.0s\n"
	out, err := run(passed, 0)
	if err != nil || out != passed {
		t.Errorf("a passing run printed %q (%v), want its output unchanged", out, err)
	}

	failed := passed +
		"--- FAIL: TestRename (2.00s)\n" +
		"    github_test.go:88: the owner opening their environment: 404\n" +
		"{\"level\":\"error\",\"msg\":\"Reconciler error\"}\n" +
		"--- PASS: TestOther (1.00s)\n" +
		"FAIL\n" +
		"FAIL\tgithub.com/x/gateway\t99.0s\n" +
		"{\"level\":\"error\",\"msg\":\"connection refused\"}\n"
	out, err = run(failed, 1)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("a failing run ended %v, want exit status 1", err)
	}
	if !strings.HasPrefix(out, failed) {
		t.Errorf("a failing run did not show its output as it came: %q", out)
	}
	_, summary, _ := strings.Cut(out[len(failed):], "the failures, from ")
	_, summary, _ = strings.Cut(summary, "\n")
	want := "--- FAIL: TestRename (2.00s)\n" +
		"    github_test.go:88: the owner opening their environment: 404\n" +
		"FAIL\tgithub.com/x/gateway\t99.0s\n"
	if diff := cmp.Diff(want, summary); diff != "" {
		t.Errorf("the summary at the end (-want +got):\n%s", diff)
	}
}
