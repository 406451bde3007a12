package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// notebook is a one-cell notebook whose cell counts its runs.
const notebook = `{"cells": [{"cell_type": "code", "execution_count": null, "metadata": {}, "outputs": [],
  "source": ["n = globals().get('n', 0) + 1\n", "print('run', n)"]}],
 "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
 "nbformat": 4, "nbformat_minor": 5}`

// startJupyter runs Debian's Jupyter Notebook with no authentication of
// its own (the gateway's is in front) and a notebook to open.
func startJupyter(t *testing.T) *realApp {
	t.Helper()
	app := startApp(t, "jupyter-notebook", "/api/status", nil,
		"--allow-root", "--no-browser", "--ip=127.0.0.1", "--port={port}",
		"--NotebookApp.token=", "--NotebookApp.password=", "--NotebookApp.allow_remote_access=True",
		"--notebook-dir=.")
	if err := os.WriteFile(filepath.Join(app.work, "a.ipynb"), []byte(notebook), 0o644); err != nil {
		t.Fatal(err)
	}
	return app
}

// openNotebook opens a.ipynb in env and waits for its kernel.
func openNotebook(t *testing.T, ctx context.Context, env string) {
	t.Helper()
	do(t, ctx, "opening the notebook in "+env, chromedp.Navigate(envURL(env, v1alpha1.RoutingSubdomain)+"notebooks/a.ipynb"))
	waitFor(t, ctx, "the kernel of "+env, `!!(window.Jupyter && Jupyter.notebook && Jupyter.notebook.kernel && Jupyter.notebook.kernel.is_connected())`, time.Minute)
}

// runCell runs the first cell as a person does: click into it, press
// Shift+Enter, and wait for its output. It returns an error rather than
// failing, so a helper goroutine may call it.
func runCell(ctx context.Context, run int) error {
	want := fmt.Sprintf(`(document.querySelector('.cell .output_area pre') || {}).textContent === 'run %d\n'`, run)
	err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`.cell .CodeMirror`)),
		chromedp.KeyEvent("\r", chromedp.KeyModifiers(chromedp.ModifierShift)),
		chromedp.Poll[chromedp.Void](want, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second)))
	if err != nil {
		return fmt.Errorf("running the cell (run %d): %w", run, err)
	}
	return nil
}

// pingOnly opens a kernel's WebSocket as alice (with her cookie for the
// environment's host, copied from the browser) and sends nothing but
// WebSocket pings, every 5 s, until ctx ends: a connection that is open
// and alive, with nobody behind it.
func pingOnly(t *testing.T, tab context.Context, ctx context.Context, env, kernel string) <-chan int {
	t.Helper()
	base := envURL(env, v1alpha1.RoutingSubdomain)
	res, err := chromedp.Call(tab, network.GetCookies, network.GetCookiesParams{URLs: []string{base}})
	if err != nil {
		t.Fatal(err)
	}
	var header []string
	for _, c := range res.Cookies {
		header = append(header, c.Name+"="+c.Value)
	}
	origin := strings.TrimSuffix(base, "/")
	wsURL := "ws" + strings.TrimPrefix(base, "http") + "api/kernels/" + kernel + "/channels"
	// Environment hosts are under .localhost, which Chromium resolves to
	// loopback by itself and Go's resolver does not.
	_, port, _ := strings.Cut(strings.TrimPrefix(stack.URL, "http://"), ":")
	loopback := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, "127.0.0.1:"+port)
	}}}
	dialCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(dialCtx, wsURL, &websocket.DialOptions{HTTPClient: loopback, HTTPHeader: http.Header{
		"Cookie": {strings.Join(header, "; ")}, "Origin": {origin},
	}})
	if err != nil {
		t.Fatalf("opening the kernel's WebSocket through the gateway: %v", err)
	}
	pings := make(chan int, 1)
	go func() {
		defer func() { _ = conn.CloseNow() }()
		go func() {
			for {
				if _, _, err := conn.Read(ctx); err != nil {
					return
				}
			}
		}()
		n := 0
		for {
			if err := conn.Ping(ctx); err != nil {
				pings <- n
				return
			}
			n++
			select {
			case <-ctx.Done():
				pings <- n
				return
			case <-time.After(5 * time.Second):
			}
		}
	}()
	return pings
}

// TestJupyterIdleMeansNobodyIsThere runs real Jupyter Notebooks behind the
// gateway with the sample template's Jupyter preset and a one-minute idle
// timeout, all at once:
//   - an open notebook nobody touches (its kernel WebSocket open, the
//     server pinging and the browser answering) is stopped at the timeout;
//   - one whose kernel WebSocket stays open with only pings (a client
//     that keeps a connection alive and does nothing) is stopped too;
//   - one where a person runs a cell every 20 seconds keeps running.
//
// It takes real time (about two minutes): what an open tab does by itself
// is what is measured.
func TestJupyterIdleMeansNobodyIsThere(t *testing.T) {
	appTemplate(t, "real-jupyter", sampleIdle(t, "template-jupyterlab.yaml"))
	untouched, busy, pinged := startJupyter(t), startJupyter(t), startJupyter(t)
	appEnvironment(t, "nb-untouched", "real-jupyter", untouched)
	appEnvironment(t, "nb-busy", "real-jupyter", busy)
	appEnvironment(t, "nb-pings", "real-jupyter", pinged)

	idleTab := sessionFor(t, 8*time.Minute)
	signIn(t, idleTab, "alice")
	busyTab, cancel := chromedp.NewContext(idleTab) // same browser context: same cookies
	defer cancel()

	// The pinging client: a notebook page starts the kernel, then leaves;
	// only the client's WebSocket stays.
	pingTab, cancelPing := chromedp.NewContext(idleTab)
	defer cancelPing()
	openNotebook(t, pingTab, "nb-pings")
	kernel := eval[string](t, pingTab, `Jupyter.notebook.kernel.id`)
	pingCtx, stopPings := context.WithCancel(context.Background())
	defer stopPings()
	t.Logf("pinged notebook's kernel %s started; opening its WebSocket", kernel)
	pings := pingOnly(t, pingTab, pingCtx, "nb-pings", kernel)
	t.Log("kernel WebSocket open; pinging")
	// Closed, not navigated away: the notebook's beforeunload prompt would
	// hold a navigation.
	cancelPing()

	start := time.Now()
	openNotebook(t, idleTab, "nb-untouched")
	openNotebook(t, busyTab, "nb-busy")
	if err := runCell(busyTab, 1); err != nil {
		t.Fatal(err)
	}
	t.Logf("both notebooks open after %s", time.Since(start).Round(100*time.Millisecond))

	// The person at the busy tab runs the cell every 20 s until the other
	// environment has been stopped.
	stopRuns := actEvery(t, func(n int) error { return runCell(busyTab, n) })
	if st := waitStoppedUnused(t, "nb-untouched", "notebook", start); st.StoppedReason != v1alpha1.StoppedIdle {
		t.Errorf("the untouched notebook stopped for %q, want Idle", st.StoppedReason)
	}
	waitUntil(t, "the ping-only environment stopped", 2*time.Minute, func() bool {
		return userlandStatus(t, "nb-pings").Phase == v1alpha1.PhaseStopped
	})
	stopPings()
	st := userlandStatus(t, "nb-pings")
	if st.StoppedReason != v1alpha1.StoppedIdle {
		t.Errorf("the pinged notebook stopped for %q, want Idle", st.StoppedReason)
	}
	t.Logf("kernel WebSocket with only pings: stopped after %d pings, %s after the test's start (last use %v by %s)",
		<-pings, time.Since(start).Round(time.Second), st.LastActivityTime, st.LastActivitySource)
	// Past the stop, the busy one has outlived its timeout from the
	// opening by far; a little longer for good measure.
	time.Sleep(15 * time.Second)
	runs := stopRuns()
	st = stillInUse(t, "nb-busy", "the notebook whose cell ran every 20 s", "the busy notebook", "running a cell", start)
	t.Logf("busy notebook: %d cell runs over %s, still %s; last use %v by %s",
		runs, time.Since(start).Round(time.Second), st.Phase, st.LastActivityTime, st.LastActivitySource)
}
