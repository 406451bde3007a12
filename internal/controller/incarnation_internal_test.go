package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// TestBindOnReplace: an environment not bound to its Userland's UID is
// bound when its pod is replaced anyway, and never otherwise.
func TestBindOnReplace(t *testing.T) {
	t.Parallel()
	ul := &v1alpha1.Userland{}
	ul.UID = "uid-bob"
	dep := func(replicas int32, hash, restartedAt, uid string) *appsv1.Deployment {
		d := &appsv1.Deployment{}
		d.Spec.Replicas = ptr.To(replicas)
		d.Spec.Template.Annotations = map[string]string{AnnotationTemplateHash: hash}
		if restartedAt != "" {
			d.Spec.Template.Annotations[v1alpha1.AnnotationRestartedAt] = restartedAt
		}
		if uid != "" {
			d.Spec.Template.Labels = map[string]string{v1alpha1.LabelUserlandUID: uid}
		}
		return d
	}
	desired := func(hash, restartedAt string) corev1.PodTemplateSpec {
		p := corev1.PodTemplateSpec{}
		p.Annotations = map[string]string{AnnotationTemplateHash: hash}
		if restartedAt != "" {
			p.Annotations[v1alpha1.AnnotationRestartedAt] = restartedAt
		}
		return p
	}
	got, want := map[string]bool{}, map[string]bool{}
	for name, tc := range map[string]struct {
		dep     *appsv1.Deployment
		desired corev1.PodTemplateSpec
		want    bool
	}{
		"no Deployment (bound already)":             {nil, desired("h1", ""), false},
		"bound already":                             {dep(1, "h1", "", "uid-bob"), desired("h2", ""), false},
		"running, unchanged":                        {dep(1, "h1", "", ""), desired("h1", ""), false},
		"running, unchanged, restarted before":      {dep(1, "h1", "t1", ""), desired("h1", "t1"), false},
		"running, its template changed":             {dep(1, "h1", "", ""), desired("h2", ""), true},
		"running, a restart asked for":              {dep(1, "h1", "", ""), desired("h1", "t1"), true},
		"stopped":                                   {dep(0, "h1", "", ""), desired("h1", ""), true},
		"running, edited to another Userland's UID": {dep(1, "h1", "", "uid-alice"), desired("h1", ""), false},
		"stopped, edited to another Userland's UID": {dep(0, "h1", "", "uid-alice"), desired("h1", ""), true},
	} {
		got[name] = bindOnReplace(ul, tc.dep, tc.desired)
		want[name] = tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
