package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/devenv"
	"github.com/userland-dev/userland/internal/simcluster"
	"github.com/userland-dev/userland/internal/testenv"
	"github.com/userland-dev/userland/internal/testobj"
)

// realApp is an application's server process, started for one test and
// stopped at its end.
type realApp struct {
	addr string
	// dir is its HOME, holding its log; work (dir/work) is where it runs
	// and what it serves, so the log's writes are not the app's files.
	dir, work string
}

// startApp runs name with args (where "{port}" becomes a free port) in a
// fresh directory that is also its HOME, and waits until probe answers
// 200 on it.
func startApp(t *testing.T, name, probe string, env []string, args ...string) *realApp {
	t.Helper()
	port, err := simcluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	app := &realApp{addr: fmt.Sprintf("127.0.0.1:%d", port), dir: dir, work: filepath.Join(dir, "work")}
	if err := os.Mkdir(app.work, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, a := range args {
		args[i] = strings.ReplaceAll(a, "{port}", fmt.Sprint(port))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = app.work
	// Debian's programs and their Python, not whatever else is on PATH.
	cmd.Env = append([]string{"HOME=" + dir, "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}, env...)
	logFile, err := os.Create(filepath.Join(dir, "app.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group, killed whole: code-server's server is a
	// child of the process started here, and killing only the parent
	// left it running (and busy) after the test.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s (hack/ensure-apps.sh installs it): %v", name, err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		_ = logFile.Close()
		if left := groupAlive(cmd.Process.Pid, 10*time.Second); left {
			t.Errorf("%s left processes of its group %d running after it was killed", name, cmd.Process.Pid)
		}
		if t.Failed() {
			if log, err := os.ReadFile(logFile.Name()); err == nil {
				t.Logf("%s log:\n%.4000s", name, log)
			}
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + app.addr + probe)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return app
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logFile.Name())
			t.Fatalf("%s did not answer %s within a minute: %v\n%.4000s", name, probe, err, log)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// groupAlive kills what is left of process group pgid and says whether
// any of it still runs after wait.
func groupAlive(pgid int, wait time.Duration) bool {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			return false
		}
	}
	return true
}

// sampleIdle is a sample template's idle spec, so the tests measure the
// presets the project ships.
func sampleIdle(t *testing.T, file string) *v1alpha1.IdleSpec {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "samples", file))
	if err != nil {
		t.Fatal(err)
	}
	var tmpl v1alpha1.Template
	if err := yaml.Unmarshal(data, &tmpl); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if tmpl.Spec.Idle == nil {
		t.Fatalf("%s has no idle spec", file)
	}
	return tmpl.Spec.Idle
}

// appTemplate creates a template whose environments idle out after a
// minute (the shortest the API allows) under preset's activity rules.
func appTemplate(t *testing.T, name string, preset *v1alpha1.IdleSpec) {
	t.Helper()
	idle := preset.DeepCopy()
	idle.Timeout.Duration = time.Minute
	idle.WarnBefore = nil
	tmpl := testobj.MakeTemplate(devenv.DemoNamespace, name).Obj()
	tmpl.Spec.Idle = idle
	if err := stack.Client.Create(context.Background(), tmpl); err != nil {
		t.Fatalf("creating template %s: %v", name, err)
	}
}

// appEnvironment creates alice's environment from tmpl, served by app.
func appEnvironment(t *testing.T, name, tmpl string, app *realApp) {
	t.Helper()
	ul := testobj.MakeUserland(devenv.DemoNamespace, name, "alice", tmpl).Obj()
	if err := stack.Client.Create(context.Background(), ul); err != nil {
		t.Fatalf("creating %s: %v", name, err)
	}
	stack.DemoApps().Route(devenv.DemoNamespace, name, app.addr)
	waitReadyInCluster(t, name)
}

// userlandStatus reads an environment's status through the API server.
func userlandStatus(t *testing.T, name string) v1alpha1.UserlandStatus {
	t.Helper()
	var ul v1alpha1.Userland
	if err := stack.Client.Get(context.Background(), client.ObjectKey{Namespace: devenv.DemoNamespace, Name: name}, &ul); err != nil {
		t.Fatal(err)
	}
	return ul.Status
}

// actEvery has a person act every 20 s (act gets the act's number, from 2:
// the first is the caller's) until the returned stop is called, which
// reports how many acts there were. A failed act ends the acting.
func actEvery(t *testing.T, act func(n int) error) (stop func() int) {
	t.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	acts := 1
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Second):
			}
			acts++
			if err := act(acts); err != nil {
				t.Error(err)
				return
			}
		}
	})
	var once sync.Once
	stop = func() int {
		once.Do(func() { close(done); wg.Wait() })
		return acts
	}
	t.Cleanup(func() { stop() })
	return stop
}

// waitStoppedUnused waits up to 4 minutes for env, opened at start and
// then left alone, to be stopped, and logs when.
func waitStoppedUnused(t *testing.T, env, what string, start time.Time) v1alpha1.UserlandStatus {
	t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	for {
		st := userlandStatus(t, env)
		if st.Phase == v1alpha1.PhaseStopped {
			t.Logf("untouched %s: stopped %s after it was opened (timeout 1m; last use %v by %s)",
				what, time.Since(start).Round(time.Second), st.LastActivityTime, st.LastActivitySource)
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("an open, untouched %s was not stopped in 4 minutes with a 1-minute timeout (last use %v by %s)",
				what, st.LastActivityTime, st.LastActivitySource)
		}
		time.Sleep(time.Second)
	}
}

// stillInUse asserts that the environment a person kept using is still
// Ready with a WebSocket message as its last use, and returns its status.
func stillInUse(t *testing.T, name, who, short, action string, start time.Time) v1alpha1.UserlandStatus {
	t.Helper()
	st := userlandStatus(t, name)
	if st.Phase != v1alpha1.PhaseReady {
		t.Errorf("%s is %s (%s) after %s", who, st.Phase, st.StoppedReason, time.Since(start).Round(time.Second))
	}
	if st.LastActivitySource != v1alpha1.ActivityWebSocket {
		t.Errorf("%s's last use was %q, want WebSocket (%s)", short, st.LastActivitySource, action)
	}
	return st
}
