package gateway_test

import (
	"context"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/gateway"
	"github.com/userland-dev/userland/internal/testenv"
)

// gatewayCache starts a cache as the gateway runs it: under the shipped
// userland-gateway role (bound to user), with CacheOptions (deep copies
// off, so a request that changed what it read would race every other
// reader), AddIndexes and every Watched informer synced. It returns the
// cache and user's client configuration.
func gatewayCache(t *testing.T, user string) (cache.Cache, *rest.Config) {
	t.Helper()
	ctx := context.Background()
	if err := env.CreateFromFile(ctx, filepath.Join(testenv.RepoRoot(), "config", "rbac", "roles.yaml")); err != nil {
		t.Fatal(err)
	}
	cfg, err := env.ConfigBoundTo(ctx, user, "userland-gateway")
	if err != nil {
		t.Fatal(err)
	}
	opts := gateway.CacheOptions()
	opts.Scheme = env.Scheme
	c, err := cache.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := gateway.AddIndexes(ctx, c); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go func() { _ = c.Start(cctx) }()
	for _, o := range gateway.Watched() {
		if _, err := c.GetInformer(ctx, o); err != nil {
			t.Fatalf("the gateway's role cannot watch %T: %v", o, err)
		}
	}
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	return c, cfg
}

// userlandUID is the UID of the Userland the API server has under the
// name: the one a request would have been authorised for.
func userlandUID(t *testing.T, ns, name string) types.UID {
	t.Helper()
	var ul v1alpha1.Userland
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &ul); err != nil {
		t.Fatal(err)
	}
	return ul.UID
}
