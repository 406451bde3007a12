package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// IndexTemplateKey indexes Userlands by the template they refer to, so a
// template change finds its Userlands without a full list.
const IndexTemplateKey = "userland.dev/template-key"

// TemplateKey identifies a template across both kinds: "Template/<ns>/<name>"
// or "ClusterTemplate/<name>".
func TemplateKey(kind v1alpha1.TemplateKind, namespace, name string) string {
	if kind == v1alpha1.TemplateKindClusterTemplate {
		return string(kind) + "/" + name
	}
	return string(v1alpha1.TemplateKindTemplate) + "/" + namespace + "/" + name
}

// UserlandTemplateKey is the TemplateKey a Userland refers to.
func UserlandTemplateKey(ul *v1alpha1.Userland) string {
	return TemplateKey(ul.Spec.TemplateRef.Kind, ul.Namespace, ul.Spec.TemplateRef.Name)
}

// IndexUserlandByTemplate is the indexer function for IndexTemplateKey.
func IndexUserlandByTemplate(obj client.Object) []string {
	ul, ok := obj.(*v1alpha1.Userland)
	if !ok {
		return nil
	}
	return []string{UserlandTemplateKey(ul)}
}

// IndexPendingTemplateKey indexes only the Userlands waiting for their
// template's update, by template: a Deployment becoming available frees
// rollout budget for those few, and finding them must not cost a walk over
// every environment of the template on each of the many Deployment events.
const IndexPendingTemplateKey = "userland.dev/pending-template-key"

// IndexPendingUserlandByTemplate is the indexer function for
// IndexPendingTemplateKey.
func IndexPendingUserlandByTemplate(obj client.Object) []string {
	ul, ok := obj.(*v1alpha1.Userland)
	if !ok || !ul.Status.UpdatePending {
		return nil
	}
	return []string{UserlandTemplateKey(ul)}
}

// resolvedTemplate is a template of either kind.
type resolvedTemplate struct {
	kind v1alpha1.TemplateKind
	name string
	key  string
	spec *v1alpha1.TemplateSpec
}

// TemplateSpecOf returns a copy of the spec of the template a Userland
// refers to, read from c (a cache). The gateway uses it too, so both agree
// on what a reference means.
func TemplateSpecOf(ctx context.Context, c client.Reader, ul *v1alpha1.Userland) (*v1alpha1.TemplateSpec, error) {
	t, err := resolve(ctx, c, ul)
	if err != nil {
		return nil, err
	}
	return t.spec, nil
}

// resolve gets the template a Userland refers to from the cache. The
// returned spec is a copy.
func resolve(ctx context.Context, c client.Reader, ul *v1alpha1.Userland) (*resolvedTemplate, error) {
	ref := ul.Spec.TemplateRef
	t := &resolvedTemplate{kind: ref.Kind, name: ref.Name, key: UserlandTemplateKey(ul)}
	switch ref.Kind {
	case v1alpha1.TemplateKindClusterTemplate:
		var ct v1alpha1.ClusterTemplate
		if err := c.Get(ctx, types.NamespacedName{Name: ref.Name}, &ct); err != nil {
			return nil, fmt.Errorf("getting clustertemplate %s: %w", ref.Name, err)
		}
		t.spec = ct.Spec.TemplateSpec.DeepCopy()
	default:
		t.kind = v1alpha1.TemplateKindTemplate
		var tm v1alpha1.Template
		if err := c.Get(ctx, types.NamespacedName{Namespace: ul.Namespace, Name: ref.Name}, &tm); err != nil {
			return nil, fmt.Errorf("getting template %s/%s: %w", ul.Namespace, ref.Name, err)
		}
		t.spec = tm.Spec.DeepCopy()
	}
	return t, nil
}
