package webhook_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestAdversaryPlaceholdersGrowWithTheTemplateSwapped: the webhook
// guards the number of placeholders, but each placeholder asks for what a
// course template's pod asks (podRequests), and the course manager
// chooses the templates. An administrator admits 2 placeholders for a
// course of a 100m template; the manager, who may not create pods, swaps
// in a namespace template that asks 32 CPUs: the controller would now
// hold 64 CPUs of cluster (an autoscaler buys the nodes) for whoever
// wrote the Course. The webhook must ask the same question it asks of a
// raised number whenever what the placeholders are sized from changes.
func TestAdversaryPlaceholdersGrowWithTheTemplateSwapped(t *testing.T) {
	t.Parallel()
	startWebhooks(t)
	loadRoles(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	small := compliant(ns, "small")
	small.Spec.PodTemplate.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	huge := compliant(ns, "huge")
	huge.Spec.PodTemplate.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32")}
	for _, o := range []client.Object{small, huge} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	const prof = "prof@uni.example"
	manager := clientAs(t, ns, prof, clusterRole("userland-course-manager"))
	waitAuthorized(t, manager, &v1alpha1.CourseList{}, client.InNamespace(ns))
	c := testobj.MakeCourse(ns, "db").Students("a@uni.example").Template("small", v1alpha1.ProvisionOnSignIn).Obj()
	c.Spec.Schedule = &v1alpha1.CourseSchedule{
		Sessions:     []v1alpha1.CourseSession{{Day: ptr.To(v1alpha1.Weekday("Monday")), Start: "09:00", End: "10:30", TimeZone: "Europe/Berlin"}},
		Placeholders: ptr.To[int32](2),
	}
	if err := env.Client.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	var crs v1alpha1.Course
	if err := manager.Get(ctx, client.ObjectKeyFromObject(c), &crs); err != nil {
		t.Fatal(err)
	}
	crs.Spec.Templates[0].Name = "huge"
	if err := manager.Update(ctx, &crs); err == nil {
		t.Errorf("HOLE: %s, who may not create pods, swapped the course's template for one asking 32 CPUs; "+
			"its 2 admitted placeholders now hold 64 CPUs instead of 200m", prof)
	}
	// Lowering to 0 needs nothing, and then the templates change freely.
	if err := manager.Get(ctx, client.ObjectKeyFromObject(c), &crs); err != nil {
		t.Fatal(err)
	}
	crs.Spec.Schedule.Placeholders = ptr.To[int32](0)
	if err := manager.Update(ctx, &crs); err != nil {
		t.Fatalf("lowering to 0: %v", err)
	}
	crs.Spec.Templates[0].Name = "huge"
	if err := manager.Update(ctx, &crs); err != nil {
		t.Errorf("swapping the template of a course holding no placeholders was refused: %v", err)
	}
}
