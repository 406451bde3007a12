//go:build realnode

// The real-node tests (make test-node): Linux and root only, with the
// parts hack/build-control-plane.sh and hack/build-node.sh cache. They
// skip, saying why, where a node cannot run at all (not Linux, not root),
// and fail when the machine could run one but a part is missing: a
// missing part must never pass for a skip.
package realnode_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/userland-dev/userland/internal/realnode"
	"github.com/userland-dev/userland/internal/testenv"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		os.Exit(crashChild())
	}
	// The controller's logs at error level, as in every other suite.
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	code := m.Run()
	if images.dir != "" {
		_ = os.RemoveAll(images.dir)
	}
	os.Exit(code)
}

// The images every node imports: userland.local/pause:1 (the sandbox) and
// userland.local/probe:1 (HTTP on :8080: /healthz, /dial?addr=,
// /lookup?name=), packed by hack/nodeimage.
const probeImage = "userland.local/probe:1"

var images struct {
	once  sync.Once
	dir   string // made by this process, removed after the tests
	paths []string
	err   error
}

// packImages builds hack/nodeimage and packs its two archives, once per
// test binary, into a directory that outlives the test (the crash test's
// child imports them too).
func packImages() ([]string, error) {
	images.once.Do(func() {
		if dir := os.Getenv(imagesEnv); dir != "" {
			images.paths = []string{filepath.Join(dir, "pause.tar"), filepath.Join(dir, "probe.tar")}
			return
		}
		dir, err := os.MkdirTemp("", "userland-realnode-images-")
		if err != nil {
			images.err = err
			return
		}
		images.dir = dir
		bin := filepath.Join(dir, "nodeimage")
		build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./hack/nodeimage")
		build.Dir = testenv.RepoRoot()
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			images.err = fmt.Errorf("building hack/nodeimage: %w: %s", err, out)
			return
		}
		if out, err := exec.Command(bin, "pack", dir).CombinedOutput(); err != nil {
			images.err = fmt.Errorf("packing the node images: %w: %s", err, out)
			return
		}
		images.paths = []string{filepath.Join(dir, "pause.tar"), filepath.Join(dir, "probe.tar")}
	})
	return images.paths, images.err
}

const imagesEnv = "USERLAND_REALNODE_IMAGES"

// nodeOptions are the node's parts, or the test stops: skipped where no
// node can run, failed where one could but a part is missing.
func nodeOptions(t testing.TB) realnode.Options {
	t.Helper()
	if err := realnode.Supported(); err != nil {
		t.Skipf("SKIPPED, NOT RUN: %v. make test-node needs Linux and root; nothing about the real node was tested", err)
	}
	var missing []string
	cp, node := os.Getenv("USERLAND_CONTROL_PLANE_DIR"), os.Getenv("USERLAND_NODE_DIR")
	if cp == "" {
		missing = append(missing, "USERLAND_CONTROL_PLANE_DIR (hack/build-control-plane.sh prints it)")
	}
	if node == "" {
		missing = append(missing, "USERLAND_NODE_DIR (hack/build-node.sh prints it)")
	}
	if len(missing) > 0 {
		t.Fatalf("this machine can run a real node, but the test was not told where its parts are: set %s, or run make test-node", strings.Join(missing, " and "))
	}
	start := time.Now()
	imgs, err := packImages()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node images ready in %s", time.Since(start).Round(10*time.Millisecond))
	return realnode.Options{
		NodeBinariesDir:   node,
		ControlPlaneDir:   cp,
		CRDDirectoryPaths: []string{filepath.Join(testenv.RepoRoot(), "config", "crd", "bases")},
		Images:            imgs,
		Logf:              t.Logf,
		// Another checkout's make test-node may hold the machine's one
		// node for a few minutes.
		LockWait: 15 * time.Minute,
	}
}

// startNode brings a node up for the test and tears it down after,
// checking that nothing is left. extraImages are OCI archives imported
// beside the node's own (the apps' images, say).
func startNode(t *testing.T, extraImages ...string) *realnode.Node {
	t.Helper()
	opts := nodeOptions(t)
	opts.Images = append(opts.Images, extraImages...)
	return startNodeWith(t, opts)
}

// startNodeWith is startNode with opts from nodeOptions, changed.
func startNodeWith(t *testing.T, opts realnode.Options) *realnode.Node {
	t.Helper()
	// Importing an app's image (hundreds of MB) takes up to a minute or
	// two on a loaded machine, inside Start's time.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute+time.Duration(len(opts.Images))*time.Minute)
	defer cancel()
	start := time.Now()
	n, err := realnode.Start(ctx, opts)
	if err != nil {
		t.Fatalf("starting the real node: %v", err)
	}
	t.Logf("TIMING node Ready, with its firewall and cluster DNS, after %s (the steps are logged above)", time.Since(start).Round(10*time.Millisecond))
	t.Cleanup(func() {
		// The node's parts run with least-privilege identities: a refusal
		// in their logs means a ClusterRole lacks something they use.
		logs, _ := filepath.Glob(filepath.Join(n.StateDir, "pod-logs", "kube-system_coredns_*", "coredns", "*.log"))
		for _, name := range []string{"kubelet", "kube-proxy", "kube-router", "coredns"} {
			path := filepath.Join(n.StateDir, "logs", name+".log")
			if name == "coredns" {
				if len(logs) == 0 {
					t.Errorf("no log of the CoreDNS pod under %s", filepath.Join(n.StateDir, "pod-logs"))
					continue
				}
				path = logs[0]
			}
			data, _ := os.ReadFile(path)
			for _, line := range strings.Split(string(data), "\n") {
				// "no relationship found" is the Node authorizer's graph
				// lagging a pod's binding by a moment (upstream's kubelets
				// log it too), not a permission the kubelet lacks.
				if (strings.Contains(line, "is forbidden") || strings.Contains(line, "Forbidden")) && !strings.Contains(line, "no relationship found between node") {
					t.Errorf("%s was refused something its identity should allow: %s", name, line)
					break
				}
			}
		}
		if t.Failed() {
			t.Logf("the node's logs are kept in %s", n.KeepLogs())
		}
		start := time.Now()
		if err := n.Stop(); err != nil {
			t.Errorf("stopping the node: %v", err)
		}
		t.Logf("TIMING node stopped and torn down in %s", time.Since(start).Round(10*time.Millisecond))
		if left := realnode.Leftovers(n.StateDir); len(left) > 0 {
			t.Errorf("left after the teardown:\n  %s", strings.Join(left, "\n  "))
		}
	})
	return n
}

// waitServiceAccount waits until the ServiceAccount ns/name exists (the
// controller-manager creates each namespace's default one).
func waitServiceAccount(ctx context.Context, t *testing.T, n *realnode.Node, ns, name string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := n.Cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.ServiceAccount{})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ServiceAccount %s/%s: %v", ns, name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
