//go:build realnode

package realnode_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/controller"
	"github.com/userland-dev/userland/internal/realnode"
	"github.com/userland-dev/userland/internal/testenv"
	"github.com/userland-dev/userland/internal/testobj"
	"github.com/userland-dev/userland/internal/webhook"
)

// appImagesEnv names the manifest hack/build-app-images.sh prints: the
// local builds of the samples' images, and which public image each one
// stands in for.
const appImagesEnv = "USERLAND_APP_IMAGES"

// enforcedLevel is the Pod Security level the webhook enforces on
// templates by default (the controller's --pod-security-level).
const enforcedLevel = "baseline"

// appImages reads the manifest: the archives to import, and the image
// override map (public reference → local reference) that the test
// applies to the sample Templates after loading them. The samples
// themselves keep their public names.
func appImages(t *testing.T) (archives []string, overrides map[string]string) {
	t.Helper()
	path := os.Getenv(appImagesEnv)
	if path == "" {
		t.Fatalf("this machine can run a real node, but the test was not told where the apps' images are: set %s to the manifest hack/build-app-images.sh prints, or run make test-node", appImagesEnv)
	}
	archives, overrides, err := realnode.ReadAppImages(path)
	if err != nil {
		t.Fatal(err)
	}
	return archives, overrides
}

// overrideImages points every container of a loaded sample at its local
// build, and fails for an image no local build stands in for: no
// registry is reachable here.
func overrideImages(t *testing.T, spec *corev1.PodSpec, overrides map[string]string) {
	t.Helper()
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			local, ok := overrides[cs[i].Image]
			if !ok {
				t.Fatalf("no local build of %s (container %s); hack/build-app-images.sh builds %v", cs[i].Image, cs[i].Name, overrides)
			}
			cs[i].Image = local
		}
	}
}

// sampleTemplate loads a sample Template from config/samples.
func sampleTemplate(t *testing.T, file string) *v1alpha1.Template {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "samples", file))
	if err != nil {
		t.Fatal(err)
	}
	var tmpl v1alpha1.Template
	if err := yaml.UnmarshalStrict(data, &tmpl); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return &tmpl
}

// sampleApp is one sample and what the test checks of it.
type sampleApp struct {
	name, file string
	// container and dir: where a file is written in the claim, as the
	// container's user; empty dir: the check is a database row instead.
	container, dir string
	// uid the container runs as (its processes), checked by exec.
	uid string
	// path answered over HTTP on the app's port, and what the body holds.
	path, want string
}

// TestSampleAppsOnRealNode runs the sample Templates (VS Code, JupyterLab,
// phpMyAdmin + MariaDB), their images swapped for local builds of the
// same apps, as real pods on the real node through the real controller:
// each Template passes the Pod Security level the webhook enforces and
// its pods are admitted by the API server's Pod Security admission at
// that level; each pod becomes Ready; each app answers HTTP on its port
// from the host through the node's network; the claims, bound to static
// local PersistentVolumes the test makes, are writable by the apps'
// non-root users through fsGroup, and what was written there is still
// there after the pods are deleted and the controller's Deployments start
// new ones.
func TestSampleAppsOnRealNode(t *testing.T) {
	archives, overrides := appImages(t)
	n := startNode(t, archives...)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := n.Cluster.Client
	startController(t, n)

	const ns = "apps"
	// The API server's own Pod Security admission enforces the level on
	// every pod in the namespace, as a university's cluster would.
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": enforcedLevel,
	}}}); err != nil {
		t.Fatal(err)
	}
	ps, err := webhook.NewPodSecurity(enforcedLevel)
	if err != nil {
		t.Fatal(err)
	}

	apps := []sampleApp{
		{name: "vscode", file: "template-vscode.yaml", container: "code-server", dir: "/home/coder", uid: "1000", path: "/healthz", want: `"status"`},
		{name: "jupyterlab", file: "template-jupyterlab.yaml", container: "notebook", dir: "/home/jovyan/work", uid: "1000", path: "api", want: `"version"`},
		{name: "phpmyadmin", file: "template-phpmyadmin.yaml", container: "mariadb", uid: "", path: "/", want: "pma_username"},
	}
	created := map[string]time.Time{}
	for _, app := range apps {
		tmpl := sampleTemplate(t, app.file)
		if errs := ps.Validate(&tmpl.Spec.PodTemplate, field.NewPath("spec", "podTemplate")); len(errs) > 0 {
			t.Fatalf("the sample %s fails the %s level the webhook enforces: %v", app.file, enforcedLevel, errs.ToAggregate())
		}
		overrideImages(t, &tmpl.Spec.PodTemplate.Spec, overrides)
		tmpl.Namespace = ns
		if err := c.Create(ctx, tmpl); err != nil {
			t.Fatalf("creating the sample %s: %v", app.file, err)
		}
		ul := testobj.MakeUserland(ns, app.name, "student-"+app.name+"@uni.example.ac.jp", tmpl.Name).Obj()
		for _, v := range tmpl.Spec.Volumes {
			localVolume(ctx, t, n, controller.ClaimName(ul, v.Name), ns, v.Size)
		}
		if err := c.Create(ctx, ul); err != nil {
			t.Fatal(err)
		}
		created[app.name] = time.Now()
	}
	started := startAll(ctx, t, n, ns, apps, nil)

	pods := map[string]*corev1.Pod{}
	for _, app := range apps {
		st := started[app.name]
		pods[app.name] = st.pod
		t.Logf("TIMING %s: pod Ready %s and answering %s %s after its Userland was created (the pod's own record: created → Ready %s): %.100q",
			app.name, st.ready.Sub(created[app.name]).Round(10*time.Millisecond), app.path,
			st.answered.Sub(created[app.name]).Round(10*time.Millisecond), createdToReady(st.pod), st.body)
	}

	for _, app := range apps {
		p := pods[app.name]
		if app.dir != "" {
			out := execIn(ctx, t, n, p, app.container, "sh", "-ec",
				`id -u; echo "kept by `+app.name+`" > "$1/userland-kept.txt"; stat -c '%u:%g %a' "$1" "$1/userland-kept.txt"`, "sh", app.dir)
			t.Logf("%s wrote %s/userland-kept.txt: %s", app.name, app.dir, strings.Join(strings.Fields(out), " "))
			if first := strings.Fields(out); len(first) == 0 || first[0] != app.uid {
				t.Errorf("%s runs as uid %q, want %s", app.name, out, app.uid)
			}
		} else {
			sql(ctx, t, n, p, "CREATE TABLE kept (v VARCHAR(64)); INSERT INTO kept VALUES ('kept by phpmyadmin')")
			phpMyAdminSignIn(ctx, t, n, p)
		}
	}

	// The pods go; the controller's Deployments start new ones on the
	// same claims.
	restarted := map[string]time.Time{}
	for _, app := range apps {
		if err := c.Delete(ctx, pods[app.name]); err != nil {
			t.Fatal(err)
		}
		restarted[app.name] = time.Now()
	}
	started = startAll(ctx, t, n, ns, apps, pods)
	for _, app := range apps {
		st := started[app.name]
		p := st.pod
		t.Logf("TIMING %s: a new pod Ready %s and answering %s %s after the old one was deleted (the pod's own record: created → Ready %s)",
			app.name, st.ready.Sub(restarted[app.name]).Round(10*time.Millisecond), app.path,
			st.answered.Sub(restarted[app.name]).Round(10*time.Millisecond), createdToReady(p))
		if app.dir != "" {
			out := execIn(ctx, t, n, p, app.container, "cat", app.dir+"/userland-kept.txt")
			if strings.TrimSpace(out) != "kept by "+app.name {
				t.Errorf("%s: after the restart %s/userland-kept.txt holds %q", app.name, app.dir, out)
			} else {
				t.Logf("%s: %s/userland-kept.txt still there after the restart", app.name, app.dir)
			}
		} else {
			out := sql(ctx, t, n, p, "SELECT v FROM kept")
			if !strings.Contains(out, "kept by phpmyadmin") {
				t.Errorf("phpmyadmin: after the restart the row is gone: %q", out)
			} else {
				t.Logf("phpmyadmin: MariaDB's row still there after the restart")
			}
		}
	}
}

// localVolume makes a static local PersistentVolume on the real node,
// bound in advance to the claim the controller will make
// (Node.LocalVolume).
func localVolume(ctx context.Context, t *testing.T, n *realnode.Node, claim, ns string, size *resource.Quantity) {
	t.Helper()
	if err := n.LocalVolume(ctx, ns, claim, size); err != nil {
		t.Fatal(err)
	}
}

// appStart is when an app's pod became Ready and its app first answered.
type appStart struct {
	pod             *corev1.Pod
	ready, answered time.Time
	body            string
	err             error
}

// startAll waits, for every app at once, for a Ready pod (other than the
// one in old) and for its app to answer, so that each app's times are its
// own, not the time the test took to look at the others first.
func startAll(ctx context.Context, t *testing.T, n *realnode.Node, ns string, apps []sampleApp, old map[string]*corev1.Pod) map[string]appStart {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := map[string]appStart{}
	for _, app := range apps {
		var oldUID types.UID
		if p := old[app.name]; p != nil {
			oldUID = p.UID
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var st appStart
			st.pod, st.err = readyAppPod(ctx, n, ns, app.name, oldUID)
			if st.err == nil {
				st.ready = time.Now()
				st.body, st.err = answer(ctx, n, st.pod, app)
				st.answered = time.Now()
			}
			mu.Lock()
			out[app.name] = st
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, app := range apps {
		if err := out[app.name].err; err != nil {
			t.Fatalf("%s: %v", app.name, err)
		}
	}
	return out
}

// readyAppPod waits (up to 5 minutes) for a Ready pod of the Userland
// other than the pod old.
func readyAppPod(ctx context.Context, n *realnode.Node, ns, userland string, old types.UID) (*corev1.Pod, error) {
	deadline := time.Now().Add(5 * time.Minute)
	var last string
	for {
		if err := n.Alive(); err != nil {
			return nil, err
		}
		var pods corev1.PodList
		if err := n.Cluster.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelUserland: userland}); err != nil {
			return nil, err
		}
		last = fmt.Sprintf("%d pods", len(pods.Items))
		for i := range pods.Items {
			p := &pods.Items[i]
			last += fmt.Sprintf("; %s %s %v", p.Name, p.Status.Phase, p.Status.Conditions)
			for _, cs := range p.Status.ContainerStatuses {
				if w := cs.State.Waiting; w != nil {
					last += fmt.Sprintf(" %s waiting: %s %s", cs.Name, w.Reason, w.Message)
				}
				if tm := cs.LastTerminationState.Terminated; tm != nil {
					last += fmt.Sprintf(" %s exited %d: %s", cs.Name, tm.ExitCode, tm.Message)
				}
			}
			if podReady(p) && p.DeletionTimestamp == nil && p.UID != old {
				return p, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no Ready pod for %s in %s after 5 minutes: %s", userland, ns, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// createdToReady is the pod's own record, from its creation to its Ready
// condition (whole seconds, as the API server keeps them).
func createdToReady(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.LastTransitionTime.Sub(p.CreationTimestamp.Time).String()
		}
	}
	return "unknown"
}

// appPort is the port of the pod's first container that has one.
func appPort(p *corev1.Pod) int32 {
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			return port.ContainerPort
		}
	}
	return 0
}

// answer waits (up to 3 minutes) until the app in p answers app.path on
// its port with 200 and app.want in the body, asking from the host
// through the node's network namespace, and returns the body. A path
// without a leading slash is under the pod's base path (Jupyter keeps
// the gateway's prefix). Each sample has a readiness probe, so a Ready
// pod's app answers; this is the time a user waits.
func answer(ctx context.Context, n *realnode.Node, p *corev1.Pod, app sampleApp) (string, error) {
	path := app.path
	if !strings.HasPrefix(path, "/") {
		path = basePath(p) + path
	}
	u := "http://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(appPort(p)))) + path
	deadline := time.Now().Add(3 * time.Minute)
	for {
		got, err := func() (string, error) {
			body, err := getFromNode(ctx, n, u)
			if err != nil {
				return "", fmt.Errorf("%w, want 200 with %q: %.300q", err, app.want, body)
			}
			if !strings.Contains(body, app.want) {
				return "", fmt.Errorf("200 without %q: %.300q", app.want, body)
			}
			return body, nil
		}()
		if err == nil {
			return got, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("GET %s: still %w after 3 minutes", u, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// basePath is USERLAND_BASE_PATH as the controller set it in the pod.
func basePath(p *corev1.Pod) string {
	for _, c := range p.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == controller.EnvBasePath {
				return e.Value
			}
		}
	}
	return "/"
}

// execIn runs a command in a container of p through the API server and
// the kubelet, as kubectl exec does, and returns what it printed.
func execIn(ctx context.Context, t *testing.T, n *realnode.Node, p *corev1.Pod, container string, command ...string) string {
	t.Helper()
	out, err := tryExec(ctx, n, p, container, command...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func tryExec(ctx context.Context, n *realnode.Node, p *corev1.Pod, container string, command ...string) (string, error) {
	cs, err := kubernetes.NewForConfig(n.Cluster.Config)
	if err != nil {
		return "", err
	}
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(p.Namespace).Name(p.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: command, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	exec, err := remotecommand.NewWebSocketExecutor(n.Cluster.Config, http.MethodGet, req.URL().String())
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	ectx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := exec.StreamWithContext(ectx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}); err != nil {
		return "", fmt.Errorf("exec %v in %s/%s: %w: %s%s", command, p.Name, container, err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// sql runs statements in the student's database as the sample's
// database user, over TCP as phpMyAdmin does, waiting (up to 2 minutes)
// for MariaDB to accept them (its readiness probe is a TCP connect, and
// the first connections can still be refused while it settles).
func sql(ctx context.Context, t *testing.T, n *realnode.Node, p *corev1.Pod, statements string) string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, err := tryExec(ctx, n, p, "mariadb", "mariadb", "-h127.0.0.1", "-ustudent", "-pstudent", "student", "-e", statements)
		if err == nil {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("MariaDB: still %v after 2 minutes", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// phpMyAdminSignIn signs in to phpMyAdmin as the sample's student user
// through its login form, which proves phpMyAdmin reaches its MariaDB.
// The sample's PMA_ABSOLUTE_URI is the gateway's https address, so
// phpMyAdmin marks its cookies Secure and redirects there: the test keeps
// the cookies itself and follows no redirect.
func phpMyAdminSignIn(ctx context.Context, t *testing.T, n *realnode.Node, p *corev1.Pod) {
	t.Helper()
	hc := n.HTTPClient(30 * time.Second)
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	cookies := map[string]string{}
	base := "http://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(appPort(p)))) + "/"
	do := func(method, u string, form url.Values) (int, string) {
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, err := http.NewRequestWithContext(ctx, method, u, body)
		if err != nil {
			t.Fatal(err)
		}
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		for k, v := range cookies {
			req.AddCookie(&http.Cookie{Name: k, Value: v})
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("phpMyAdmin: %s %s: %v", method, u, err)
		}
		defer func() { _ = resp.Body.Close() }()
		for _, c := range resp.Cookies() {
			if c.MaxAge < 0 || c.Value == "deleted" {
				delete(cookies, c.Name)
			} else {
				cookies[c.Name] = c.Value
			}
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	_, login := do(http.MethodGet, base, nil)
	m := regexp.MustCompile(`name="token" value="([^"]+)"`).FindStringSubmatch(login)
	if m == nil {
		t.Fatalf("phpMyAdmin's login page has no token: %.300q", login)
	}
	form := url.Values{"pma_username": {"student"}, "pma_password": {"student"}, "server": {"1"}, "token": {m[1]}, "route": {"/"}}
	status, answer := do(http.MethodPost, base+"index.php?route=/", form)
	if !hasCookie(cookies, "pmaAuth-1") {
		t.Fatalf("phpMyAdmin: signing in as student set no pmaAuth-1 cookie (%d, cookies %v): %.300q", status, cookies, answer)
	}
	_, home := do(http.MethodGet, base+"index.php?route=/server/databases", nil)
	if !strings.Contains(home, "student") || strings.Contains(home, `name="pma_password"`) {
		t.Fatalf("phpMyAdmin: signed in as student, the databases page does not list the database: %.300q", home)
	}
	t.Logf("phpmyadmin: signed in as student through the login form; the databases page lists the student database")
}

// hasCookie says whether a cookie of that name is set, with or without
// the suffix phpMyAdmin adds to its cookies' names behind https
// ("pmaAuth-1_https").
func hasCookie(cookies map[string]string, name string) bool {
	for k := range cookies {
		if k == name || strings.HasPrefix(k, name+"_") {
			return true
		}
	}
	return false
}
