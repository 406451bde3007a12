package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// startPhpMyAdmin runs Debian's MariaDB on a socket of its own, with a
// database user for alice, and Debian's phpMyAdmin under PHP's built-in
// server talking to it.
func startPhpMyAdmin(t *testing.T) *realApp {
	t.Helper()
	dir := t.TempDir()
	data, socket := filepath.Join(dir, "data"), filepath.Join(dir, "mysqld.sock")
	install := exec.Command("mariadb-install-db", "--no-defaults", "--datadir="+data,
		"--auth-root-authentication-method=normal", "--skip-test-db", "--user=root")
	install.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db (hack/ensure-apps.sh installs it): %v\n%s", err, out)
	}
	mariadb := exec.Command("mariadbd", "--no-defaults", "--datadir="+data, "--socket="+socket,
		"--skip-networking", "--user=root", "--pid-file="+filepath.Join(dir, "mariadb.pid"))
	mariadb.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	if err := mariadb.Start(); err != nil {
		t.Fatalf("starting mariadbd: %v", err)
	}
	t.Cleanup(func() { _ = mariadb.Process.Kill(); _ = mariadb.Wait() })
	setup := "CREATE USER 'alice'@'localhost' IDENTIFIED BY 'alice-db-pw'; GRANT ALL ON course.* TO 'alice'@'localhost'; CREATE DATABASE course;"
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := exec.Command("mariadb", "--no-defaults", "-S", socket, "-uroot", "-e", setup).CombinedOutput()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("MariaDB did not accept the setup within a minute: %v\n%s", err, out)
		}
		time.Sleep(300 * time.Millisecond)
	}
	// Debian's phpMyAdmin connects to "localhost", which mysqli takes to
	// mean its default socket.
	return startApp(t, "php", "/", nil, "-d", "mysqli.default_socket="+socket,
		"-S", "127.0.0.1:{port}", "-t", "/usr/share/phpmyadmin")
}

// TestPhpMyAdminQueriesCountAsUse signs in to a real phpMyAdmin through
// the gateway, leaves the page open for longer than the gateway's activity
// interval (an open page makes no requests by itself, so nothing is
// recorded), then runs a query as a person does: that is recorded.
func TestPhpMyAdminQueriesCountAsUse(t *testing.T) {
	appTemplate(t, "real-phpmyadmin", sampleIdle(t, "template-phpmyadmin.yaml"))
	appEnvironment(t, "pma", "real-phpmyadmin", startPhpMyAdmin(t))
	ctx := session(t)
	signIn(t, ctx, "alice")
	base := envURL("pma", v1alpha1.RoutingSubdomain)
	do(t, ctx, "signing in to phpMyAdmin",
		chromedp.Navigate(base),
		chromedp.WaitVisible(chromedp.CSS(`#input_username`)),
		chromedp.SendKeys(chromedp.CSS(`#input_username`), "alice"),
		chromedp.SendKeys(chromedp.CSS(`#input_password`), "alice-db-pw"),
		chromedp.Click(chromedp.CSS(`#input_go`)))
	waitAcrossNavigations(t, ctx, "phpMyAdmin's home", `!!document.body && document.body.innerText.includes("course")`, 30*time.Second)
	do(t, ctx, "opening the SQL tab", chromedp.Navigate(base+"index.php?route=/server/sql"))
	// phpMyAdmin may load the route again by script, which would cut a
	// single in-page poll short.
	waitAcrossNavigations(t, ctx, "the query editor", `!!document.querySelector("#queryfieldscontainer .CodeMirror")`, 30*time.Second)

	loaded := time.Now()

	// The gateway writes activity at most every 30 s (userland dev) and
	// flushes every 5 s; a use that came within an interval of a write is
	// written when the interval has passed. So every page load is written
	// by 35 s after the last of them: wait past that, then past another
	// interval.
	time.Sleep(time.Until(loaded.Add(37 * time.Second)))
	st := userlandStatus(t, "pma")
	if st.LastActivityTime == nil || loaded.Sub(st.LastActivityTime.Time) > 40*time.Second {
		t.Fatalf("the page loads were not recorded: lastActivityTime %v, page loaded at %v", st.LastActivityTime, loaded)
	}
	opened := st.LastActivityTime.Time
	time.Sleep(40 * time.Second)
	if st := userlandStatus(t, "pma"); !st.LastActivityTime.Time.Equal(opened) {
		t.Errorf("an open, untouched phpMyAdmin page was recorded as used at %v (opened %v)", st.LastActivityTime, opened)
	}

	queried := time.Now().Truncate(time.Second)
	// The SQL tab's editor, not the (hidden) console's at the bottom.
	step, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	do(t, step, "running a query",
		chromedp.Click(chromedp.CSS(`#queryfieldscontainer .CodeMirror`)),
		chromedp.KeyEvent("SELECT 6*7 AS answer"),
		chromedp.Click(chromedp.CSS(`#button_submit_query`)))
	waitAcrossNavigations(t, ctx, "the query's result", `!!document.body && document.body.innerText.includes("answer") && document.body.innerText.includes("42")`, 30*time.Second)
	waitUntil(t, "the query recorded as use", time.Minute, func() bool {
		st = userlandStatus(t, "pma")
		return st.LastActivityTime != nil && !st.LastActivityTime.Time.Before(queried)
	})
	if st.LastActivitySource != v1alpha1.ActivityRequest {
		t.Errorf("the query was recorded as %q, want Request", st.LastActivitySource)
	}
	t.Logf("phpMyAdmin: opened %v, idle 40 s with nothing recorded, query at %v recorded as %s at %v",
		opened.Format(time.TimeOnly), queried.Format(time.TimeOnly), st.LastActivitySource, st.LastActivityTime.Format(time.TimeOnly))
}

// waitUntil polls cond every second up to timeout.
func waitUntil(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not within %s", what, timeout)
		}
		time.Sleep(time.Second)
	}
}
