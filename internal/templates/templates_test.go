package templates_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/templates"
)

// TestFindByName: a bare name (a roster row's) is the namespace's
// Template first, else the ClusterTemplate; neither is NotFound. The
// lookup rule is pure, so a fake reader serves it.
func TestFindByName(t *testing.T) {
	t.Parallel()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&v1alpha1.Template{ObjectMeta: metav1.ObjectMeta{Namespace: "cs", Name: "vscode"}},
		&v1alpha1.ClusterTemplate{ObjectMeta: metav1.ObjectMeta{Name: "vscode"}},
		&v1alpha1.ClusterTemplate{ObjectMeta: metav1.ObjectMeta{Name: "lab"}},
	).Build()
	type found struct {
		Kind     v1alpha1.TemplateKind
		Key      string
		NotFound bool
	}
	tests := []struct {
		ns, name string
		want     found
	}{
		{"cs", "vscode", found{Kind: v1alpha1.TemplateKindTemplate, Key: "Template/cs/vscode"}},
		{"math", "vscode", found{Kind: v1alpha1.TemplateKindClusterTemplate, Key: "ClusterTemplate/vscode"}},
		{"cs", "lab", found{Kind: v1alpha1.TemplateKindClusterTemplate, Key: "ClusterTemplate/lab"}},
		{"cs", "nope", found{NotFound: true}},
	}
	for _, tt := range tests {
		t.Run(tt.ns+"/"+tt.name, func(t *testing.T) {
			r, err := templates.FindByName(context.Background(), reader, tt.ns, tt.name)
			var got found
			switch {
			case apierrors.IsNotFound(err):
				got.NotFound = true
			case err != nil:
				t.Fatal(err)
			default:
				got = found{Kind: r.Kind, Key: r.Key}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
