//go:build faults

package faults

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/userland-dev/userland/internal/testenv"
)

// TestQuickStartFromACleanClone follows the quick start (README.md, docs/getting-started.md) exactly:
// `make dev` in a fresh clone (the control-plane cache present, as after
// any first run), then the dashboard at http://127.0.0.1:8000 and alice's
// sign-in with password "userland". It prints how long the dashboard took
// to answer; the bound is a generous ceiling, not a target.
func TestQuickStartFromACleanClone(t *testing.T) {
	const dashboard = "http://127.0.0.1:8000"
	if l, err := net.Listen("tcp", "127.0.0.1:8000"); err != nil {
		t.Fatalf("port 8000 is taken (another `make dev`?); the quick start needs it: %v", err)
	} else {
		_ = l.Close()
	}
	clone := filepath.Join(t.TempDir(), "userland")
	if out, err := exec.Command("git", "clone", "-q", testenv.RepoRoot(), clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	logPath := filepath.Join(t.TempDir(), "make-dev.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = log.Close() }()
	cmd := exec.Command("make", "dev")
	cmd.Dir = clone
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group, so Ctrl-C can be sent as a terminal would.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			if err := <-exited; err != nil {
				t.Logf("make dev, killed: %v", err)
			}
		}
		if t.Failed() {
			data, _ := os.ReadFile(logPath)
			t.Logf("make dev said:\n%s", data)
		}
	}()

	// Ready means what the quick start promises: alice signs in with
	// "userland" and sees her environments, VS Code among them.
	alice := browser()
	err = wait.PollUntilContextTimeout(context.Background(), time.Second, 15*time.Minute, true, func(context.Context) (bool, error) {
		select {
		case err := <-exited:
			stopped = true
			t.Fatalf("make dev exited before the dashboard answered: %v", err)
		default:
		}
		if resp, err := signInWith(alice, dashboard, "alice", "userland"); err != nil || resp.StatusCode != http.StatusSeeOther {
			return false, nil
		}
		code, body, err := fetch(alice, dashboard+"/")
		return err == nil && code == http.StatusOK && strings.Contains(body, "VS Code"), nil
	})
	if err != nil {
		t.Fatalf("alice's dashboard did not show her VS Code within 15 minutes of make dev")
	}
	t.Logf("make dev in a clean clone: alice's dashboard showed her environments %s after the command (bin/userland built, control plane from the cache)", time.Since(start).Round(time.Millisecond))

	// Ctrl-C stops everything, control plane included.
	stopAt := time.Now()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
	select {
	case err := <-exited:
		stopped = true
		t.Logf("Ctrl-C stopped make dev in %s (%v)", time.Since(stopAt).Round(time.Millisecond), err)
	case <-time.After(time.Minute):
		t.Fatal("make dev did not stop within a minute of Ctrl-C")
	}
	if l, err := net.Listen("tcp", "127.0.0.1:8000"); err != nil {
		t.Errorf("port 8000 still taken after Ctrl-C: %v", err)
	} else {
		_ = l.Close()
	}
}

// signInWith signs user in with password.
func signInWith(c *http.Client, base, user, password string) (*http.Response, error) {
	resp, err := c.PostForm(base+"/login", url.Values{"username": {user}, "password": {password}, "rd": {"/"}})
	if err != nil {
		return nil, err
	}
	_ = resp.Body.Close()
	return resp, nil
}
