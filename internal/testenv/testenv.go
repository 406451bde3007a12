// Package testenv is the tests' side of the simulated cluster: one cluster
// per test package (Run), a fresh namespace per test (Namespace), and Dex
// and a fake GitHub for sign-in tests. The cluster itself is
// internal/simcluster, which the shipped binary uses too; this package is
// imported only by tests and the benchmarks.
//
// Two modes:
//   - APIOnly: etcd and kube-apiserver with Userland's CRDs. For schema,
//     CEL, defaults, server-side apply, RBAC and webhook tests.
//   - Full: APIOnly plus kube-controller-manager, kube-scheduler and kwok
//     simulating nodes. For anything involving pods.
package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/userland-dev/userland/internal/simcluster"
)

// Mode selects which components run.
type Mode = simcluster.Mode

// The modes.
const (
	APIOnly = simcluster.APIOnly
	Full    = simcluster.Full
)

// KwokNodeAnnotation marks the nodes kwok manages.
const KwokNodeAnnotation = simcluster.KwokNodeAnnotation

// Options configure an Environment; the zero value is an API-only cluster
// with Userland's CRDs, from binaries found or built for this checkout.
type Options = simcluster.Options

// Environment is a running simulated cluster with the tests' helpers.
type Environment struct {
	*simcluster.Cluster
	managers managers
}

// Start brings up a cluster per opts, defaulting the binaries (built from
// this checkout when missing) and the CRDs (config/crd/bases). Set
// USERLAND_KEEP_TESTENV to keep its logs after Stop.
func Start(ctx context.Context, opts Options) (*Environment, error) {
	if opts.BinariesDir == "" {
		dir, err := simcluster.FindBinaries(opts.Mode, "", RepoRoot())
		if err != nil {
			return nil, err
		}
		opts.BinariesDir = dir
	}
	if len(opts.CRDDirectoryPaths) == 0 {
		opts.CRDDirectoryPaths = []string{filepath.Join(RepoRoot(), "config", "crd", "bases")}
	}
	opts.KeepDir = os.Getenv("USERLAND_KEEP_TESTENV") != ""
	c, err := simcluster.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &Environment{Cluster: c}, nil
}

// RepoRoot returns the repository root, found from this source file so that
// tests in any package locate config/ and hack/. Only tests may use it: a
// shipped binary runs far from its source.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// SnapshotModule is the Go module of the CSI volume snapshot API, which
// ships its CustomResourceDefinitions beside its types.
const SnapshotModule = "github.com/kubernetes-csi/external-snapshotter/client/v8"

// SnapshotCRDDir is the directory of the volume snapshot CRDs in the
// module cache, for tests of what Userland does with snapshots: the real
// API definitions, at the version go.mod names.
func SnapshotCRDDir() (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", SnapshotModule)
	cmd.Dir = RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating %s: %w", SnapshotModule, err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "config", "crd"), nil
}
