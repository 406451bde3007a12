//go:build linux

package simcluster

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// tiedParentEnv turns the test binary into the parent of
// TestChildrenDieWithTheirParent.
const tiedParentEnv = "USERLAND_TIED_PARENT_DIR"

func init() {
	dir := os.Getenv(tiedParentEnv)
	if dir == "" {
		return
	}
	// The parent: start a child that knows nothing of parentwatch, as an
	// official release build does, report its pid and wait to be killed.
	// Goroutines and idle threads come and go meanwhile, which is what
	// would end a naively forked child too early.
	p, err := StartProcess(dir, "sleeper", "/bin/sleep", "600")
	if err != nil {
		os.Exit(3)
	}
	_, _ = os.Stdout.WriteString(strconv.Itoa(p.cmd.Process.Pid) + "\n")
	for {
		done := make(chan struct{})
		go func() { close(done) }()
		<-done
		time.Sleep(10 * time.Millisecond)
	}
}

// A test binary that panics or is killed must not leave a control plane
// running: the kernel kills the children of a parent killed with SIGKILL,
// whichever binary they run.
func TestChildrenDieWithTheirParent(t *testing.T) {
	parent := exec.Command(os.Args[0], "-test.run=^$")
	parent.Env = append(os.Environ(), tiedParentEnv+"="+t.TempDir(), ExitWithParentEnv+"=")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = parent.Process.Kill()
		t.Fatalf("the parent reported no child: %v", err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })
	// Long enough for the runtime to have retired idle threads.
	time.Sleep(2 * time.Second)
	if err := syscall.Kill(child, 0); err != nil {
		t.Fatalf("the child died while its parent lived: %v", err)
	}
	killed := time.Now()
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	err = wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 30*time.Second, true, func(_ context.Context) (bool, error) {
		return gone(child), nil
	})
	if err != nil {
		t.Fatalf("child %d outlived its parent, killed %s ago", child, time.Since(killed).Round(time.Millisecond))
	}
	t.Logf("child gone %s after its parent was killed", time.Since(killed).Round(time.Millisecond))
}

// gone reports whether pid no longer runs. A killed child of a dead parent
// is re-parented and reaped by init; a zombie counts as gone.
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	fields := strings.Fields(string(stat))
	return len(fields) > 2 && fields[2] == "Z"
}
