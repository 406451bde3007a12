package simcluster

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// CacheName must name the directory hack/build-control-plane.sh builds
// into, or a binary run outside a checkout would miss its control plane.
func TestCacheNameMatchesTheBuildScript(t *testing.T) {
	root := filepath.Join("..", "..")
	script := read(t, filepath.Join(root, BuildScript))
	k8s := submatch(t, script, `(?m)^k8s_version=(\S+)$`)
	revision := submatch(t, script, `(?m)^harness_revision=(\S+)$`)
	etcd := submatch(t, read(t, filepath.Join(root, "hack", "tools", "etcd", "go.mod")), `go\.etcd\.io/etcd/server/v3 (\S+)`)
	kwok := submatch(t, read(t, filepath.Join(root, "hack", "tools", "kwok", "go.mod")), `sigs\.k8s\.io/kwok (\S+)`)
	want := "k8s-" + k8s + "-etcd-" + etcd + "-kwok-" + kwok + "-r" + revision
	if CacheName != want {
		t.Errorf("CacheName = %q, but the build script builds into %q", CacheName, want)
	}
}

func TestFindBinariesSaysWhatToRunWhenThereAreNone(t *testing.T) {
	t.Setenv(BinariesEnvVar, "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	empty := t.TempDir()
	_, err := FindBinaries(Full, empty, "")
	if err == nil {
		t.Fatal("found binaries in empty directories")
	}
	for _, want := range []string{"make control-plane", "--control-plane-dir", empty, "kube-scheduler"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	for _, name := range binaryNames[Full] {
		if err := os.WriteFile(filepath.Join(empty, name), nil, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := FindBinaries(Full, empty, ""); err != nil || got != empty {
		t.Errorf("with every binary present: %q, %v; want %q", got, err, empty)
	}
}

func TestFindCheckoutWalksUpToTheRepository(t *testing.T) {
	wd, _ := os.Getwd()
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	if got := FindCheckout(wd); got != root {
		t.Errorf("FindCheckout(%s) = %q, want %q", wd, got, root)
	}
	if got := FindCheckout(t.TempDir()); got != "" {
		t.Errorf("FindCheckout(a temporary directory) = %q, want none", got)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func submatch(t *testing.T, s, pattern string) string {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("%s not found", pattern)
	}
	return m[1]
}
