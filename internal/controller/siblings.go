package controller

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// siblingReader is what a rollout budget decision reads of a template's
// environments: each one's name and its Deployment as the cache shows it
// (nil when it shows none). The Deployment is the cache's own object:
// read, never changed.
type siblingReader interface {
	siblings(ctx context.Context, templateKey string, visit func(name types.NamespacedName, dep *appsv1.Deployment) error) error
}

// clientSiblings reads through the cached client. Each object read is
// still copied (shallowly) out of the cache: List copies every Userland
// into a new slice and Get copies a Deployment, per decision and per
// sibling, which with thousands of siblings is most of a rollout's CPU.
// It is used where the cache's indexers cannot be reached.
type clientSiblings struct{ reader client.Reader }

func (c clientSiblings) siblings(ctx context.Context, templateKey string, visit func(types.NamespacedName, *appsv1.Deployment) error) error {
	var list v1alpha1.UserlandList
	if err := c.reader.List(ctx, &list, client.MatchingFields{IndexTemplateKey: templateKey}, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("listing userlands of %s: %w", templateKey, err)
	}
	// One Deployment read into, not one allocated per sibling.
	var dep appsv1.Deployment
	for i := range list.Items {
		name := client.ObjectKeyFromObject(&list.Items[i])
		dep = appsv1.Deployment{} // a reader that decodes into it must not merge
		err := c.reader.Get(ctx, name, &dep, client.UnsafeDisableDeepCopy)
		switch {
		case apierrors.IsNotFound(err):
			err = visit(name, nil)
		case err != nil:
			return fmt.Errorf("getting deployment %s: %w", name, err)
		default:
			err = visit(name, &dep)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// indexedSiblings reads the informers' indexers themselves: the cache's
// own Userlands of the template and the pointers the Deployment cache
// holds, with nothing copied per sibling.
type indexedSiblings struct {
	userlandIndex, deploymentIndex   toolscache.Indexer
	userlandSynced, deploymentSynced func() bool
}

// indexBudgetTemplate indexes Userlands by template key (the same values
// as IndexTemplateKey) in the informer's own indexer, where
// controller-runtime's field index is kept under names of its own.
const indexBudgetTemplate = "userland.dev/budget-template"

// errSiblingsNotSynced refuses a decision before the caches hold every
// object: an empty cache would count no sibling unavailable. (The cached
// client waits for the sync instead; a reconcile runs only after it.)
var errSiblingsNotSynced = errors.New("the userland and deployment caches have not synced")

func (x indexedSiblings) siblings(_ context.Context, templateKey string, visit func(types.NamespacedName, *appsv1.Deployment) error) error {
	if !x.userlandSynced() || !x.deploymentSynced() {
		return errSiblingsNotSynced
	}
	// ByIndex, not IndexKeys: IndexKeys sorts the keys, under the
	// indexer's lock, on every decision.
	objs, err := x.userlandIndex.ByIndex(indexBudgetTemplate, templateKey)
	if err != nil {
		return fmt.Errorf("listing userlands of %s: %w", templateKey, err)
	}
	for _, obj := range objs {
		ul, ok := obj.(*v1alpha1.Userland)
		if !ok {
			return fmt.Errorf("listing userlands of %s: the cache holds a %T", templateKey, obj)
		}
		// A Userland's key is its Deployment's.
		var dep *appsv1.Deployment
		key := ul.Namespace + "/" + ul.Name
		if obj, exists, err := x.deploymentIndex.GetByKey(key); err != nil {
			return fmt.Errorf("getting deployment %s: %w", key, err)
		} else if exists {
			if dep, ok = obj.(*appsv1.Deployment); !ok {
				return fmt.Errorf("getting deployment %s: the cache holds a %T", key, obj)
			}
		}
		if err := visit(types.NamespacedName{Namespace: ul.Namespace, Name: ul.Name}, dep); err != nil {
			return err
		}
	}
	return nil
}

// newSiblingReader reads the informers of c directly where it can (a
// cache of one informer per kind, as the manager's is) and through reader
// otherwise (a cache of several namespaces, say). It adds its index to the
// Userland informer, so it is called before the cache starts.
func newSiblingReader(ctx context.Context, c cache.Informers, reader client.Reader) (siblingReader, error) {
	fallback := clientSiblings{reader: reader}
	type indexed interface{ GetIndexer() toolscache.Indexer }
	uls, err := c.GetInformer(ctx, &v1alpha1.Userland{})
	if err != nil {
		return nil, fmt.Errorf("getting the userland informer: %w", err)
	}
	deps, err := c.GetInformer(ctx, &appsv1.Deployment{})
	if err != nil {
		return nil, fmt.Errorf("getting the deployment informer: %w", err)
	}
	ulIndexed, ok1 := uls.(indexed)
	depIndexed, ok2 := deps.(indexed)
	if !ok1 || !ok2 {
		return fallback, nil
	}
	err = uls.AddIndexers(toolscache.Indexers{indexBudgetTemplate: func(obj any) ([]string, error) {
		ul, ok := obj.(*v1alpha1.Userland)
		if !ok {
			return nil, nil
		}
		return IndexUserlandByTemplate(ul), nil
	}})
	if err != nil {
		return nil, fmt.Errorf("indexing userlands by template for rollout budgets: %w", err)
	}
	return indexedSiblings{userlandIndex: ulIndexed.GetIndexer(), deploymentIndex: depIndexed.GetIndexer(),
		userlandSynced: uls.HasSynced, deploymentSynced: deps.HasSynced}, nil
}
