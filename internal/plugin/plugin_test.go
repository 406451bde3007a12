package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/naming"
	"github.com/userland-dev/userland/internal/testenv"
	"github.com/userland-dev/userland/internal/testobj"
)

var env *testenv.Environment

// TestMain runs a real API server: the plugin's reads and writes, field
// validation and dry runs are the server's.
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.Options{Mode: testenv.APIOnly}, &env))
}

// kubectl runs the plugin with args against the test cluster.
func kubectl(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(append([]string{"--kubeconfig", env.KubeconfigPath}, args...))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func mustCreate(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCreateUsesTheGatewaysNameAndListShowsIt(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	mustCreate(t, testobj.MakeTemplate(ns, "vscode").Obj())
	out, _, err := kubectl(t, "-n", ns, "create", "Taro.Yamada@uni.example.ac.jp", "--template", "vscode")
	if err != nil {
		t.Fatal(err)
	}
	name := "taro-yamada-vscode"
	if want := "userland.userland.dev/" + name + " created\n"; out != want {
		t.Errorf("create printed %q, want %q", out, want)
	}
	var ul v1alpha1.Userland
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &ul); err != nil {
		t.Fatalf("the created Userland: %v", err)
	}
	if ul.Spec.User != "Taro.Yamada@uni.example.ac.jp" || ul.Spec.TemplateRef.Name != "vscode" {
		t.Errorf("spec %+v", ul.Spec)
	}
	if _, _, err := kubectl(t, "-n", ns, "create", "Taro.Yamada@uni.example.ac.jp", "--template", "vscode"); err == nil || !strings.Contains(err.Error(), "already has an environment from Template vscode") {
		t.Errorf("creating twice: %v, want already has an environment", err)
	}

	out, _, err = kubectl(t, "-n", ns, "list")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(strings.Join(strings.Fields(lines[0]), " "), "NAME DISPLAY USER") || !strings.Contains(lines[1], "Taro.Yamada@uni.example.ac.jp") || !strings.Contains(lines[1], "vscode") {
		t.Errorf("list:\n%s", out)
	}
	out, _, err = kubectl(t, "-n", ns, "list", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list v1alpha1.UserlandList
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Items) != 1 || list.Items[0].Name != name {
		t.Errorf("list -o json: %v\n%s", err, out)
	}
	if out, _, err = kubectl(t, "-n", ns, "list", "-o", "wide"); err != nil || !strings.Contains(out, "UPDATE PENDING") {
		t.Errorf("list -o wide: %v\n%s", err, out)
	}
	if out, _, err = kubectl(t, "-A", "list"); err != nil || !strings.HasPrefix(out, "NAMESPACE") || !strings.Contains(out, ns) {
		t.Errorf("list -A: %v\n%s", err, out)
	}
	if _, _, err = kubectl(t, "-n", ns, "list", "-o", "xml"); err == nil {
		t.Error("list -o xml was accepted")
	}
}

// TestCreateNamesAreReadableAndStable creates environments whose readable
// names are taken or which exist under an earlier naming rule, against a
// real API server.
func TestCreateNamesAreReadableAndStable(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	mustCreate(t, testobj.MakeTemplate(ns, "lab").Obj(), testobj.MakeTemplate(ns, "vscode").Obj(),
		// alice@b.example's readable name, "alice-lab", is already
		// alice@a.example's.
		testobj.MakeUserland(ns, "alice-lab", "alice@a.example", "lab").Obj(),
		// bob's environment from vscode predates readable names.
		testobj.MakeUserland(ns, naming.NameFor("bob/Template/vscode"), "bob", "vscode").Obj())

	out, _, err := kubectl(t, "-n", ns, "create", "alice@b.example", "--template", "lab")
	if err != nil {
		t.Fatal(err)
	}
	hashed := naming.HashedName("alice@b.example", v1alpha1.TemplateReference{Kind: v1alpha1.TemplateKindTemplate, Name: "lab"})
	if want := "userland.userland.dev/" + hashed + " created\n"; out != want || !strings.HasPrefix(hashed, "alice-lab-") || len(hashed) != len("alice-lab-")+6 {
		t.Errorf("create printed %q, want %q (the readable name and a 6-digit hash)", out, want)
	}
	_, _, err = kubectl(t, "-n", ns, "create", "bob", "--template", "vscode")
	if err == nil || !strings.Contains(err.Error(), naming.NameFor("bob/Template/vscode")) {
		t.Errorf("creating bob's second vscode environment: %v, want the existing one named", err)
	}
	var list v1alpha1.UserlandList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ul := range list.Items {
		names = append(names, ul.Name)
	}
	if diff := cmp.Diff([]string{"alice-lab", hashed, naming.NameFor("bob/Template/vscode")}, names, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("Userlands (-want +got):\n%s", diff)
	}
}

// roster200 writes a 200-row roster with 3 duplicates and 4 bad rows.
func roster200(t *testing.T, ns string) (path string, good int) {
	var b strings.Builder
	b.WriteString("user,template,namespace\n")
	for i := range 193 {
		tmpl := "vscode"
		if i%3 == 0 {
			tmpl = "jupyterlab"
		}
		fmt.Fprintf(&b, "student%03d@uni.example.ac.jp,%s,\n", i, tmpl) // namespace from -n
	}
	b.WriteString("student000@uni.example.ac.jp,jupyterlab,\n") // duplicates of rows above
	b.WriteString("student001@uni.example.ac.jp,vscode," + ns + "\n")
	b.WriteString("student002@uni.example.ac.jp,vscode,\n")
	b.WriteString(",vscode,\n")                                       // no user
	b.WriteString("student900@uni.example.ac.jp,no-such-template,\n") // unknown template
	b.WriteString("student901@uni.example.ac.jp,vscode,Bad_Namespace\n")
	b.WriteString("student902@uni.example.ac.jp,vscode,x,extra\n") // too many columns
	path = filepath.Join(t.TempDir(), "roster.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, 193
}

func countUserlands(t *testing.T, ns string) int {
	t.Helper()
	var list v1alpha1.UserlandList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

func TestImportRoster(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	mustCreate(t, testobj.MakeTemplate(ns, "vscode").Obj(), testobj.MakeTemplate(ns, "jupyterlab").Obj())
	path, good := roster200(t, ns)

	t.Run("dry run stores nothing", func(t *testing.T) {
		out, _, err := kubectl(t, "-n", ns, "import", path, "--dry-run")
		if err == nil {
			t.Error("a roster with rejected rows succeeded")
		}
		if !strings.Contains(out, fmt.Sprintf("%d created, 3 already present, 4 rejected (server dry run", good)) {
			t.Errorf("dry-run summary:\n%s", tail(out))
		}
		if n := countUserlands(t, ns); n != 0 {
			t.Errorf("dry run created %d Userlands", n)
		}
	})
	t.Run("first import", func(t *testing.T) {
		out, _, err := kubectl(t, "-n", ns, "import", path)
		if err == nil {
			t.Error("a roster with rejected rows succeeded")
		}
		if !strings.Contains(out, fmt.Sprintf("%d created, 3 already present, 4 rejected\n", good)) {
			t.Errorf("summary:\n%s", tail(out))
		}
		for _, reason := range []string{
			"same user and template as line 2", "the user is empty",
			`template "no-such-template" not found`, `namespace "Bad_Namespace" is not a valid name`, "4 columns, want at most 3",
		} {
			if !strings.Contains(out, reason) {
				t.Errorf("the report does not say %q", reason)
			}
		}
		if n := countUserlands(t, ns); n != good {
			t.Errorf("%d Userlands, want %d", n, good)
		}
	})
	t.Run("re-running creates nothing new", func(t *testing.T) {
		out, _, _ := kubectl(t, "-n", ns, "import", path)
		if !strings.Contains(out, fmt.Sprintf("0 created, %d already present, 4 rejected\n", good+3)) {
			t.Errorf("summary:\n%s", tail(out))
		}
		if n := countUserlands(t, ns); n != good {
			t.Errorf("%d Userlands after re-running, want %d", n, good)
		}
	})
	t.Run("a clean roster succeeds", func(t *testing.T) {
		clean := filepath.Join(t.TempDir(), "clean.csv")
		if err := os.WriteFile(clean, []byte("newcomer@uni.example.ac.jp,vscode\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		out, _, err := kubectl(t, "-n", ns, "import", clean)
		if err != nil || !strings.Contains(out, "1 created, 0 already present, 0 rejected") {
			t.Errorf("clean import: %v\n%s", err, out)
		}
	})
}

func tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 12 {
		lines = lines[len(lines)-12:]
	}
	return strings.Join(lines, "\n")
}

func TestStartStopRestartPendingOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	mustCreate(t, testobj.MakeTemplate(ns, "vscode").Obj())
	ul := &v1alpha1.Userland{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice"},
		Spec:       v1alpha1.UserlandSpec{User: "alice", TemplateRef: v1alpha1.TemplateReference{Name: "vscode"}},
	}
	mustCreate(t, ul)
	get := func() *v1alpha1.Userland {
		var got v1alpha1.Userland
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ul), &got); err != nil {
			t.Fatal(err)
		}
		return &got
	}

	if out, _, err := kubectl(t, "-n", ns, "stop", "alice"); err != nil || out != "userland.userland.dev/alice stopped\n" {
		t.Fatalf("stop: %v %q", err, out)
	}
	if !get().Spec.Suspend {
		t.Error("stop did not suspend")
	}
	// The plugin acts as staff: its user's own Start cannot lift it, and
	// the wide listing says who suspended it.
	if got := get().Annotations[v1alpha1.AnnotationSuspendedBy]; got != v1alpha1.SuspendedByStaff {
		t.Errorf("suspended-by %q, want %q", got, v1alpha1.SuspendedByStaff)
	}
	if out, _, err := kubectl(t, "-n", ns, "list", "-o", "wide"); err != nil || !strings.Contains(out, " staff ") {
		t.Errorf("list -o wide does not say staff suspended it: %v\n%s", err, out)
	}
	before := time.Now().Add(-time.Second)
	if _, _, err := kubectl(t, "-n", ns, "start", "alice"); err != nil {
		t.Fatal(err)
	}
	got := get()
	at, err := time.Parse(time.RFC3339Nano, got.Annotations[v1alpha1.AnnotationRestartedAt])
	if got.Spec.Suspend || err != nil || at.Before(before) {
		t.Errorf("start of a suspended environment: suspend %v, restarted-at %q (%v)", got.Spec.Suspend, got.Annotations[v1alpha1.AnnotationRestartedAt], err)
	}
	if _, _, err := kubectl(t, "-n", ns, "restart", "alice"); err != nil {
		t.Fatal(err)
	}
	if again := get().Annotations[v1alpha1.AnnotationRestartedAt]; again == got.Annotations[v1alpha1.AnnotationRestartedAt] {
		t.Error("restart did not set a new restarted-at")
	}
	if _, _, err := kubectl(t, "-n", ns, "stop", "nobody"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("stopping a missing environment: %v", err)
	}

	// pending and open read the status, which the controller would write.
	st := get()
	st.Status.UpdatePending = true
	st.Status.URL = "https://userland.example.edu/u/" + ns + "/alice/"
	if err := env.Client.Status().Update(ctx, st); err != nil {
		t.Fatal(err)
	}
	out, _, err := kubectl(t, "-n", ns, "pending")
	if err != nil || !strings.Contains(out, "alice") {
		t.Errorf("pending: %v\n%s", err, out)
	}
	stamp := get().Annotations[v1alpha1.AnnotationRestartedAt]
	if out, _, err = kubectl(t, "-n", ns, "pending", "--apply"); err != nil || out != "userland.userland.dev/alice updated\n" {
		t.Errorf("pending --apply: %v %q", err, out)
	}
	if get().Annotations[v1alpha1.AnnotationRestartedAt] == stamp {
		t.Error("pending --apply did not restart onto the current template")
	}

	var opened []string
	// A browser, where one is available, gets the URL.
	o := &options{io: genericiooptions.IOStreams{Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}, now: time.Now,
		opener: func(u string) error { opened = append(opened, u); return nil }}
	o.flags = newFlags(env.KubeconfigPath, ns)
	open := o.openCommand()
	open.SetContext(ctx)
	if err := open.RunE(open, []string{"alice"}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{st.Status.URL}, opened); diff != "" {
		t.Errorf("opened (-want +got):\n%s", diff)
	}
	if out, _, err = kubectl(t, "-n", ns, "open", "alice"); err != nil || out != st.Status.URL+"\n" {
		t.Errorf("open printed %q (%v)", out, err)
	}
}

func newFlags(kubeconfig, namespace string) *genericclioptions.ConfigFlags {
	f := genericclioptions.NewConfigFlags(true)
	f.KubeConfig, f.Namespace = &kubeconfig, &namespace
	return f
}
