// Package templates holds the rule that says which template a Userland
// runs: a Template in its own namespace or a ClusterTemplate, by
// reference. The controller and the gateway both resolve through it, so a
// reference means the same thing to both.
package templates

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// Key identifies a template across both kinds: "Template/<ns>/<name>" or
// "ClusterTemplate/<name>".
func Key(kind v1alpha1.TemplateKind, namespace, name string) string {
	if kind == v1alpha1.TemplateKindClusterTemplate {
		return string(kind) + "/" + name
	}
	return string(v1alpha1.TemplateKindTemplate) + "/" + namespace + "/" + name
}

// UserlandKey is the Key of the template a Userland refers to.
func UserlandKey(ul *v1alpha1.Userland) string {
	return Key(ul.Spec.TemplateRef.Kind, ul.Namespace, ul.Spec.TemplateRef.Name)
}

// Resolved is the template a Userland refers to, of either kind.
type Resolved struct {
	// Kind is Template or ClusterTemplate.
	Kind v1alpha1.TemplateKind
	// Name is the template's name.
	Name string
	// Key is its Key.
	Key string
	// Spec is the template's spec, read-only: it is the object the reader
	// returned, not a further copy. From a cache with deep copies turned
	// off (the gateway's, which resolves on every request) it is shared
	// with the cache, so nobody may change it.
	Spec *v1alpha1.TemplateSpec
	// AllowedNamespaces is a ClusterTemplate's namespace selector (nil:
	// every namespace; always nil for a Template). Like Spec, it is shared
	// with the reader's object and read-only.
	AllowedNamespaces *metav1.LabelSelector
}

// Resolve reads the template a Userland refers to from c (a cache). A
// missing template is a NotFound error (apierrors.IsNotFound).
func Resolve(ctx context.Context, c client.Reader, ul *v1alpha1.Userland) (*Resolved, error) {
	return ResolveRef(ctx, c, ul.Namespace, ul.Spec.TemplateRef)
}

// ResolveRef reads the template ref names for something in namespace (a
// Userland, or a Course offering it).
func ResolveRef(ctx context.Context, c client.Reader, namespace string, ref v1alpha1.TemplateReference) (*Resolved, error) {
	r := &Resolved{Kind: ref.Kind, Name: ref.Name, Key: Key(ref.Kind, namespace, ref.Name)}
	switch ref.Kind {
	case v1alpha1.TemplateKindClusterTemplate:
		var ct v1alpha1.ClusterTemplate
		if err := c.Get(ctx, types.NamespacedName{Name: ref.Name}, &ct); err != nil {
			return nil, fmt.Errorf("getting clustertemplate %s: %w", ref.Name, err)
		}
		r.Spec = &ct.Spec.TemplateSpec
		r.AllowedNamespaces = ct.Spec.AllowedNamespaces
	default:
		r.Kind = v1alpha1.TemplateKindTemplate
		var t v1alpha1.Template
		if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, &t); err != nil {
			return nil, fmt.Errorf("getting template %s/%s: %w", namespace, ref.Name, err)
		}
		r.Spec = &t.Spec
	}
	return r, nil
}

// FindByName resolves a bare template name, as a roster row gives it: a
// Template of that name in namespace, else a ClusterTemplate. A name that
// is neither is a NotFound error.
func FindByName(ctx context.Context, c client.Reader, namespace, name string) (*Resolved, error) {
	r, err := ResolveRef(ctx, c, namespace, v1alpha1.TemplateReference{Kind: v1alpha1.TemplateKindTemplate, Name: name})
	if !apierrors.IsNotFound(err) {
		return r, err
	}
	return ResolveRef(ctx, c, namespace, v1alpha1.TemplateReference{Kind: v1alpha1.TemplateKindClusterTemplate, Name: name})
}
