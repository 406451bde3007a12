package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/controller"
	"github.com/userland-dev/userland/internal/templates"
	"github.com/userland-dev/userland/internal/testobj"
)

// A rollout budget decision reads a template's environments and their
// Deployments straight from the cache's indexers where it can, and through
// the cached client where it cannot (a cache of several namespaces). Both
// read the same objects from a real API server: the template's Userlands
// only (a ClusterTemplate's in every namespace; none deleted), each with
// the Deployment the cache shows (the controller's labelled ones), or
// none.
func TestBudgetSiblingsReadTheSameFromIndexersAndClient(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ns, ns2 := env.Namespace(t), env.Namespace(t)
	shared := ns + "-shared" // a ClusterTemplate's name of this test alone
	gone := userland(ns, "gus", "gus", "lab")
	create(t,
		userland(ns, "ada", "ada", "lab"),
		userland(ns, "bob", "bob", "lab"),
		userland(ns, "cy", "cy", "lab"),
		gone,
		userland(ns2, "ada", "ada", "lab"), // the same template's name, another namespace's template
		testobj.MakeUserland(ns, "eve", "eve", shared).ClusterTemplate().Obj(),
		testobj.MakeUserland(ns2, "fay", "fay", shared).ClusterTemplate().Obj(),
		budgetDeployment(ns, "ada", 1, "h1", true),
		budgetDeployment(ns, "bob", 0, "h2", true),
		// Not the controller's (no managed-by label): the cache holds
		// only labelled children, so it is not seen.
		budgetDeployment(ns, "cy", 1, "h3", false),
		budgetDeployment(ns, "gus", 1, "h4", true),
		budgetDeployment(ns2, "ada", 1, "h5", true),
		budgetDeployment(ns2, "fay", 1, "h6", true),
	)
	if err := env.Client.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	want := map[string][]controller.BudgetSibling{
		templates.Key(v1alpha1.TemplateKindTemplate, ns, "lab"): {
			{Name: ns + "/ada", Deployment: true, Replicas: 1, Hash: "h1"},
			{Name: ns + "/bob", Deployment: true, Replicas: 0, Hash: "h2"},
			{Name: ns + "/cy"},
		},
		templates.Key(v1alpha1.TemplateKindTemplate, ns2, "lab"): {
			{Name: ns2 + "/ada", Deployment: true, Replicas: 1, Hash: "h5"},
		},
		templates.Key(v1alpha1.TemplateKindClusterTemplate, "", shared): {
			{Name: ns + "/eve"},
			{Name: ns2 + "/fay", Deployment: true, Replicas: 1, Hash: "h6"},
		},
		templates.Key(v1alpha1.TemplateKindTemplate, ns, "none"): nil,
	}
	for _, siblings := range want {
		sortSiblings(siblings) // the namespaces' names are random
	}
	for name, tc := range map[string]struct {
		opts        cache.Options
		wantIndexed bool
	}{
		"the manager's cache: its indexers": {opts: controller.CacheOptions(), wantIndexed: true},
		"a cache of namespaces: the client": {opts: namespaced(controller.CacheOptions(), ns, ns2), wantIndexed: false},
	} {
		t.Run(name, func(t *testing.T) {
			tc.opts.Scheme = env.Client.Scheme()
			c, err := cache.New(controllerConfig(t), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.IndexField(ctx, &v1alpha1.Userland{}, controller.IndexTemplateKey, controller.IndexUserlandByTemplate); err != nil {
				t.Fatal(err)
			}
			reader, err := client.New(controllerConfig(t), client.Options{Scheme: env.Client.Scheme(), Cache: &client.CacheOptions{Reader: c}})
			if err != nil {
				t.Fatal(err)
			}
			indexed, read, err := controller.BudgetSiblings(ctx, c, reader)
			if err != nil {
				t.Fatal(err)
			}
			if indexed != tc.wantIndexed {
				t.Fatalf("read from the indexers: %v, want %v", indexed, tc.wantIndexed)
			}
			if indexed {
				if _, err := read(shared); err == nil {
					t.Error("read before the caches synced: no error, want one (an empty cache counts no sibling)")
				}
			}
			go func() { _ = c.Start(ctx) }()
			if !c.WaitForCacheSync(ctx) {
				t.Fatal("cache did not sync")
			}
			got := map[string][]controller.BudgetSibling{}
			env.Eventually(t, time.Minute, "the cache to show every object", func(context.Context) (bool, error) {
				for key := range want {
					siblings, err := read(key)
					if err != nil {
						return false, err
					}
					sortSiblings(siblings)
					got[key] = siblings
				}
				// Not an error to stop on: what a timeout reports it last saw.
				if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
					return false, fmt.Errorf("(-want +got):\n%s", diff)
				}
				return true, nil
			})
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func namespaced(opts cache.Options, namespaces ...string) cache.Options {
	opts.DefaultNamespaces = map[string]cache.Config{}
	for _, ns := range namespaces {
		opts.DefaultNamespaces[ns] = cache.Config{}
	}
	return opts
}

func sortSiblings(s []controller.BudgetSibling) {
	slices.SortFunc(s, func(a, b controller.BudgetSibling) int { return strings.Compare(a.Name, b.Name) })
}

// budgetDeployment is a Deployment named for a Userland, with the pod
// template hash a budget decision reads, labelled as the controller's or
// not.
func budgetDeployment(ns, name string, replicas int32, hash string, managed bool) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	meta := metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{}}
	if managed {
		meta.Labels[v1alpha1.LabelManagedBy] = v1alpha1.ManagedByValue
	}
	return &appsv1.Deployment{
		ObjectMeta: meta,
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{controller.AnnotationTemplateHash: hash}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "example.org/app:1"}}},
			},
		},
	}
}
