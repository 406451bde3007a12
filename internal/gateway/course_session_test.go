package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestCoursePageShowsTheNextSession: staff see the timetable's next
// session on the course page, in the words the plugin uses
// (describe.Session), once the controller has worked it out.
func TestCoursePageShowsTheNextSession(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	ctx := context.Background()
	lab := testobj.MakeTemplate(f.ns, "lab").Container("web").Idle(5 * time.Minute).Obj()
	crs := testobj.MakeCourse(f.ns, "db").Students("alice").Staff("bob").Template("lab", v1alpha1.ProvisionOnSignIn).Obj()
	date := time.Now().UTC().Add(72 * time.Hour).Format(time.DateOnly)
	crs.Spec.Schedule = &v1alpha1.CourseSchedule{Sessions: []v1alpha1.CourseSession{{Date: ptr.To(date), Start: "09:00", End: "10:30", TimeZone: "UTC"}}}
	for _, o := range []client.Object{lab, crs} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	env.Eventually(t, time.Minute, "the course's next session in its status", func(ctx context.Context) (bool, error) {
		var c v1alpha1.Course
		err := f.server.Reader.Get(ctx, client.ObjectKeyFromObject(crs), &c)
		return err == nil && c.Status.NextSession != nil, nil
	})
	bob := browser(t)
	signIn(t, bob, f.gateway.URL, "bob", "bob-pw")
	_, body := get(t, bob, fmt.Sprintf("%s/dashboard/course?namespace=%s&name=db", f.gateway.URL, f.ns), nil)
	start, _ := time.Parse(time.DateOnly+" 15:04", date+" 09:00")
	want := start.Format("Mon 2 Jan 15:04") + "–10:30 UTC, in "
	if !strings.Contains(body, `id="course-session"`) || !strings.Contains(body, want) || !strings.Contains(body, ": 0 warm") {
		t.Errorf("the course page does not show the next session %q:\n%s", want, body)
	}
}
