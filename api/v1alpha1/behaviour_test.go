package v1alpha1_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/testenv"
	"github.com/userland-dev/userland/internal/testobj"
)

// samples reads every object in config/samples.
func samples(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "samples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(data), "\n---\n") {
			var m map[string]any
			if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(m) > 0 {
				objs = append(objs, &unstructured.Unstructured{Object: m})
			}
		}
	}
	if len(objs) < 8 {
		t.Fatalf("found %d sample objects, want the 4 templates and 4 Userlands", len(objs))
	}
	return objs
}

func TestSamplesAreAcceptedAndReadBackWithDefaults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	for _, obj := range samples(t) {
		if obj.GetKind() == "ClusterTemplate" {
			t.Cleanup(func() { _ = env.Client.Delete(ctx, obj) })
		} else {
			obj.SetNamespace(ns)
		}
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Errorf("sample %s %s rejected: %v", obj.GetKind(), obj.GetName(), err)
		}
	}

	var vscode v1alpha1.Template
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vscode"}, &vscode); err != nil {
		t.Fatalf("reading vscode: %v", err)
	}
	if diff := cmp.Diff(v1alpha1.HTTPSpec{Port: 8080, StripPrefix: ptr.To(true)}, vscode.Spec.HTTP); diff != "" {
		t.Errorf("vscode http defaults (-want +got):\n%s", diff)
	}
	wantVolume := v1alpha1.VolumeSpec{
		Name: "home", MountPath: "/home/coder", Size: ptr.To(resource.MustParse("5Gi")),
		AccessModes:   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		ReclaimPolicy: v1alpha1.ReclaimRetain,
	}
	if diff := cmp.Diff([]v1alpha1.VolumeSpec{wantVolume}, vscode.Spec.Volumes); diff != "" {
		t.Errorf("vscode volume defaults (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(v1alpha1.RolloutSpec{Policy: v1alpha1.RolloutWhenIdle, MaxUnavailable: ptr.To(intstr.FromString("25%"))}, vscode.Spec.Rollout); diff != "" {
		t.Errorf("vscode rollout defaults (-want +got):\n%s", diff)
	}

	var course v1alpha1.Course
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "databases-2026"}, &course); err != nil {
		t.Fatalf("reading the sample course: %v", err)
	}
	wantTemplates := []v1alpha1.CourseTemplate{
		{Kind: v1alpha1.TemplateKindTemplate, Name: "phpmyadmin", Provision: v1alpha1.ProvisionUpFront},
		{Kind: v1alpha1.TemplateKindTemplate, Name: "jupyterlab", Provision: v1alpha1.ProvisionOnSignIn},
	}
	if diff := cmp.Diff(wantTemplates, course.Spec.Templates); diff != "" {
		t.Errorf("course template defaults (-want +got):\n%s", diff)
	}

	var taro v1alpha1.Userland
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "taro-yamada"}, &taro); err != nil {
		t.Fatalf("reading taro-yamada: %v", err)
	}
	want := v1alpha1.UserlandSpec{User: "Taro.Yamada@uni.example.ac.jp", TemplateRef: v1alpha1.TemplateReference{Kind: v1alpha1.TemplateKindTemplate, Name: "vscode"}}
	if diff := cmp.Diff(want, taro.Spec); diff != "" {
		t.Errorf("taro-yamada spec (-want +got):\n%s", diff)
	}
}

func TestDefaultsAreFilledOnAMinimalTemplate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tmpl := testobj.MakeTemplate(env.Namespace(t), "minimal").Port(80).StripPrefix(false).Volume("home", "/home").Obj()
	if err := env.Client.Create(ctx, tmpl); err != nil {
		t.Fatalf("create: %v", err)
	}
	var got v1alpha1.Template
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tmpl), &got); err != nil {
		t.Fatal(err)
	}
	// stripPrefix: false must survive: a non-pointer bool would be dropped
	// by omitempty and defaulted back to true. Routing has no API default:
	// unset, the installation decides (environment hosts where it has an
	// environment domain).
	if diff := cmp.Diff(v1alpha1.HTTPSpec{Port: 80, StripPrefix: ptr.To(false)}, got.Spec.HTTP); diff != "" {
		t.Errorf("http (-want +got):\n%s", diff)
	}
	wantVolumes := []v1alpha1.VolumeSpec{{
		Name: "home", MountPath: "/home", Size: ptr.To(resource.MustParse("1Gi")),
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, ReclaimPolicy: v1alpha1.ReclaimRetain,
	}}
	if diff := cmp.Diff(wantVolumes, got.Spec.Volumes); diff != "" {
		t.Errorf("volumes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(v1alpha1.RolloutSpec{Policy: v1alpha1.RolloutWhenIdle, MaxUnavailable: ptr.To(intstr.FromString("25%"))}, got.Spec.Rollout); diff != "" {
		t.Errorf("rollout (-want +got):\n%s", diff)
	}
	if got.Spec.Idle != nil || got.Spec.AutoProvision != nil {
		t.Errorf("idle %v and autoProvision %v were defaulted; absent must stay absent", got.Spec.Idle, got.Spec.AutoProvision)
	}
}

func newUserland(ns string) *v1alpha1.Userland {
	return &v1alpha1.Userland{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taro"},
		Spec: v1alpha1.UserlandSpec{
			User:        "Taro.Yamada@uni.example.ac.jp",
			TemplateRef: v1alpha1.TemplateReference{Name: "vscode"},
		},
	}
}

func TestUserIsImmutable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ul := newUserland(env.Namespace(t))
	if err := env.Client.Create(ctx, ul); err != nil {
		t.Fatal(err)
	}
	changed := ul.DeepCopy()
	changed.Spec.User = "someone.else@uni.example.ac.jp"
	err := env.Client.Update(ctx, changed)
	if err == nil {
		t.Fatal("changing spec.user was accepted")
	}
	assertFieldError(t, err, "spec.user", "user is immutable")

	// Other spec fields stay mutable.
	changed = ul.DeepCopy()
	changed.Spec.Suspend = true
	if err := env.Client.Update(ctx, changed); err != nil {
		t.Fatalf("changing spec.suspend: %v", err)
	}
}

func TestSpecAndStatusAreSeparate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ul := newUserland(env.Namespace(t))
	if err := env.Client.Create(ctx, ul); err != nil {
		t.Fatal(err)
	}

	// A status update does not change spec.
	withStatus := ul.DeepCopy()
	withStatus.Status.Phase = v1alpha1.PhaseReady
	withStatus.Status.URL = "https://userland.example/u/x/taro/"
	withStatus.Spec.Suspend = true
	if err := env.Client.Status().Update(ctx, withStatus); err != nil {
		t.Fatalf("status update: %v", err)
	}
	var got v1alpha1.Userland
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ul), &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Suspend {
		t.Error("a status update changed spec.suspend")
	}
	if got.Status.Phase != v1alpha1.PhaseReady {
		t.Errorf("status.phase = %q after status update, want Ready", got.Status.Phase)
	}
	generation := got.Generation

	// A spec update does not change status, and bumps the generation.
	got.Spec.Suspend = true
	got.Status.Phase = v1alpha1.PhaseFailed
	if err := env.Client.Update(ctx, &got); err != nil {
		t.Fatalf("spec update: %v", err)
	}
	var after v1alpha1.Userland
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ul), &after); err != nil {
		t.Fatal(err)
	}
	if after.Status.Phase != v1alpha1.PhaseReady {
		t.Errorf("a spec update changed status.phase to %q", after.Status.Phase)
	}
	if !after.Spec.Suspend || after.Generation != generation+1 {
		t.Errorf("spec update: suspend=%v generation=%d, want true and %d", after.Spec.Suspend, after.Generation, generation+1)
	}

	// The status schema is enforced on the status subresource.
	bad := after.DeepCopy()
	bad.Status.Phase = "Sleeping"
	err := env.Client.Status().Update(ctx, bad)
	if err == nil {
		t.Fatal("status.phase Sleeping was accepted")
	}
	assertFieldError(t, err, "status.phase", "supported values")
}

// table fetches a list in the server-side Table form, as kubectl get does.
// It goes through client-go's REST client, as kubectl does, so that a 429
// with Retry-After ("storage is (re)initializing" while the API server's
// cache for a just-installed CRD warms up) is retried rather than failed.
func table(t *testing.T, path string) metav1.Table {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	body, err := cs.Discovery().RESTClient().Get().AbsPath(path).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").
		DoRaw(context.Background())
	if err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, body)
	}
	var tab metav1.Table
	if err := json.Unmarshal(body, &tab); err != nil {
		t.Fatalf("decoding table: %v", err)
	}
	return tab
}

func columns(tab metav1.Table) []string {
	var names []string
	for _, c := range tab.ColumnDefinitions {
		if c.Priority == 0 {
			names = append(names, c.Name)
		}
	}
	return names
}

func TestPrinterColumns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)

	ul := newUserland(ns)
	if err := env.Client.Create(ctx, ul); err != nil {
		t.Fatal(err)
	}
	ul.Status = v1alpha1.UserlandStatus{
		Phase: v1alpha1.PhaseReady, URL: "https://userland.example/u/" + ns + "/taro/", DisplayName: "VS Code",
		LastActivityTime: &metav1.Time{Time: time.Now().Add(-5 * time.Minute)},
	}
	if err := env.Client.Status().Update(ctx, ul); err != nil {
		t.Fatal(err)
	}
	tab := table(t, fmt.Sprintf("/apis/userland.dev/v1alpha1/namespaces/%s/userlands", ns))
	if diff := cmp.Diff([]string{"Name", "Display", "User", "Template", "Phase", "URL", "Last Used", "Age"}, columns(tab)); diff != "" {
		t.Errorf("Userland columns (-want +got):\n%s", diff)
	}
	if len(tab.Rows) != 1 {
		t.Fatalf("got %d rows, want 1", len(tab.Rows))
	}
	cells := tab.Rows[0].Cells
	if diff := cmp.Diff([]any{"taro", "VS Code", "Taro.Yamada@uni.example.ac.jp", "vscode", "Ready", "https://userland.example/u/" + ns + "/taro/", "5m"}, cells[:7]); diff != "" {
		t.Errorf("Userland row (-want +got):\n%s", diff)
	}

	obj := parse(t, validTemplate)
	obj.SetNamespace(ns)
	if err := env.Client.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	tab = table(t, fmt.Sprintf("/apis/userland.dev/v1alpha1/namespaces/%s/templates", ns))
	if diff := cmp.Diff([]string{"Name", "Routing", "Idle Timeout", "Rollout", "Users", "Ready", "Age"}, columns(tab)); diff != "" {
		t.Errorf("Template columns (-want +got):\n%s", diff)
	}
	// No controller runs here, so the counts from status are still empty;
	// routing is unset (the installation's default).
	if diff := cmp.Diff([]any{"t", nil, "30m", "Immediate", nil, nil}, tab.Rows[0].Cells[:6]); diff != "" {
		t.Errorf("Template row (-want +got):\n%s", diff)
	}

	tab = table(t, "/apis/userland.dev/v1alpha1/clustertemplates")
	if diff := cmp.Diff([]string{"Name", "Routing", "Idle Timeout", "Rollout", "Users", "Ready", "Age"}, columns(tab)); diff != "" {
		t.Errorf("ClusterTemplate columns (-want +got):\n%s", diff)
	}

	// A term's end is in the future, which kubectl's date type (an age)
	// shows as <invalid>: the column shows the time itself.
	start, end := time.Date(2026, 4, 6, 0, 0, 0, 0, time.UTC), time.Now().Add(90*24*time.Hour).UTC().Truncate(time.Second)
	crs := testobj.MakeCourse(ns, "db").Term(start, end).Template("t", v1alpha1.ProvisionOnSignIn).Obj()
	crs.Spec.DisplayName = "Databases"
	if err := env.Client.Create(ctx, crs); err != nil {
		t.Fatal(err)
	}
	tab = table(t, fmt.Sprintf("/apis/userland.dev/v1alpha1/namespaces/%s/courses", ns))
	if diff := cmp.Diff([]string{"Name", "Display", "Phase", "Enrolled", "Running", "Ready", "End"}, columns(tab)); diff != "" {
		t.Errorf("Course columns (-want +got):\n%s", diff)
	}
	if len(tab.Rows) != 1 {
		t.Fatalf("got %d course rows, want 1", len(tab.Rows))
	}
	cells = tab.Rows[0].Cells
	if got, want := cells[len(cells)-1], end.Format(time.RFC3339); got != want {
		t.Errorf("Course End cell = %v, want %q", got, want)
	}
	for i, c := range tab.ColumnDefinitions {
		if c.Name == "Start" && cells[i] != start.Format(time.RFC3339) {
			t.Errorf("Course Start cell = %v, want %q", cells[i], start.Format(time.RFC3339))
		}
	}
}

func TestDiscoveryShortNamesAndCategory(t *testing.T) {
	t.Parallel()
	httpClient, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := httpClient.Get(strings.TrimSuffix(env.Config.Host, "/") + "/apis/userland.dev/v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var list metav1.APIResourceList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	type res struct {
		Namespaced bool
		ShortNames []string
		Categories []string
		HasStatus  bool
	}
	got := map[string]res{}
	for _, r := range list.APIResources {
		if strings.HasSuffix(r.Name, "/status") {
			base := strings.TrimSuffix(r.Name, "/status")
			e := got[base]
			e.HasStatus = true
			got[base] = e
			continue
		}
		e := got[r.Name]
		e.Namespaced, e.ShortNames, e.Categories = r.Namespaced, r.ShortNames, r.Categories
		got[r.Name] = e
	}
	want := map[string]res{
		"userlands":        {Namespaced: true, ShortNames: []string{"ul"}, Categories: []string{"userland-all"}, HasStatus: true},
		"templates":        {Namespaced: true, ShortNames: []string{"tmpl"}, Categories: []string{"userland-all"}, HasStatus: true},
		"clustertemplates": {Namespaced: false, ShortNames: []string{"ctmpl"}, Categories: []string{"userland-all"}, HasStatus: true},
		"courses":          {Namespaced: true, ShortNames: []string{"crs"}, Categories: []string{"userland-all"}, HasStatus: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("discovery (-want +got):\n%s", diff)
	}
}
