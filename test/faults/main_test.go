//go:build faults

// Package faults proves what Userland does when its parts fail: processes
// killed with SIGKILL, a leader lost mid-rollout. Every test runs the real
// `userland` binary against the full simulated cluster (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, kwok) and prints
// what it measured. They take minutes, so they run under `make test-faults`
// (the `faults` build tag), which CI runs after `make test`.
package faults

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/userland-dev/userland/internal/testenv"
)

var (
	env *testenv.Environment
	// userlandBin is bin/userland built from this checkout for the run.
	userlandBin string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "userland-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	userlandBin = filepath.Join(dir, "userland")
	build := exec.Command("go", "build", "-o", userlandBin, "./cmd/userland")
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building userland: %v\n%s", err, out)
		os.Exit(1)
	}
	code := testenv.Run(m, testenv.Options{Mode: testenv.Full}, &env)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
