package v1alpha1_test

import (
	"testing"

	"github.com/userland-dev/userland/api/v1alpha1"
)

func TestTemplateKindOrDefault(t *testing.T) {
	t.Parallel()
	for in, want := range map[v1alpha1.TemplateKind]v1alpha1.TemplateKind{
		"":                                   v1alpha1.TemplateKindTemplate,
		v1alpha1.TemplateKindTemplate:        v1alpha1.TemplateKindTemplate,
		v1alpha1.TemplateKindClusterTemplate: v1alpha1.TemplateKindClusterTemplate,
	} {
		if got := in.OrDefault(); got != want {
			t.Errorf("%q.OrDefault() = %q, want %q", in, got, want)
		}
	}
}
