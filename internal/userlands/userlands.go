// Package userlands holds the rule that says which Userland is a user's
// environment from a template, and under which name a new one is created.
// The gateway's auto-provisioning, the roster import, the kubectl plugin
// and `userland dev` all go through it, so they agree on both.
//
// A user's environment from a template is found by what it is (spec.user
// and spec.templateRef), never by its name: environments created under
// earlier naming rules keep their names, and nobody gets a second one
// after an upgrade. A new one takes the readable name ("alice-jupyterlab")
// when that is free, else the readable name with a short hash.
//
// A course's environment is another environment: it is the user's from the
// template that carries the course's label, under a name for the course
// (naming.CourseCandidateNames). A student's own environment from the same
// template is never taken into a course: the course's staff reach course
// environments, and retirement deletes them.
package userlands

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/naming"
)

// ErrNoFreeName means every candidate name belongs to another user's or
// another template's environment.
var ErrNoFreeName = errors.New("every name for this environment is taken by another")

// Is reports whether ul is user's environment from ref.
// An empty kind is Template, as the API server defaults it.
func Is(ul *v1alpha1.Userland, user string, ref v1alpha1.TemplateReference) bool {
	return ul.Spec.User == user && ul.Spec.TemplateRef.Kind.OrDefault() == ref.Kind.OrDefault() && ul.Spec.TemplateRef.Name == ref.Name
}

// IsFor reports whether ul is user's environment from ref for course (the
// value of its course label); an empty course means user's own
// environment, one no course is linked to. A course environment never
// stands in for a personal one: otherwise a course manager could enrol a
// student up front on an auto-provisioned template and so make the
// student's own work a course's, which its staff reach and its
// retirement deletes.
func IsFor(ul *v1alpha1.Userland, user string, ref v1alpha1.TemplateReference, course string) bool {
	return Is(ul, user, ref) && ul.Labels[v1alpha1.LabelCourse] == course
}

// candidateNames are the names a new environment of user from ref takes,
// for course when it is not empty.
func candidateNames(user string, ref v1alpha1.TemplateReference, course string) []string {
	if course != "" {
		return naming.CourseCandidateNames(course, user, ref)
	}
	return naming.CandidateNames(user, ref)
}

// Index is one namespace's Userlands as listed once: a roster import
// places hundreds of rows with one list, not one per row.
type Index struct {
	namespace string
	byName    map[string]*v1alpha1.Userland
}

// NewIndex lists the Userlands of namespace.
func NewIndex(ctx context.Context, r client.Reader, namespace string) (*Index, error) {
	var list v1alpha1.UserlandList
	if err := r.List(ctx, &list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing userlands in %s: %w", namespace, err)
	}
	x := &Index{namespace: namespace, byName: make(map[string]*v1alpha1.Userland, len(list.Items))}
	for i := range list.Items {
		x.byName[list.Items[i].Name] = &list.Items[i]
	}
	return x, nil
}

// Find returns user's environment from ref, or nil. When there are
// several (made by hand), the oldest is returned. The result is shared:
// callers must not modify it.
func (x *Index) Find(user string, ref v1alpha1.TemplateReference) *v1alpha1.Userland {
	return x.FindFor(user, ref, "")
}

// FindFor is Find for course's environment (course empty: user's own).
func (x *Index) FindFor(user string, ref v1alpha1.TemplateReference, course string) *v1alpha1.Userland {
	var found *v1alpha1.Userland
	for _, ul := range x.byName {
		if IsFor(ul, user, ref, course) && (found == nil || ul.CreationTimestamp.Before(&found.CreationTimestamp) ||
			ul.CreationTimestamp.Equal(&found.CreationTimestamp) && ul.Name < found.Name) {
			found = ul
		}
	}
	return found
}

// Name is the name of user's environment from ref: the existing one's
// (exists true), else the first candidate name nobody has.
func (x *Index) Name(user string, ref v1alpha1.TemplateReference) (name string, exists bool, err error) {
	return x.NameFor(user, ref, "")
}

// NameFor is Name for course's environment (course empty: any).
func (x *Index) NameFor(user string, ref v1alpha1.TemplateReference, course string) (name string, exists bool, err error) {
	if ul := x.FindFor(user, ref, course); ul != nil {
		return ul.Name, true, nil
	}
	for _, name := range candidateNames(user, ref, course) {
		if x.byName[name] == nil {
			return name, false, nil
		}
	}
	return "", false, fmt.Errorf("%s's environment from %s %s in %s: %w", user, ref.Kind, ref.Name, x.namespace, ErrNoFreeName)
}

// Add records an object created (or dry-run created) since the list.
func (x *Index) Add(ul *v1alpha1.Userland) {
	x.byName[ul.Name] = ul
}

// Name is the name of user's environment from ref in namespace: the
// existing one's (exists true), else the first candidate name nobody has.
func Name(ctx context.Context, r client.Reader, namespace, user string, ref v1alpha1.TemplateReference) (name string, exists bool, err error) {
	x, err := NewIndex(ctx, r, namespace)
	if err != nil {
		return "", false, err
	}
	return x.Name(user, ref)
}

// settle is how long Create waits for its reader (a cache) to show an
// object the API server said exists, before giving up.
const settle = 3 * time.Second

// Create creates ul (namespace, spec.user and spec.templateRef set; its
// name is chosen here) unless the user already has an environment from
// that template: for the course its course label names, when it has one
// (a course environment is named for the course and never found among the
// user's other environments). It returns the environment's name and whether this call
// created it.
func Create(ctx context.Context, r client.Reader, w client.Writer, ul *v1alpha1.Userland, opts ...client.CreateOption) (string, bool, error) {
	x, err := NewIndex(ctx, r, ul.Namespace)
	if err != nil {
		return "", false, err
	}
	return x.Create(ctx, r, w, ul, opts...)
}

// Create is Create with names chosen from the index, which it keeps up
// to date. When a candidate name was taken between listing and creating,
// it looks (through r) at who took it: the same user and template
// (another gateway replica, a second sign-in) means it exists; anyone
// else means the next name.
func (x *Index) Create(ctx context.Context, r client.Reader, w client.Writer, ul *v1alpha1.Userland, opts ...client.CreateOption) (string, bool, error) {
	user, ref, course := ul.Spec.User, ul.Spec.TemplateRef, ul.Labels[v1alpha1.LabelCourse]
	name, exists, err := x.NameFor(user, ref, course)
	if err != nil || exists {
		return name, false, err
	}
	candidates := candidateNames(user, ref, course)
	// Start at the free name found above.
	for len(candidates) > 0 && candidates[0] != name {
		candidates = candidates[1:]
	}
	for _, candidate := range candidates {
		obj := ul.DeepCopy()
		obj.Name = candidate
		err := w.Create(ctx, obj, opts...)
		if err == nil {
			x.Add(obj)
			return candidate, true, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return candidate, false, fmt.Errorf("creating userland %s/%s: %w", ul.Namespace, candidate, err)
		}
		other, err := Settled(ctx, r, types.NamespacedName{Namespace: ul.Namespace, Name: candidate})
		if err != nil {
			return candidate, false, err
		}
		x.Add(other)
		if IsFor(other, user, ref, course) {
			return candidate, false, nil
		}
	}
	return "", false, fmt.Errorf("%s's environment from %s %s in %s: %w", user, ref.Kind, ref.Name, ul.Namespace, ErrNoFreeName)
}

// Settled waits until r (perhaps a cache) shows the object at key, which
// the API server said exists, for up to a few seconds.
func Settled(ctx context.Context, r client.Reader, key types.NamespacedName) (*v1alpha1.Userland, error) {
	deadline := time.Now().Add(settle)
	for {
		var other v1alpha1.Userland
		err := r.Get(ctx, key, &other)
		if err == nil {
			return &other, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading userland %s: %w", key, err)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("userland %s exists but cannot be read yet; try again", key)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
