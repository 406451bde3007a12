package naming

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/userland-dev/userland/api/v1alpha1"
)

func TestTemplateNetworkPolicy(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("very-long-template-name-", 10)[:239]
	cases := []struct {
		kind       v1alpha1.TemplateKind
		name       string
		wantPrefix string
	}{
		{v1alpha1.TemplateKindTemplate, "jupyterlab", "userland.template.jupyterlab-"},
		{"", "jupyterlab", "userland.template.jupyterlab-"}, // the default kind
		{v1alpha1.TemplateKindClusterTemplate, "vscode", "userland.clustertemplate.vscode-"},
		{v1alpha1.TemplateKindTemplate, "php.mariadb", "userland.template.php-mariadb-"},
		{v1alpha1.TemplateKindTemplate, "2d", "userland.template.2d-"},
		{v1alpha1.TemplateKindClusterTemplate, long, "userland.clustertemplate.very-long-template-na-"},
	}
	for _, tc := range cases {
		got := TemplateNetworkPolicy(tc.kind, tc.name)
		if !strings.HasPrefix(got, tc.wantPrefix) || len(got) != len(tc.wantPrefix)+16 {
			t.Errorf("TemplateNetworkPolicy(%q, %q) = %q, want %q and 16 hex digits", tc.kind, tc.name, got, tc.wantPrefix)
		}
		// It is both the policy's name and the pods' label value.
		if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
			t.Errorf("%q is not a valid object name: %v", got, errs)
		}
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Errorf("%q is not a valid label value: %v", got, errs)
		}
		// A Userland's name is a DNS label with no dots: no per-Userland
		// child can be named like a shared policy.
		if len(validation.IsDNS1035Label(got)) == 0 {
			t.Errorf("%q could be a Userland's name", got)
		}
	}
	// What sanitising merges, the hash keeps apart.
	distinct := map[string]string{}
	for _, ref := range []struct {
		kind v1alpha1.TemplateKind
		name string
	}{
		{v1alpha1.TemplateKindTemplate, "a.b"}, {v1alpha1.TemplateKindTemplate, "a-b"},
		{v1alpha1.TemplateKindClusterTemplate, "a-b"}, {v1alpha1.TemplateKindTemplate, long}, {v1alpha1.TemplateKindTemplate, long + "x"},
	} {
		got := TemplateNetworkPolicy(ref.kind, ref.name)
		if prev, ok := distinct[got]; ok {
			t.Errorf("%s %q and %s share the policy %q", ref.kind, ref.name, prev, got)
		}
		distinct[got] = string(ref.kind) + " " + ref.name
	}
	if diff := cmp.Diff(TemplateNetworkPolicy("", "x"), TemplateNetworkPolicy(v1alpha1.TemplateKindTemplate, "x")); diff != "" {
		t.Errorf("the empty kind is Template (-want +got):\n%s", diff)
	}
}
