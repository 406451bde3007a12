package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/gateway/route"
	"github.com/userland-dev/userland/internal/gateway/session"
)

// Provisioner creates a user's Userlands at sign-in from every template
// whose autoProvision admits them.
type Provisioner struct {
	// Reader lists templates (the cache).
	Reader client.Reader
	// Writer creates Userlands.
	Writer client.Writer
	// ClusterTemplateNamespace is where Userlands from ClusterTemplates are
	// created; empty skips ClusterTemplates.
	ClusterTemplateNamespace string
}

// Admits reports whether an autoProvision rule lets id self-provision.
func Admits(ap *v1alpha1.AutoProvisionSpec, id session.Identity) bool {
	if ap == nil || id.User == "" {
		return false
	}
	if slices.Contains(ap.Users, id.User) {
		return true
	}
	for _, g := range id.Groups {
		if slices.Contains(ap.Groups, g) {
			return true
		}
	}
	if _, domain, ok := strings.Cut(id.Email, "@"); ok {
		return slices.Contains(ap.EmailDomains, strings.ToLower(domain))
	}
	return false
}

// ProvisionName is the Userland name for a user and template: derived only
// from them, so every replica picks the same name and concurrent sign-ins
// collapse into one object. The '/' never survives sanitising, so a hash
// of both is always appended and no two pairs share a name.
func ProvisionName(user, template string) string {
	return route.NameFor(user + "/" + template)
}

// Provision creates the missing Userlands for id and returns how many it
// created.
func (p *Provisioner) Provision(ctx context.Context, id session.Identity) (int, error) {
	type candidate struct {
		namespace string
		ref       v1alpha1.TemplateReference
	}
	var candidates []candidate
	var templates v1alpha1.TemplateList
	if err := p.Reader.List(ctx, &templates); err != nil {
		return 0, fmt.Errorf("listing templates: %w", err)
	}
	for _, t := range templates.Items {
		if Admits(t.Spec.AutoProvision, id) {
			candidates = append(candidates, candidate{t.Namespace, v1alpha1.TemplateReference{Kind: v1alpha1.TemplateKindTemplate, Name: t.Name}})
		}
	}
	if p.ClusterTemplateNamespace != "" {
		var cts v1alpha1.ClusterTemplateList
		if err := p.Reader.List(ctx, &cts); err != nil {
			return 0, fmt.Errorf("listing clustertemplates: %w", err)
		}
		for _, t := range cts.Items {
			if Admits(t.Spec.AutoProvision, id) {
				candidates = append(candidates, candidate{p.ClusterTemplateNamespace, v1alpha1.TemplateReference{Kind: v1alpha1.TemplateKindClusterTemplate, Name: t.Name}})
			}
		}
	}
	created := 0
	var errs []error
	for _, c := range candidates {
		name := ProvisionName(id.User, string(c.ref.Kind)+"/"+c.ref.Name)
		var existing v1alpha1.Userland
		if err := p.Reader.Get(ctx, types.NamespacedName{Namespace: c.namespace, Name: name}, &existing); err == nil {
			continue
		}
		ul := &v1alpha1.Userland{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: c.namespace, Name: name,
				Labels: map[string]string{"userland.dev/auto-provisioned": "true"},
			},
			Spec: v1alpha1.UserlandSpec{User: id.User, TemplateRef: c.ref},
		}
		err := p.Writer.Create(ctx, ul, client.FieldOwner("userland-gateway"))
		switch {
		case err == nil:
			created++
		case apierrors.IsAlreadyExists(err):
			// Another replica or sign-in won the race; the name is
			// derived from user and template, so it is this user's.
		default:
			errs = append(errs, fmt.Errorf("creating userland %s/%s: %w", c.namespace, name, err))
		}
	}
	return created, errors.Join(errs...)
}
