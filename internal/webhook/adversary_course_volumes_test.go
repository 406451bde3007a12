package webhook_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestAdversaryCourseManagerWritesAClaimTheyMayOnlyRead: a department's
// reference dataset is a claim the course manager may only get (read).
// Staff mount every shared volume read-write, and the manager lists
// themselves as staff: they now write (or wipe) a dataset RBAC let them
// read only. The webhook asks get, never a write permission (issue 32:
// "may they get/update that PVC?").
func TestAdversaryCourseManagerWritesAClaimTheyMayOnlyRead(t *testing.T) {
	t.Parallel()
	startWebhooks(t)
	loadRoles(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	if err := env.Client.Create(ctx, compliant(ns, "lab")); err != nil {
		t.Fatal(err)
	}
	dataset := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dataset"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if err := env.Client.Create(ctx, dataset); err != nil {
		t.Fatal(err)
	}
	const prof = "prof@uni.example"
	manager := clientAs(t, ns, prof, clusterRole("userland-course-manager"))
	if err := env.Client.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "read-dataset"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get"}, ResourceNames: []string{"dataset"}}},
	}); err != nil {
		t.Fatal(err)
	}
	clientAs(t, ns, prof, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "read-dataset"})
	crs := testobj.MakeCourse(ns, "ml").Students("a@uni.example").Staff(prof).Template("lab", v1alpha1.ProvisionOnSignIn).
		SharedVolume("data", "dataset", "/data").Obj()
	// The bindings count once the manager may get the claim (RBAC's own
	// informers); only then is a refusal the webhook's.
	waitAuthorized(t, manager, &v1alpha1.CourseList{}, client.InNamespace(ns))
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return manager.Get(ctx, client.ObjectKeyFromObject(dataset), &corev1.PersistentVolumeClaim{}) == nil, nil
	}); err != nil {
		t.Fatalf("the manager's read of the claim never counted: %v", err)
	}
	if err := manager.Create(ctx, crs); err == nil {
		t.Errorf("HOLE: %s, who may only get claim dataset, shared it with a course whose staff (%s) mount it read-write", prof, prof)
	}
}
