package describe_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/describe"
)

func TestSession(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	course := func(next *v1alpha1.CourseSessionStatus) *v1alpha1.Course {
		return &v1alpha1.Course{Status: v1alpha1.CourseStatus{NextSession: next}}
	}
	session := func(warm int32, images *v1alpha1.CourseImagesStatus) *v1alpha1.CourseSessionStatus {
		return &v1alpha1.CourseSessionStatus{Start: metav1.NewTime(start), End: metav1.NewTime(start.Add(90 * time.Minute)), Warm: warm, Images: images}
	}
	for name, tc := range map[string]struct {
		c    *v1alpha1.Course
		now  time.Time
		want string
	}{
		"no session left":  {course(nil), start, ""},
		"days ahead":       {course(session(0, nil)), start.Add(-75 * time.Hour), "Mon 30 Nov 08:00–09:30 UTC, in 3 days: 0 warm"},
		"hours ahead":      {course(session(0, nil)), start.Add(-130 * time.Minute), "Mon 30 Nov 08:00–09:30 UTC, in 2h10m: 0 warm"},
		"in the warm-up":   {course(session(12, &v1alpha1.CourseImagesStatus{Ready: 2, Desired: 3})), start.Add(-5 * time.Minute), "Mon 30 Nov 08:00–09:30 UTC, in 5m: 12 warm, images on 2 of 3 nodes"},
		"under way":        {course(session(30, &v1alpha1.CourseImagesStatus{Ready: 3, Desired: 3})), start.Add(time.Minute), "Mon 30 Nov 08:00–09:30 UTC, now: 30 warm, images on 3 of 3 nodes"},
		"ended, not moved": {course(session(0, nil)), start.Add(2 * time.Hour), "Mon 30 Nov 08:00–09:30 UTC, ended: 0 warm"},
	} {
		if diff := cmp.Diff(tc.want, describe.Session(tc.c, tc.now)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}
