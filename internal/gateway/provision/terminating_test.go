package provision

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/gateway/session"
)

// TestProvisionPassesOverOnlyNamespacesGoingWithTheirOffer: when every
// namespace refuses creates as being deleted, sign-in passes over the
// offers whose namespace goes with them (a namespace's Template, a
// course, even one built on a ClusterTemplate) and reports the one whose
// namespace does not: a ClusterTemplate's own offer, created in the
// operator's namespace. Which namespaces really refuse, and how, is
// checked against a real API server in internal/gateway.
func TestProvisionPassesOverOnlyNamespacesGoingWithTheirOffer(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	admitU := &v1alpha1.AutoProvisionSpec{Users: []string{"u"}}
	objs := []client.Object{
		&v1alpha1.Template{ObjectMeta: metav1.ObjectMeta{Namespace: "dying", Name: "own"}, Spec: v1alpha1.TemplateSpec{AutoProvision: admitU}},
		&v1alpha1.ClusterTemplate{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Spec: v1alpha1.ClusterTemplateSpec{TemplateSpec: v1alpha1.TemplateSpec{AutoProvision: admitU}}},
		&v1alpha1.Course{ObjectMeta: metav1.ObjectMeta{Namespace: "dying-course", Name: "db"}, Spec: v1alpha1.CourseSpec{
			Term:      v1alpha1.CourseTerm{Start: metav1.NewTime(now.Add(-time.Hour)), End: metav1.NewTime(now.Add(time.Hour))},
			Students:  v1alpha1.AutoProvisionSpec{Users: []string{"u"}},
			Templates: []v1alpha1.CourseTemplate{{Kind: v1alpha1.TemplateKindClusterTemplate, Name: "shared"}},
		}},
	}
	var tried []string
	c := fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).WithObjects(objs...).
		WithInterceptorFuncs(interceptor.Funcs{Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			tried = append(tried, obj.GetNamespace())
			err := apierrors.NewForbidden(schema.GroupResource{Group: "userland.dev", Resource: "userlands"}, obj.GetName(),
				errors.New("unable to create new content in namespace "+obj.GetNamespace()+" because it is being terminated"))
			err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Field: obj.GetNamespace()}}
			return err
		}}).Build()
	p := &Provisioner{Reader: c, Writer: c, ClusterTemplateNamespace: "operator", Now: func() time.Time { return now }}

	n, err := p.Provision(context.Background(), session.Identity{User: "u"})
	if diff := cmp.Diff([]string{"dying", "dying-course", "operator"}, slices.Sorted(slices.Values(tried))); diff != "" {
		t.Fatalf("namespaces tried (-want +got):\n%s", diff)
	}
	if n != 0 || err == nil || !strings.Contains(err.Error(), "namespace operator ") ||
		strings.Contains(err.Error(), "namespace dying ") || strings.Contains(err.Error(), "namespace dying-course ") {
		t.Errorf("Provision: %d created, %v; want only the operator namespace's refusal reported", n, err)
	}
}
