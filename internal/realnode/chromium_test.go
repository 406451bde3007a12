//go:build realnode

package realnode_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/userland-dev/userland/internal/testenv"
)

// startChromium starts headless Chromium for the browser test: every
// name under mainHost and baseDomain resolves to the ingress stand-in at
// ingressAddr (the wildcard DNS record an install points at its ingress),
// whose self-signed certificate it accepts. Tests open their own browser
// contexts (separate cookies) in the returned context. A missing Chromium
// fails the test: hack/ensure-chromium.sh installs Debian's.
func startChromium(t *testing.T, ingressAddr, mainHost, baseDomain string) context.Context {
	t.Helper()
	path, err := testenv.ChromiumPath()
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // root
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("ignore-certificate-errors", true),
		// MAP with a port sends https://host (port 443) to the stand-in's
		// port; the Host header stays host.
		chromedp.Flag("host-resolver-rules", "MAP "+mainHost+" "+ingressAddr+", MAP *."+baseDomain+" "+ingressAddr),
		chromedp.UserDataDir(filepath.Join(t.TempDir(), "chromium")),
		chromedp.WindowSize(1280, 900),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("starting Chromium (%s): %v", path, err)
	}
	return browser
}

// browserSession opens a fresh browser context (its own cookies) for one
// person, ending after limit.
func browserSession(t *testing.T, browser context.Context, limit time.Duration) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	ctx, timeout := context.WithTimeout(ctx, limit)
	t.Cleanup(func() { timeout(); cancel() })
	return ctx
}

// browse runs steps in the page, failing the test with what was being done
// and the page's text.
func browse(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v\npage text:\n%.1500s", what, err, pageText(ctx))
	}
}

// evalIn returns a JavaScript expression's value in the page.
func evalIn[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// pageText is the page's visible text, or "" when there is none to read.
func pageText(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("document.body ? document.body.innerText : ''"))
	return strings.TrimSpace(text)
}

// notAnsweringYet is the gateway's answer (502, plain text) to a request
// its environment's pod refused: the pod is Ready but its app does not
// listen yet.
const notAnsweringYet = "the environment is not answering yet; retry in a few seconds"

// pageUntil polls a JavaScript predicate while the page goes through
// redirects, reloads (a waking environment's progress page reloads
// itself) and loads, where a single in-page poll would be cut short.
//
// Gap: a page load that comes after the environment is Ready but before
// the gateway can reach its app (a template without a readiness probe;
// the samples have one now) gets the gateway's plain notAnsweringYet
// page, which does not reload itself as the progress page does. The
// person reloads, as it says; so does this, after 2 s, and logs that it
// did.
func pageUntil(t *testing.T, ctx context.Context, what, predicate string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](predicate)); err == nil && ok {
			return
		}
		if text := pageText(ctx); text == notAnsweringYet {
			time.Sleep(2 * time.Second)
			t.Logf("GAP: waiting for %s, the gateway answered the page load with %q (Ready before the gateway could reach its app); reloading, as the page says", what, text)
			_ = chromedp.Do(ctx, chromedp.Reload())
			continue
		}
		time.Sleep(200 * time.Millisecond)
	}
	url, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("location.href"))
	t.Fatalf("waiting %s for %s: not seen at %s; page text:\n%.1500s", timeout, what, url, pageText(ctx))
}
