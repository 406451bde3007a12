package chartrender

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/controller"
)

// grant is one reviewed line of a shipped role, and why it is there.
type grant struct {
	what, why string
	// selfCerts: only with webhook.certificates=self (the default).
	selfCerts bool
}

// reviewed is every permission the chart ships, role by role, as grants
// prints them ("verbs" per resource; names= when limited by resourceNames).
// A permission the chart gains or loses fails TestShippedRolesAreReviewed
// until it is added here with its reason. The controller's and gateway's
// cluster-wide rights are cluster-wide because Userlands, and so their
// children, live in any namespace (the chart offers no watchNamespaces).
// Nobody but the controller and the gateway holds enroll, and no role that
// aggregates into admin, edit or view holds it.
var reviewed = map[string][]grant{
	"ClusterRole/userland-controller": {
		{what: "bound cluster-wide to ServiceAccount userland-system/userland-controller", why: "Userlands, Courses and templates live in any namespace"},
		{what: "apps/daemonsets: create delete get list patch watch", why: "a course's image pullers (server-side apply), from a session's warm-up to its end, then deleted"},
		{what: "apps/deployments: create get list patch watch", why: "one Deployment per Userland (server-side apply); no delete: owner references collect it"},
		{what: "apps/replicasets: get", why: "whose a pod made in its Deployment's own second is (its ReplicaSet's owner), read only then, so a new environment's Ready pod says Ready without waiting for the Deployment's status; no list or watch: nothing is cached"},
		{what: "authentication.k8s.io/tokenreviews: create", why: "whoever scrapes the metrics shows a token the API server checks (--metrics-secure)"},
		{what: "authorization.k8s.io/subjectaccessreviews: create", why: "the webhooks ask whether the requester may do what an object asks for (enroll in a course); the metrics ask whether the scraper may get /metrics"},
		{what: "events.k8s.io/events: create patch", why: "events on Userlands and Courses, in their namespaces"},
		{what: "namespaces: get list watch", why: "their labels decide ClusterTemplate allowedNamespaces: the webhooks read them, the controller watches them"},
		{what: "networking.k8s.io/networkpolicies: create delete get list patch watch", why: "one NetworkPolicy per namespace and template, admitting only the gateway; delete: the per-Userland policies of earlier versions once their pods are covered, and shared ones whose template is gone and unused"},
		{what: "persistentvolumeclaims: create get list patch watch", why: "a Userland's claims; no delete: reclaimPolicy Delete goes through owner references"},
		{what: "pods: create delete get list patch watch", why: "environment health (only managed-by=userland pods are cached); create, patch (server-side apply) and delete: a course's placeholder pods, from a session's warm-up to its end; no more power than deployments create already gives (a pod of any spec), and Pod Security admission still judges each; no exec, eviction, log or update"},
		{what: "services: create delete get list patch watch", why: "one Service per Userland; delete when a template stops exposing a port"},
		{what: "snapshot.storage.k8s.io/volumesnapshots: create get", why: "a retiring course snapshots its students' claims"},
		{what: "userland.dev/clustertemplates: get list watch", why: "resolving templates"},
		{what: "userland.dev/clustertemplates/status: patch", why: "template status counts"},
		{what: "userland.dev/courses: enroll get list watch", why: "reconciling courses; enroll: the Userlands a course creates carry its label, which the webhook admits only with enroll"},
		{what: "userland.dev/courses/status: patch", why: "course status"},
		{what: "userland.dev/templates: get list watch", why: "resolving templates"},
		{what: "userland.dev/templates/status: patch", why: "template status counts"},
		{what: "userland.dev/userlands: create delete get list patch watch", why: "reconciling; a course creates its students' Userlands and deletes them after retention"},
		{what: "userland.dev/userlands/status: patch", why: "Userland status"},
	},
	"Role/userland-system/userland-controller": {
		{what: "bound in userland-system to ServiceAccount userland-system/userland-controller", why: "its own namespace only"},
		{what: "coordination.k8s.io/leases: create", why: "leader election creates its Lease once; RBAC cannot limit create to a name"},
		{what: "coordination.k8s.io/leases names=" + controller.LeaderElectionID + ": get update", why: "leader election, its own Lease only"},
		{what: "secrets names=userland-webhook-cert: get list update watch", why: "the self-managed webhook certificate, this Secret only (list and watch carry a metadata.name field selector); no create: the chart ships it", selfCerts: true},
	},
	"ClusterRole/userland-controller-webhook-config": {
		{what: "bound cluster-wide to ServiceAccount userland-system/userland-controller", why: "webhook configurations are cluster-scoped", selfCerts: true},
		{what: "admissionregistration.k8s.io/validatingwebhookconfigurations names=userland: get list update watch", why: "injecting the CA into this release's configuration only", selfCerts: true},
	},
	"ClusterRole/userland-gateway": {
		{what: "bound cluster-wide to ServiceAccount userland-system/userland-gateway", why: "environments live in any namespace"},
		{what: "authorization.k8s.io/subjectaccessreviews: create", why: "the dashboard asks RBAC whether a person may act before acting for them"},
		{what: "discovery.k8s.io/endpointslices: list watch", why: "an environment's pod address, from its Service's slices (informer, environments' slices only); cluster DNS could give a gone pod's address after a wake"},
		{what: "events: list", why: "the dashboard shows an environment's latest event (core events, field selector, from the API server)"},
		{what: "namespaces: get list watch", why: "their userland.dev/instructor-groups annotation (informer)"},
		{what: "services: list watch", why: "which Userland controls an environment's Service (metadata informer, environments' Services only): an earlier Userland's Service of the same name left its slices behind"},
		{what: "userland.dev/clustertemplates: get list watch", why: "routing and the dashboard (informer)"},
		{what: "userland.dev/courses: enroll get grant list patch watch", why: "rosters (informer); patch: staff import a roster from the course page; enroll: sign-in provisioning for a course's students sets its label; grant: the course page's Grant hours, after a SubjectAccessReview for the person"},
		{what: "userland.dev/templates: get list watch", why: "routing and the dashboard (informer)"},
		{what: "userland.dev/userlands: create get grant list patch watch", why: "routing (informer); create: auto-provisioning; patch: start, stop, restart, update after a SubjectAccessReview; grant: the admin page's Grant hours on an environment outside a course, after a SubjectAccessReview for the person; no delete"},
		{what: "userland.dev/userlands/status: patch", why: "status.lastActivity"},
	},
	"ClusterRole/userland-template-author": {
		{what: "userland.dev/clustertemplates: create delete get list patch update watch", why: "template authors decide what runs (ClusterTemplates need a ClusterRoleBinding)"},
		{what: "userland.dev/clustertemplates/status: get", why: "seeing template status"},
		{what: "userland.dev/templates: create delete get list patch update watch", why: "template authors decide what runs; aggregated into admin"},
		{what: "userland.dev/templates/status: get", why: "seeing template status"},
	},
	"ClusterRole/userland-user-manager": {
		{what: "userland.dev/clustertemplates: get list watch", why: "choosing a template"},
		{what: "userland.dev/templates: get list watch", why: "choosing a template"},
		{what: "userland.dev/userlands: create delete get list patch update watch", why: "user managers decide who gets one (aggregated into edit); a course label still needs enroll, which edit does not get"},
		{what: "userland.dev/userlands/status: get", why: "seeing environment status"},
	},
	"ClusterRole/userland-course-manager": {
		{what: "userland.dev/clustertemplates: get list watch", why: "choosing a course's templates"},
		{what: "userland.dev/courses: create delete get list patch update watch", why: "running courses: roster, staff, term, limits"},
		{what: "userland.dev/courses/status: get", why: "seeing course status"},
		{what: "userland.dev/templates: get list watch", why: "choosing a course's templates"},
		{what: "userland.dev/userlands: get list watch", why: "seeing students' environments; no patch: start/stop/restart go through the dashboard, which checks staff and course"},
		{what: "userland.dev/userlands/status: get", why: "seeing environment status"},
	},
	"ClusterRole/userland-budget-granter": {
		{what: "userland.dev/courses: get grant list watch", why: "granting students extra compute hours (the webhook asks RBAC for grant); bound per namespace"},
		{what: "userland.dev/userlands: get grant list watch", why: "granting budget to environments outside a course; no patch: kubectl userland grant needs edit's too"},
	},
	"ClusterRole/userland-metrics-reader": {
		{what: "url /metrics: get", why: "scraping the controller's metrics, which name users; bound by the operator to their Prometheus"},
	},
	"ClusterRole/userland-viewer": {
		{what: "userland.dev/clustertemplates: get list watch", why: "read-only, aggregated into view"},
		{what: "userland.dev/clustertemplates/status: get list watch", why: "read-only, aggregated into view"},
		{what: "userland.dev/courses: get list watch", why: "read-only, aggregated into view"},
		{what: "userland.dev/courses/status: get list watch", why: "read-only, aggregated into view"},
		{what: "userland.dev/templates: get list watch", why: "read-only, aggregated into view"},
		{what: "userland.dev/templates/status: get list watch", why: "read-only, aggregated into view"},
		{what: "userland.dev/userlands: get list watch", why: "read-only, aggregated into view"},
		{what: "userland.dev/userlands/status: get list watch", why: "read-only, aggregated into view"},
	},
}

// rbacObject is one rendered role and its labels.
type rbacObject struct {
	key    string
	labels map[string]string
	rules  []rbacv1.PolicyRule
}

// roles are the rendered ClusterRoles and Roles, keyed Kind/[namespace/]name.
func roles(t *testing.T, objs []*unstructured.Unstructured) []rbacObject {
	t.Helper()
	var out []rbacObject
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole":
			var r rbacv1.ClusterRole
			fromUnstructured(t, o, &r)
			out = append(out, rbacObject{key: "ClusterRole/" + r.Name, labels: r.Labels, rules: r.Rules})
		case "Role":
			var r rbacv1.Role
			fromUnstructured(t, o, &r)
			out = append(out, rbacObject{key: "Role/" + r.Namespace + "/" + r.Name, labels: r.Labels, rules: r.Rules})
		}
	}
	return out
}

// grants is every permission and binding the rendered RBAC holds, by role:
// "group/resource[ names=a,b]: verbs" and "bound <where> to <subject>".
func grants(t *testing.T, objs []*unstructured.Unstructured) map[string][]string {
	t.Helper()
	verbs := map[string]map[string][]string{} // role → resource line → verbs
	out := map[string][]string{}
	for _, r := range roles(t, objs) {
		if verbs[r.key] == nil {
			verbs[r.key] = map[string][]string{}
		}
		for _, rule := range r.rules {
			names := ""
			if len(rule.ResourceNames) > 0 {
				names = " names=" + strings.Join(rule.ResourceNames, ",")
			}
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					line := res + names
					if g != "" {
						line = g + "/" + line
					}
					verbs[r.key][line] = append(verbs[r.key][line], rule.Verbs...)
				}
			}
			for _, u := range rule.NonResourceURLs {
				verbs[r.key]["url "+u] = append(verbs[r.key]["url "+u], rule.Verbs...)
			}
		}
	}
	for role, lines := range verbs {
		for line, vs := range lines {
			sort.Strings(vs)
			out[role] = append(out[role], line+": "+strings.Join(slices.Compact(vs), " "))
		}
	}
	for _, o := range objs {
		if o.GetKind() != "ClusterRoleBinding" && o.GetKind() != "RoleBinding" {
			continue
		}
		var b rbacv1.RoleBinding // a ClusterRoleBinding has the same fields
		fromUnstructured(t, o, &b)
		role, where := b.RoleRef.Kind+"/"+b.RoleRef.Name, "cluster-wide"
		if o.GetKind() == "RoleBinding" {
			where = "in " + b.Namespace
			if b.RoleRef.Kind == "Role" {
				role = "Role/" + b.Namespace + "/" + b.RoleRef.Name
			}
		}
		for _, s := range b.Subjects {
			out[role] = append(out[role], fmt.Sprintf("bound %s to %s %s/%s", where, s.Kind, s.Namespace, s.Name))
		}
	}
	for _, g := range out {
		sort.Strings(g)
	}
	return out
}

func fromUnstructured(t *testing.T, o *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
}

// TestShippedRolesAreReviewed lists every permission of every role the
// chart renders (config/rbac's, copied in by make manifests, and the
// chart's own) and compares it with the reviewed table above.
func TestShippedRolesAreReviewed(t *testing.T) {
	for _, tc := range []struct {
		values    string
		selfCerts bool
	}{{"default", true}, {"cert-manager", false}} {
		t.Run(tc.values, func(t *testing.T) {
			manifest, err := Render(chartDir(), "userland", namespace, documented[tc.values])
			if err != nil {
				t.Fatal(err)
			}
			want := map[string][]string{}
			for role, gs := range reviewed {
				for _, g := range gs {
					if g.why == "" {
						t.Errorf("%s %q has no reason", role, g.what)
					}
					if !g.selfCerts || tc.selfCerts {
						want[role] = append(want[role], g.what)
					}
				}
				sort.Strings(want[role])
				if len(want[role]) == 0 {
					delete(want, role)
				}
			}
			objs := objects(t, manifest)
			if diff := cmp.Diff(want, grants(t, objs)); diff != "" {
				t.Errorf("shipped RBAC differs from the reviewed table (-want +got):\n%s", diff)
			}
			checkNoDangerousGrants(t, roles(t, objs))
		})
	}
}

// checkNoDangerousGrants: no wildcard, no RBAC or impersonation verbs, and
// enroll only for the controller and the gateway, never through
// aggregation into the built-in admin, edit or view.
func checkNoDangerousGrants(t *testing.T, rs []rbacObject) {
	t.Helper()
	mayEnroll := map[string]bool{"ClusterRole/userland-controller": true, "ClusterRole/userland-gateway": true}
	for _, r := range rs {
		aggregated := false
		for k := range r.labels {
			aggregated = aggregated || strings.HasPrefix(k, "rbac.authorization.k8s.io/aggregate-to-")
		}
		for _, rule := range r.rules {
			for _, v := range rule.Verbs {
				switch {
				case v == "*" || slices.Contains(rule.Resources, "*") || slices.Contains(rule.APIGroups, "*"):
					t.Errorf("%s grants a wildcard: %v", r.key, rule)
				case v == "escalate" || v == "bind" || v == "impersonate":
					t.Errorf("%s grants %s", r.key, v)
				case v == v1alpha1.VerbEnroll && (!mayEnroll[r.key] || aggregated):
					t.Errorf("%s grants %s: only the controller and the gateway may link a Userland to a course", r.key, v)
				}
			}
		}
	}
}
