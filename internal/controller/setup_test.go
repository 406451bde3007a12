package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/userland-dev/userland/api/v1alpha1"
)

func TestIndexPodByUserlandKeysOnlyLabelledPods(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		labels map[string]string
		want   []string
	}{
		{name: "an environment's pod", labels: map[string]string{v1alpha1.LabelUserland: "taro", v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}, want: []string{"taro"}},
		{name: "a pod of something else", labels: map[string]string{"app": "db"}},
		{name: "an empty label", labels: map[string]string{v1alpha1.LabelUserland: ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{}
			pod.Labels = tt.labels
			if diff := cmp.Diff(tt.want, IndexPodByUserland(pod)); diff != "" {
				t.Errorf("IndexPodByUserland (-want +got):\n%s", diff)
			}
		})
	}
}
