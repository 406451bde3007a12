//go:build realnode

package realnode_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"

	"github.com/userland-dev/userland/internal/realnode"
)

// typed is what the person types into VS Code, found again after the wake.
const typed = "typedInChromiumBeforeTheIdleStop"

// step is ctx with a limit for one step of a person's use.
func step(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

// untilInPod polls a command in the pod (up to 30 s) until its output
// holds want: what the browser did reached the app's files.
func untilInPod(ctx context.Context, t *testing.T, n *realnode.Node, pod *corev1.Pod, container, want string, command ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := tryExec(ctx, n, pod, container, command...)
		if err == nil && strings.Contains(out, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v in %s/%s: no %q after 30 s: %v %.500q", command, pod.Name, container, want, err, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// notesXPath is notes.txt in VS Code's explorer.
const notesXPath = `//div[contains(@class,"explorer-folders-view")]//span[text()="notes.txt"]`

// trustFolder answers VS Code's workspace trust dialog, when it is open,
// as the person does: they trust their own home folder. The sample does
// not turn workspace trust off, so VS Code asks once, a few seconds after
// the workbench loads (after the extension host connects), and the
// modal dialog then takes the keyboard's focus.
const trustFolder = `(() => {
	const trust = [...document.querySelectorAll('.monaco-dialog-box .monaco-button')]
		.find(b => /trust/i.test(b.textContent) && !/don.t/i.test(b.textContent));
	if (trust) { trust.click(); return true; }
	return false;
})()`

// shows is a predicate: an editor shows text and no dialog is open.
func shows(text string) string {
	return `!document.querySelector('.monaco-dialog-box') && [...document.querySelectorAll('.editor-instance .view-lines')].some(e => e.textContent.includes(` + jsQuote(text) + `))`
}

// vscodeApp is code-server: the workbench loads with the home folder in
// its explorer; the person opens notes.txt, types and saves (the edit
// reaches the server over its WebSocket and lands in the home claim);
// after the wake the file shows what was typed.
func vscodeApp() browserApp {
	return browserApp{
		name: "vscode", file: "template-vscode.yaml",
		prepare: func(ctx context.Context, t *testing.T, n *realnode.Node, pod *corev1.Pod) {
			execIn(ctx, t, n, pod, "code-server", "sh", "-ec", `printf 'notes\n' > /home/coder/notes.txt`)
		},
		open: func(t *testing.T, tab context.Context, _ string) {
			pageUntil(t, tab, "VS Code's workbench", `!!document.querySelector('.monaco-workbench .part.editor')`, 3*time.Minute)
			pageUntil(t, tab, "notes.txt in the explorer", `!!document.evaluate('`+notesXPath+`', document, null, XPathResult.FIRST_ORDERED_NODE_TYPE, null).singleNodeValue`, 2*time.Minute)
		},
		// The trust dialog can open at any moment of this, so each step
		// is checked and, after the dialog was answered, done again.
		use: func(ctx context.Context, t *testing.T, n *realnode.Node, tab context.Context, _ string, pod *corev1.Pod) {
			for attempt := 1; ; attempt++ {
				trusted := evalIn[bool](t, tab, trustFolder)
				sctx, cancel := step(tab, time.Minute)
				browse(t, sctx, "opening notes.txt and typing",
					chromedp.Click(chromedp.Search(notesXPath)),
					chromedp.WaitVisible(chromedp.CSS(`.editor-instance .view-lines`)),
					chromedp.Click(chromedp.CSS(`.editor-instance .view-lines`)),
					chromedp.KeyEvent(typed),
					chromedp.Sleep(time.Second))
				cancel()
				if evalIn[bool](t, tab, shows(typed)) {
					break
				}
				if attempt == 3 {
					t.Fatalf("vscode: typed %q three times, the editor does not show it; page text:\n%.1500s", typed, pageText(tab))
				}
				t.Logf("vscode: the typing did not reach the editor (trust dialog answered before: %v); again", trusted)
			}
			for attempt := 1; ; attempt++ {
				evalIn[bool](t, tab, trustFolder)
				sctx, cancel := step(tab, time.Minute)
				browse(t, sctx, "saving notes.txt",
					chromedp.Click(chromedp.CSS(`.editor-instance .view-lines`)),
					chromedp.KeyEvent("s", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
				cancel()
				out, err := "", error(nil)
				for wait := time.Now().Add(10 * time.Second); time.Now().Before(wait); time.Sleep(500 * time.Millisecond) {
					if out, err = tryExec(ctx, n, pod, "code-server", "cat", "/home/coder/notes.txt"); err == nil && strings.Contains(out, typed) {
						t.Logf("vscode: typed and saved; /home/coder/notes.txt in the pod holds %q", strings.TrimSpace(out))
						return
					}
				}
				if attempt == 3 {
					t.Fatalf("vscode: saved three times, /home/coder/notes.txt in %s does not hold %q: %v %.300q", pod.Name, typed, err, out)
				}
			}
		},
		answers: func(t *testing.T, tab context.Context, _ string, _ *corev1.Pod) {
			deadline := time.Now().Add(time.Minute)
			for {
				evalIn[bool](t, tab, trustFolder)
				sctx, cancel := step(tab, 30*time.Second)
				browse(t, sctx, "opening notes.txt after the wake",
					chromedp.Click(chromedp.Search(notesXPath)),
					chromedp.WaitVisible(chromedp.CSS(`.editor-instance .view-lines`)))
				cancel()
				if evalIn[bool](t, tab, shows(typed)) {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("vscode: after the wake notes.txt does not show %q; page text:\n%.1500s", typed, pageText(tab))
				}
				time.Sleep(time.Second)
			}
		},
	}
}

// notebookJSON is a one-cell notebook whose cell counts its runs in its
// kernel and names the pod the kernel runs in.
const notebookJSON = `{"cells": [{"cell_type": "code", "execution_count": null, "metadata": {}, "outputs": [],
  "source": ["import socket\n", "n = globals().get('n', 0) + 1\n", "print('run', n, 'on', socket.gethostname())"]}],
 "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
 "nbformat": 4, "nbformat_minor": 5}`

// jupyterApp is the Jupyter Notebook: the tree page lists the work folder
// (the claim); the person opens a notebook there, runs its cell (a kernel
// WebSocket message) and saves it; after the wake the notebook shows the
// saved output from the first pod, and running the cell again answers
// from a new kernel in the new pod.
func jupyterApp() browserApp {
	var first string // the pod the cell first ran in
	openNotebook := func(t *testing.T, tab context.Context, envURL string) {
		pageUntil(t, tab, "the tree page listing the work folder",
			`[...document.querySelectorAll('#notebook_list .item_name')].some(e => e.textContent.trim() === 'work')`, 3*time.Minute)
		browse(t, tab, "opening work/a.ipynb", chromedp.Navigate(envURL+"notebooks/work/a.ipynb"))
		pageUntil(t, tab, "the notebook's kernel connected",
			`!!(window.Jupyter && Jupyter.notebook && Jupyter.notebook.kernel && Jupyter.notebook.kernel.is_connected())`, 2*time.Minute)
	}
	runCell := func(t *testing.T, tab context.Context, want string) {
		sctx, cancel := step(tab, time.Minute)
		defer cancel()
		browse(t, sctx, "running the cell",
			chromedp.Click(chromedp.CSS(`.cell .CodeMirror`)),
			chromedp.KeyEvent("\r", chromedp.KeyModifiers(chromedp.ModifierShift)),
			chromedp.Poll[chromedp.Void](`(document.querySelector('.cell .output_area pre') || {}).textContent === `+jsQuote(want+"\n"),
				chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(45*time.Second)))
	}
	return browserApp{
		name: "jupyterlab", file: "template-jupyterlab.yaml",
		prepare: func(ctx context.Context, t *testing.T, n *realnode.Node, pod *corev1.Pod) {
			execIn(ctx, t, n, pod, "notebook", "sh", "-ec", `printf %s "$1" > /home/jovyan/work/a.ipynb`, "sh", notebookJSON)
		},
		open: openNotebook,
		use: func(ctx context.Context, t *testing.T, n *realnode.Node, tab context.Context, _ string, pod *corev1.Pod) {
			first = pod.Name
			runCell(t, tab, "run 1 on "+first)
			browse(t, tab, "saving the notebook", chromedp.KeyEvent("s", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
			untilInPod(ctx, t, n, pod, "notebook", "run 1 on "+first, "cat", "/home/jovyan/work/a.ipynb")
			t.Logf("jupyterlab: the cell ran in %s's kernel; the saved notebook holds its output", first)
		},
		answers: func(t *testing.T, tab context.Context, _ string, pod *corev1.Pod) {
			pageUntil(t, tab, "the saved output from before the idle stop",
				`(document.querySelector('.cell .output_area pre') || {}).textContent === `+jsQuote("run 1 on "+first+"\n"), 30*time.Second)
			runCell(t, tab, "run 1 on "+pod.Name)
		},
	}
}

// The query the person runs in phpMyAdmin and what it leaves: a table in
// the student database (on MariaDB's claim). It has no brackets or quotes
// for CodeMirror to close by itself.
const (
	pmaQuery  = "CREATE TABLE kept SELECT 4242*1001 AS answer"
	pmaAnswer = "4246242"
)

// phpMyAdminApp is phpMyAdmin with its MariaDB: the sign-in form loads;
// the person signs in as the sample's student user and runs a query that
// makes a table; after the wake they sign in again if asked and browse
// the table.
func phpMyAdminApp() browserApp {
	const signedIn = `!!document.querySelector('#pma_navigation') && !document.querySelector('#input_username')`
	browseTable := func(t *testing.T, tab context.Context, envURL string) {
		browse(t, tab, "browsing the table", chromedp.Navigate(envURL+"index.php?route=/sql&db=student&table=kept&pos=0"))
	}
	return browserApp{
		name: "phpmyadmin", file: "template-phpmyadmin.yaml",
		open: func(t *testing.T, tab context.Context, _ string) {
			pageUntil(t, tab, "phpMyAdmin's sign-in form", `!!document.querySelector('#input_username') || (`+signedIn+`)`, 3*time.Minute)
		},
		use: func(_ context.Context, t *testing.T, _ *realnode.Node, tab context.Context, envURL string, _ *corev1.Pod) {
			pmaSignIn(t, tab, signedIn)
			browse(t, tab, "opening the student database's SQL tab", chromedp.Navigate(envURL+"index.php?route=/database/sql&db=student"))
			pageUntil(t, tab, "the query editor", `!!document.querySelector('#queryfieldscontainer .CodeMirror')`, 30*time.Second)
			sctx, cancel := step(tab, time.Minute)
			defer cancel()
			browse(t, sctx, "running "+pmaQuery,
				chromedp.Click(chromedp.CSS(`#queryfieldscontainer .CodeMirror`)),
				chromedp.KeyEvent(pmaQuery),
				chromedp.Click(chromedp.CSS(`#button_submit_query`)))
			pageUntil(t, tab, "the query's success", `!!document.body && document.body.innerText.includes('kept') && !!document.querySelector('.alert-success, .success')`, 30*time.Second)
			browseTable(t, tab, envURL)
			pageUntil(t, tab, "the new table's row", `!!document.body && document.body.innerText.includes('`+pmaAnswer+`')`, 30*time.Second)
			t.Logf("phpmyadmin: signed in as student, ran %q, the table shows %s", pmaQuery, pmaAnswer)
		},
		answers: func(t *testing.T, tab context.Context, envURL string, _ *corev1.Pod) {
			// The new pod's phpMyAdmin may or may not keep the sign-in
			// (its cookie); it asks again if not.
			browseTable(t, tab, envURL)
			pageUntil(t, tab, "the sign-in form or the table", `!!document.querySelector('#input_username') || (!!document.body && document.body.innerText.includes('`+pmaAnswer+`'))`, time.Minute)
			if evalIn[bool](t, tab, `!!document.querySelector('#input_username')`) {
				pmaSignIn(t, tab, signedIn)
				browseTable(t, tab, envURL)
			}
			pageUntil(t, tab, "the table made before the idle stop", `!!document.body && document.body.innerText.includes('`+pmaAnswer+`')`, time.Minute)
		},
	}
}

// pmaSignIn signs in on phpMyAdmin's form as the sample's student user,
// again if the form comes back with an error (MariaDB's readiness probe
// is a TCP connect, so its first sign-ins can still be refused).
func pmaSignIn(t *testing.T, tab context.Context, signedIn string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for attempt := 1; ; attempt++ {
		pageUntil(t, tab, "phpMyAdmin's sign-in form", `!!document.querySelector('#input_username') || (`+signedIn+`)`, time.Minute)
		if evalIn[bool](t, tab, signedIn) {
			return
		}
		sctx, cancel := step(tab, 30*time.Second)
		browse(t, sctx, "signing in to phpMyAdmin",
			chromedp.SetValue(chromedp.CSS(`#input_username`), "student"),
			chromedp.SetValue(chromedp.CSS(`#input_password`), "student"),
			chromedp.Click(chromedp.CSS(`#input_go`)))
		cancel()
		ok := false
		for wait := time.Now().Add(20 * time.Second); time.Now().Before(wait); time.Sleep(200 * time.Millisecond) {
			if v, err := chromedp.Run(tab, chromedp.Evaluate[bool](signedIn)); err == nil && v {
				ok = true
				break
			}
		}
		if ok {
			if attempt > 1 {
				t.Logf("phpmyadmin: signed in at attempt %d", attempt)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("phpMyAdmin did not sign student in within 2 minutes (%d attempts); page text:\n%.1500s", attempt, pageText(tab))
		}
		time.Sleep(2 * time.Second)
	}
}

// jsQuote quotes s for JavaScript.
func jsQuote(s string) string {
	return fmt.Sprintf("%q", s)
}
