package simcluster

import (
	"context"
	"os"
	"runtime"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestRealNodesAPIServer is the control plane internal/realnode runs
// kubelets against: the API server on another address (in its serving
// certificate, so clients verify it), Node authorization and
// NodeRestriction (a kubelet may register its own node and no other).
func TestRealNodesAPIServer(t *testing.T) {
	if runtime.GOOS != "linux" {
		// 127.0.0.2 is a loopback address without configuration on Linux only.
		t.Skipf("SKIPPED: binding the API server to 127.0.0.2 needs Linux, not %s", runtime.GOOS)
	}
	bins, err := FindBinaries(APIOnly, os.Getenv(BinariesEnvVar), FindCheckout("."))
	if err != nil {
		t.Fatalf("%v (make test provides the control plane)", err)
	}
	ctx := context.Background()
	c, err := Start(ctx, Options{Mode: APIOnly, BinariesDir: bins, BindAddress: "127.0.0.2", RealNodes: true, CRDDirectoryPaths: []string{"../../config/crd/bases"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	}()
	if !strings.HasPrefix(c.Server(), "https://127.0.0.2:") {
		t.Errorf("Server() = %s, want https://127.0.0.2:<port>", c.Server())
	}
	cfg, err := c.ClientCertConfig("system:node:n1", "system:nodes")
	if err != nil {
		t.Fatal(err)
	}
	kubelet, err := client.New(cfg, client.Options{Scheme: c.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := kubelet.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}); err != nil {
		t.Errorf("kubelet n1 registering itself: %v", err)
	}
	if err := kubelet.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}); !apierrors.IsForbidden(err) {
		t.Errorf("kubelet n1 registering node n2: %v, want Forbidden (NodeRestriction)", err)
	}
	if err := kubelet.List(ctx, &corev1.SecretList{}, client.InNamespace("default")); !apierrors.IsForbidden(err) {
		t.Errorf("kubelet n1 listing Secrets: %v, want Forbidden (Node authorization)", err)
	}
}
