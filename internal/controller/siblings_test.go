package controller_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/controller"
	"github.com/userland-dev/userland/internal/templates"
)

// A rollout budget decision reads a template's environments and their
// Deployments straight from the cache's indexers where it can, and through
// the cached client where it cannot (a cache of several namespaces). Both
// read the same objects from a real API server: the template's Userlands
// only, each with the Deployment the cache shows (the controller's
// labelled ones), or none.
func TestBudgetSiblingsReadTheSameFromIndexersAndClient(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ns := env.Namespace(t)
	create(t,
		userland(ns, "ada", "ada", "lab"),
		userland(ns, "bob", "bob", "lab"),
		userland(ns, "cy", "cy", "lab"),
		userland(ns, "dee", "dee", "other"),
		budgetDeployment(ns, "ada", 1, "h1", true),
		budgetDeployment(ns, "bob", 0, "h2", true),
		// Not the controller's (no managed-by label): the cache holds
		// only labelled children, so it is not seen.
		budgetDeployment(ns, "cy", 1, "h3", false),
		budgetDeployment(ns, "dee", 1, "h4", true),
	)
	want := []controller.BudgetSibling{
		{Name: ns + "/ada", Deployment: true, Replicas: 1, Hash: "h1"},
		{Name: ns + "/bob", Deployment: true, Replicas: 0, Hash: "h2"},
		{Name: ns + "/cy"},
	}
	key := templates.Key(v1alpha1.TemplateKindTemplate, ns, "lab")
	for name, tc := range map[string]struct {
		opts        cache.Options
		wantIndexed bool
	}{
		"the manager's cache: its indexers": {opts: controller.CacheOptions(), wantIndexed: true},
		"a cache of namespaces: the client": {opts: namespaced(controller.CacheOptions(), ns), wantIndexed: false},
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
			go func() { _ = c.Start(ctx) }()
			if !c.WaitForCacheSync(ctx) {
				t.Fatal("cache did not sync")
			}
			var got []controller.BudgetSibling
			env.Eventually(t, time.Minute, "the cache to show every object", func(context.Context) (bool, error) {
				var err error
				got, err = read(key)
				sortSiblings(got)
				return cmp.Diff(want, got) == "", err
			})
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func namespaced(opts cache.Options, ns string) cache.Options {
	opts.DefaultNamespaces = map[string]cache.Config{ns: {}}
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
