package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/testobj"
)

// kstatus reads Reconciling and Stalled: True while they apply, absent
// otherwise.
func kstatus(conditions []metav1.Condition) string {
	var reconciling, stalled string
	for _, c := range conditions {
		if c.Type != v1alpha1.ConditionReconciling && c.Type != v1alpha1.ConditionStalled {
			continue
		}
		if c.Status != metav1.ConditionTrue {
			return fmt.Sprintf("%s=%s, which kstatus's conditions never are", c.Type, c.Status)
		}
		if c.Type == v1alpha1.ConditionReconciling {
			reconciling = c.Reason
		} else {
			stalled = c.Reason
		}
	}
	switch {
	case reconciling != "" && stalled != "":
		return "both Reconciling and Stalled"
	case reconciling != "":
		return "Reconciling: " + reconciling
	case stalled != "":
		return "Stalled: " + stalled
	}
	return "settled"
}

func TestUserlandKstatusConditions(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ns := env.Namespace(t)
	create(t, userland(ns, "u", "alice", "later"))
	env.Eventually(t, 30*time.Second, "in progress while the template is awaited", func(ctx context.Context) (bool, error) {
		ul, err := get(t, ctx, ns, "u")
		return err == nil && ul.Status.Phase == v1alpha1.PhasePending && kstatus(ul.Status.Conditions) == "Reconciling: "+v1alpha1.ReasonProgressing, err
	})
	create(t, template(ns, "later", "example.org/app:1"))
	if ul := env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady); kstatus(ul.Status.Conditions) != "settled" {
		t.Errorf("a serving Userland reads %s, want settled", kstatus(ul.Status.Conditions))
	}

	// Another party's Service in the way: only a person can clear it.
	create(t, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}, userland(ns, "taken", "bob", "later"))
	ul := env.WaitPhase(t, ns, "taken", v1alpha1.PhaseFailed)
	if got := kstatus(ul.Status.Conditions); got != "Stalled: "+v1alpha1.ReasonNameConflict {
		t.Errorf("a Userland whose Service name is taken reads %s, want Stalled: NameConflict", got)
	}
}

func TestCourseKstatusConditions(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	sharedController(t)
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "material"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	create(t, template(ns, "lab", "example.org/lab:1"), claim,
		testobj.MakeCourse(ns, "os").Students("s@uni.example").Template("lab", v1alpha1.ProvisionUpFront).SharedVolume("material", "material", "/course").Obj())
	waitCourse(t, ns, "os", "stalled on a claim of one node", func(c *v1alpha1.Course) bool {
		return kstatus(c.Status.Conditions) == "Stalled: "+v1alpha1.ReasonClaimNotShareable
	})
	create(t, testobj.MakeCourse(ns, "plain").Students("s@uni.example").Template("lab", v1alpha1.ProvisionUpFront).Obj())
	waitCourse(t, ns, "plain", "settled", func(c *v1alpha1.Course) bool {
		ready := courseCondition(c, v1alpha1.ConditionReady)
		return ready != nil && ready.Status == metav1.ConditionTrue && kstatus(c.Status.Conditions) == "settled"
	})
}
