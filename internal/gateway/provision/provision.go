// Package provision creates users' Userlands from templates whose autoProvision
// admits them, under names every replica and tool derive the same way.
package provision

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/apiverdict"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/gateway/session"
	"github.com/userland-dev/userland/internal/naming"
	"github.com/userland-dev/userland/internal/userlands"
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
	// Now is the clock course terms are read against (time.Now when nil).
	Now func() time.Time
}

func (p *Provisioner) now() time.Time {
	if p.Now == nil {
		return time.Now()
	}
	return p.Now()
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

// Candidate is a Userland a user may create from a template.
type Candidate struct {
	// Namespace receives the Userland.
	Namespace string
	// Ref names the template.
	Ref v1alpha1.TemplateReference
	// Name is the name a new Userland would most likely get (the readable
	// one); Create picks the actual name.
	Name string
	// DisplayName and Description come from the template.
	DisplayName, Description string
	// Course names the Course that offers it, CourseUID is that Course's
	// UID (the environment's provenance) and Basis the roster entry that
	// admitted the user; all empty for a template's autoProvision.
	Course, Basis string
	CourseUID     types.UID
}

// Candidates lists every Userland id may self-provision, whether or not it
// exists yet.
func (p *Provisioner) Candidates(ctx context.Context, id session.Identity) ([]Candidate, error) {
	var out []Candidate
	add := func(ns string, kind v1alpha1.TemplateKind, name string, spec *v1alpha1.TemplateSpec) {
		ref := v1alpha1.TemplateReference{Kind: kind, Name: name}
		out = append(out, Candidate{
			Namespace: ns, Ref: ref, Name: naming.ReadableName(id.User, name),
			DisplayName: spec.DisplayName, Description: spec.Description,
		})
	}
	// A course's environment and a personal (autoProvision) one from the
	// same template are two environments: the course's is named for the
	// course and is the course's to govern, the personal one is nobody's
	// but its user's. Neither stands in for the other
	// (userlands.IsFor), so a course manager cannot make a person's own
	// work a course's by enrolling them.
	courses, err := p.courseCandidates(ctx, id)
	if err != nil {
		return nil, err
	}
	out = append(out, courses...)
	var templates v1alpha1.TemplateList
	if err := p.Reader.List(ctx, &templates); err != nil {
		return nil, fmt.Errorf("listing templates: %w", err)
	}
	for _, t := range templates.Items {
		if Admits(t.Spec.AutoProvision, id) {
			add(t.Namespace, v1alpha1.TemplateKindTemplate, t.Name, &t.Spec)
		}
	}
	if p.ClusterTemplateNamespace != "" {
		var cts v1alpha1.ClusterTemplateList
		if err := p.Reader.List(ctx, &cts); err != nil {
			return nil, fmt.Errorf("listing clustertemplates: %w", err)
		}
		for _, t := range cts.Items {
			if Admits(t.Spec.AutoProvision, id) {
				add(p.ClusterTemplateNamespace, v1alpha1.TemplateKindClusterTemplate, t.Name, &t.Spec.TemplateSpec)
			}
		}
	}
	return out, nil
}

// Create creates one candidate's Userland for id. It reports false when
// id already has an environment from that template (for a course's
// candidate: that course's environment), whoever created it (another
// replica, another sign-in, an administrator). A course's environment is
// linked to the course as the controller links it (course.NewUserland);
// the webhook admits that only because the gateway may enroll in courses.
func (p *Provisioner) Create(ctx context.Context, id session.Identity, c Candidate) (bool, error) {
	ul := &v1alpha1.Userland{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace},
		Spec:       v1alpha1.UserlandSpec{User: id.User, TemplateRef: c.Ref},
	}
	if c.Course != "" {
		crs := &v1alpha1.Course{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Course, UID: c.CourseUID}}
		ul = course.NewUserland(crs, id.User, c.Basis, c.Ref)
	}
	if ul.Labels == nil {
		ul.Labels = map[string]string{}
	}
	ul.Labels["userland.dev/auto-provisioned"] = "true"
	name, created, err := userlands.Create(ctx, p.Reader, p.Writer, ul, client.FieldOwner("userland-gateway"))
	if err != nil || !created {
		// Existing: nothing to do. A course never adopts the user's
		// other environments.
		return false, err
	}
	// The sign-in that created it goes straight on to it (the hand-off,
	// the dashboard), and both read the cache: wait for the cache to show
	// it, or the user gets "not found" for an environment just made.
	if _, err := userlands.Settled(ctx, p.Reader, types.NamespacedName{Namespace: c.Namespace, Name: name}); err != nil {
		return true, fmt.Errorf("waiting for the new userland to be readable: %w", err)
	}
	return true, nil
}

// Provision creates the missing Userlands for id and returns how many it
// created.
func (p *Provisioner) Provision(ctx context.Context, id session.Identity) (int, error) {
	candidates, err := p.Candidates(ctx, id)
	if err != nil {
		return 0, err
	}
	created := 0
	var errs []error
	for _, c := range candidates {
		ok, err := p.Create(ctx, id, c)
		if ok {
			created++
		}
		if apiverdict.NamespaceTerminating(err) && (c.Course != "" || c.Ref.Kind != v1alpha1.TemplateKindClusterTemplate) {
			// The namespace, with the course or template that offered
			// this, is being deleted: there is nothing to provision
			// there, and no reason to fail the sign-in's other
			// environments over it. A ClusterTemplate's own offer goes
			// to the operator's namespace, which does not go with the
			// template, so a stuck one stays an error.
			continue
		}
		errs = append(errs, err)
	}
	return created, errors.Join(errs...)
}
