package simcluster

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestKubeconfigSurvivesARestart is `make dev` stopped and started again:
// a kubeconfig read before the restart reaches the restarted cluster, its
// objects kept (real etcd and kube-apiserver).
func TestKubeconfigSurvivesARestart(t *testing.T) {
	bins, err := FindBinaries(APIOnly, os.Getenv(BinariesEnvVar), FindCheckout("."))
	if err != nil {
		t.Fatalf("%v (make test provides the control plane)", err)
	}
	state := t.TempDir()
	ctx := context.Background()
	start := func() *Cluster {
		t.Helper()
		began := time.Now()
		c, err := Start(ctx, Options{Mode: APIOnly, BinariesDir: bins, StateDir: state, CRDDirectoryPaths: []string{"../../config/crd/bases"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("API server ready in %s at %s", time.Since(began).Round(time.Millisecond), c.Config.Host)
		return c
	}
	first := start()
	kubeconfig, err := os.ReadFile(first.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{}
	ns.Name = "kept"
	if err := first.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	host := first.Config.Host
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}

	second := start()
	t.Cleanup(func() { _ = second.Stop() })
	if second.Config.Host != host || second.PortMoved {
		t.Errorf("restarted at %s (moved %v), was %s", second.Config.Host, second.PortMoved, host)
	}
	// The kubeconfig read before the restart: same address, same CA, and
	// its client certificate still accepted.
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	old, err := client.New(cfg, client.Options{Scheme: second.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Get(ctx, client.ObjectKey{Name: "kept"}, &corev1.Namespace{}); err != nil {
		t.Errorf("the kubeconfig from before the restart: %v", err)
	}
}
