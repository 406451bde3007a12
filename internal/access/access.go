// Package access is Userland's one rule against the confused deputy: when
// the gateway or the controller acts for a person, Kubernetes authorization
// decides what that person may do. Everything that asks "may this person do
// that?" on someone's behalf asks it here, with a SubjectAccessReview
// against the API server, so that RBAC (and any other authorizer the
// cluster runs) answers, not a list the deputy keeps.
//
// Being listed somewhere (a course's staff, a namespace's instructor
// groups) is a role the gateway uses to show and route; it is never a
// permission to change objects. Those changes go through Allowed.
package access

import (
	"context"
	"errors"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Subject is a person as Kubernetes authorization knows them: the user
// name and groups an authenticator would assert for them.
type Subject struct {
	User   string
	Groups []string
	// UID and Extra are passed on as the API server gave them (admission
	// requests carry them; the gateway's identities have none).
	UID   string
	Extra map[string]authenticationv1.ExtraValue
}

// FromUserInfo is the subject of an admission request.
func FromUserInfo(u authenticationv1.UserInfo) Subject {
	return Subject{User: u.Username, Groups: u.Groups, UID: u.UID, Extra: u.Extra}
}

// Mapping turns an identity provider's names into the names RBAC bindings
// use, as kube-apiserver's --oidc-username-prefix and --oidc-groups-prefix
// do: with UserPrefix "oidc:", the IdP's "alice" is RBAC's "oidc:alice".
type Mapping struct {
	UserPrefix, GroupPrefix string
}

// Subject maps an identity provider's user and groups. A name the
// identity provider chose must never land in the API server's reserved
// "system:" names: a user so named is nobody (the empty Subject, never
// allowed), and such groups are dropped, so an IdP group "system:masters"
// grants nothing when no prefix is configured.
func (m Mapping) Subject(user string, groups []string) Subject {
	if user == "" || strings.HasPrefix(m.UserPrefix+user, reserved) {
		return Subject{}
	}
	s := Subject{User: m.UserPrefix + user, Groups: make([]string, 0, len(groups)+1)}
	for _, g := range groups {
		if g != "" && !strings.HasPrefix(m.GroupPrefix+g, reserved) {
			s.Groups = append(s.Groups, m.GroupPrefix+g)
		}
	}
	// Every authenticated request is in system:authenticated; RBAC
	// bindings to it must apply to gateway users as they do to kubectl's.
	s.Groups = append(s.Groups, "system:authenticated")
	return s
}

// reserved starts the names Kubernetes keeps for itself.
const reserved = "system:"

// Action is what the subject would do: a verb on a resource, as RBAC
// names them. Group is the API group ("" for the core group).
type Action struct {
	Verb, Group, Resource, Subresource string
	Namespace, Name                    string
	// Path is a non-resource URL (such as /metrics); when set, the
	// resource fields are not asked about.
	Path string
}

func (a Action) String() string {
	if a.Path != "" {
		return a.Verb + " " + a.Path
	}
	what := a.Resource
	if a.Group != "" {
		what += "." + a.Group
	}
	if a.Subresource != "" {
		what += "/" + a.Subresource
	}
	if a.Name != "" {
		what += " " + a.Name
	}
	where := "cluster-wide"
	if a.Namespace != "" {
		where = "in namespace " + a.Namespace
	}
	return fmt.Sprintf("%s %s %s", a.Verb, what, where)
}

// Reviewer asks the API server whether a subject may do an action. Its
// client needs only create on subjectaccessreviews.
type Reviewer struct {
	Client client.Client
}

// Allowed reports whether s may do a. An empty user is never allowed: an
// anonymous person acts through nobody. Errors are the API server's
// (unreachable, forbidden to review); callers deny on error.
func (r Reviewer) Allowed(ctx context.Context, s Subject, a Action) (bool, error) {
	if s.User == "" {
		return false, nil
	}
	if r.Client == nil {
		return false, errors.New("access: no client to ask the API server with")
	}
	extra := make(map[string]authorizationv1.ExtraValue, len(s.Extra))
	for k, v := range s.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar := &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: s.User, Groups: s.Groups, UID: s.UID, Extra: extra},
	}
	if a.Path != "" {
		sar.Spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: a.Path, Verb: a.Verb}
	} else {
		sar.Spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
			Verb: a.Verb, Group: a.Group, Resource: a.Resource, Subresource: a.Subresource,
			Namespace: a.Namespace, Name: a.Name,
		}
	}
	if err := r.Client.Create(ctx, sar); err != nil {
		return false, fmt.Errorf("asking the API server whether %s may %s: %w", s.User, a, err)
	}
	return sar.Status.Allowed && !sar.Status.Denied, nil
}

// Denied is the error of an action a subject may not do: it names the
// action so the person learns what to ask an administrator for.
type Denied struct {
	User   string
	Action Action
}

func (d *Denied) Error() string {
	return fmt.Sprintf("%s may not %s", d.User, d.Action)
}

// Require is Allowed as an error: nil when s may do a, a *Denied when not.
func (r Reviewer) Require(ctx context.Context, s Subject, a Action) error {
	ok, err := r.Allowed(ctx, s, a)
	if err != nil {
		return err
	}
	if !ok {
		return &Denied{User: s.User, Action: a}
	}
	return nil
}
