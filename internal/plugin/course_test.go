package plugin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/testobj"
)

func TestCourseImportListAndStatus(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	mustCreate(t, testobj.MakeTemplate(ns, "lab").Obj(),
		testobj.MakeCourse(ns, "db").Students("a@uni.example").Template("lab", v1alpha1.ProvisionUpFront).MaxRunning(30).Obj())
	ul := testobj.MakeUserland(ns, "a-lab", "a@uni.example", "lab").Obj()
	ul.Labels = map[string]string{v1alpha1.LabelCourse: "db"}
	ul.Annotations = map[string]string{v1alpha1.AnnotationEnrolledBy: "student-user"}
	mustCreate(t, ul)

	file := filepath.Join(t.TempDir(), "roster.csv")
	csv := "user,role\na@uni.example\nb@uni.example,student\nta@uni.example,staff\nx@uni.example,auditor\n"
	if err := os.WriteFile(file, []byte(csv), 0o600); err != nil {
		t.Fatal(err)
	}
	roster := func() ([]string, []string) {
		var c v1alpha1.Course
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, &c); err != nil {
			t.Fatal(err)
		}
		return c.Spec.Students.Users, c.Spec.Staff.Users
	}

	out, _, err := kubectl(t, "-n", ns, "course", "import", "db", file, "--dry-run")
	if !errors.Is(err, errRejected) {
		t.Fatalf("import with a bad row: %v, want rejected", err)
	}
	if !strings.Contains(out, "2 added, 1 already present, 1 rejected (server dry run") {
		t.Errorf("dry run printed:\n%s", out)
	}
	if students, staff := roster(); len(students) != 1 || len(staff) != 0 {
		t.Fatalf("a dry run changed the roster: %v %v", students, staff)
	}

	out, _, err = kubectl(t, "-n", ns, "course", "import", "db", file)
	if !errors.Is(err, errRejected) {
		t.Fatalf("import: %v, want rejected for the auditor", err)
	}
	if !strings.Contains(out, `role "auditor": want student or staff`) {
		t.Errorf("the bad row's reason is missing:\n%s", out)
	}
	students, staff := roster()
	if diff := cmp.Diff([]string{"a@uni.example", "b@uni.example"}, students); diff != "" {
		t.Errorf("students (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"ta@uni.example"}, staff); diff != "" {
		t.Errorf("staff (-want +got):\n%s", diff)
	}
	// Again: nothing new.
	out, _, _ = kubectl(t, "-n", ns, "course", "import", "db", file)
	if !strings.Contains(out, "0 added, 3 already present, 1 rejected") {
		t.Errorf("a second import printed:\n%s", out)
	}

	out, _, err = kubectl(t, "-n", ns, "course", "list")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "NAME") || !strings.HasPrefix(lines[1], "db ") || !strings.Contains(lines[1], "InTerm") {
		t.Errorf("course list:\n%s", out)
	}

	// The controller's word on the timetable, as the status would hold it.
	var crs v1alpha1.Course
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, &crs); err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(5 * time.Minute)
	crs.Status.NextSession = &v1alpha1.CourseSessionStatus{Start: metav1.NewTime(start), End: metav1.NewTime(start.Add(time.Hour)), Warm: 4,
		Images: &v1alpha1.CourseImagesStatus{Ready: 1, Desired: 2}}
	if err := env.Client.Status().Update(ctx, &crs); err != nil {
		t.Fatal(err)
	}
	out, _, err = kubectl(t, "-n", ns, "course", "status", "db")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Limit:    30 running at once", "a@uni.example   student   a-lab", "b@uni.example   student   <none>",
		"Session:  " + start.UTC().Format("Mon 2 Jan 15:04"), ": 4 warm, images on 1 of 2 nodes"} {
		if !strings.Contains(out, want) {
			t.Errorf("course status lacks %q:\n%s", want, out)
		}
	}
	if _, _, err := kubectl(t, "-n", ns, "course", "status", "nope"); err == nil || !strings.Contains(err.Error(), `course "nope" not found`) {
		t.Errorf("status of a missing course: %v", err)
	}
}
