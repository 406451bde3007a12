package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/testenv"
)

// codeServer is code-server's launcher, built once into the user cache by
// hack/ensure-code-server.sh (make test runs it).
func codeServer(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "ensure-code-server.sh")).Output()
	if err != nil {
		t.Fatalf("hack/ensure-code-server.sh: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	return filepath.Join(dir, "node_modules", ".bin", "code-server")
}

// startCodeServer runs code-server (VS Code in the browser) with no
// password of its own: the gateway's sign-in is in front.
func startCodeServer(t *testing.T, bin string) *realApp {
	t.Helper()
	node := filepath.Dir(mustLookPath(t, "node"))
	app := startApp(t, bin, "/healthz", []string{"PATH=" + node + ":/usr/bin:/bin"},
		"--auth=none", "--bind-addr=127.0.0.1:{port}", "--disable-telemetry", "--disable-update-check",
		"--disable-workspace-trust", "--disable-getting-started-override", ".")
	return app
}

func mustLookPath(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: %v", name, err)
	}
	return p
}

// openWorkbench opens VS Code in env and waits until the workbench is
// connected to its server.
func openWorkbench(t *testing.T, ctx context.Context, env string) {
	t.Helper()
	do(t, ctx, "opening VS Code in "+env, chromedp.Navigate(envURL(env, v1alpha1.RoutingSubdomain)))
	waitAcrossNavigations(t, ctx, "the workbench of "+env, `!!document.querySelector('.monaco-workbench .part.editor')`, 90*time.Second)
	// The extension host is connected once the status bar shows its items.
	time.Sleep(5 * time.Second)
}

// openAndType opens notes.txt from the explorer and types into it, as a
// person does; the edits reach the server's extension host over a
// WebSocket.
func openAndType(ctx context.Context, text string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return chromedp.Do(ctx,
		chromedp.Click(chromedp.Search(`//div[contains(@class,"explorer-folders-view")]//span[text()="notes.txt"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.editor-instance .view-lines`)),
		chromedp.Click(chromedp.CSS(`.editor-instance .view-lines`)),
		chromedp.KeyEvent(text))
}

// typeMore types into the focused editor.
func typeMore(ctx context.Context, text string) error {
	return chromedp.Do(ctx, chromedp.KeyEvent(text))
}

// TestVSCodeIdleMeansNobodyIsThere runs real code-server (VS Code 1.99)
// behind the gateway with the sample template's VS Code preset and a
// one-minute idle timeout: an open, untouched workbench (keepalives,
// acknowledgements and latency probes on its WebSockets) is stopped at
// the timeout; one where a person types every 20 seconds keeps running.
func TestVSCodeIdleMeansNobodyIsThere(t *testing.T) {
	bin := codeServer(t)
	appTemplate(t, "real-vscode", sampleIdle(t, "template-vscode.yaml"))
	untouched, busy := startCodeServer(t, bin), startCodeServer(t, bin)
	appEnvironment(t, "vs-untouched", "real-vscode", untouched)
	appEnvironment(t, "vs-busy", "real-vscode", busy)
	if err := os.WriteFile(filepath.Join(busy.work, "notes.txt"), []byte("notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	idleTab := sessionFor(t, 8*time.Minute)
	signIn(t, idleTab, "alice")
	busyTab, cancel := chromedp.NewContext(idleTab)
	defer cancel()
	start := time.Now()
	openWorkbench(t, idleTab, "vs-untouched")
	openWorkbench(t, busyTab, "vs-busy")
	if err := openAndType(busyTab, "hello"); err != nil {
		screenshot(t, busyTab, "failed-vscode-typing")
		t.Fatal(err)
	}
	t.Logf("both workbenches open after %s", time.Since(start).Round(100*time.Millisecond))

	stopTyping := actEvery(t, func(n int) error { return typeMore(busyTab, fmt.Sprintf(" line %d", n)) })
	waitStoppedUnused(t, "vs-untouched", "VS Code", start)
	time.Sleep(15 * time.Second)
	typed := stopTyping()
	st := stillInUse(t, "vs-busy", "the VS Code someone typed in every 20 s", "the busy VS Code", "typing", start)
	t.Logf("busy VS Code: typed %d times over %s, still %s; last use %v by %s",
		typed, time.Since(start).Round(time.Second), st.Phase, st.LastActivityTime, st.LastActivitySource)
}
