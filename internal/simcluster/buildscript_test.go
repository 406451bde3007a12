package simcluster

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// releaseMirror serves files under the official release layout (the
// Kubernetes part of it), each with its .sha256 as dl.k8s.io publishes.
func releaseMirror(t *testing.T, kubeVersion string, bodies, sums map[string][]byte) string {
	t.Helper()
	mux := http.NewServeMux()
	for name, body := range bodies {
		p := "/kube/" + kubeVersion + "/bin/linux/" + runtime.GOARCH + "/" + name
		s := sha256.Sum256(body)
		sum := []byte(hex.EncodeToString(s[:]))
		if sums[name] != nil {
			sum = sums[name]
		}
		mux.HandleFunc(p, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) })
		mux.HandleFunc(p+".sha256", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(sum) })
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/kube"
}

// runBuildScript runs hack/build-control-plane.sh into dir with the given
// release hosts and returns its stdout and stderr.
func runBuildScript(t *testing.T, dir, kubeReleases string) (string, string) {
	t.Helper()
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	cmd := exec.Command(filepath.Join(root, BuildScript), "dev")
	cmd.Env = append(os.Environ(), BinariesEnvVar+"="+dir, "USERLAND_KUBERNETES_RELEASES="+kubeReleases,
		"USERLAND_ETCD_RELEASES=http://127.0.0.1:1", "USERLAND_RELEASE_DOWNLOADS=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("build script took %s; it said:\n%s", time.Since(start).Round(time.Millisecond), stderr.String())
	if err != nil {
		t.Fatalf("build script: %v", err)
	}
	return stdout.String(), stderr.String()
}

// cacheWithout makes a cache directory holding every dev component but
// names, as stand-ins (the script only checks they are there).
func cacheWithout(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"etcd", "kwok", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok-volume-stages.yaml", "kwok-storage-class.yaml"} {
		skip := false
		for _, n := range names {
			skip = skip || n == f
		}
		if !skip {
			if err := os.WriteFile(filepath.Join(dir, f), []byte("stand-in"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// The script takes an official build whose published checksum matches,
// and says so.
func TestBuildScriptTakesVerifiedReleaseBuilds(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("official control-plane builds are published for Linux only")
	}
	k8s := submatch(t, read(t, filepath.Join("..", "..", BuildScript)), `(?m)^k8s_version=(\S+)$`)
	bodies := map[string][]byte{"kube-apiserver": []byte("official apiserver"), "kube-controller-manager": []byte("official kcm")}
	dir := cacheWithout(t, "kube-apiserver", "kube-controller-manager")
	stdout, stderr := runBuildScript(t, dir, releaseMirror(t, k8s, bodies, nil))
	if got := strings.TrimSpace(stdout); got != dir {
		t.Errorf("script printed %q, want the cache directory %q", got, dir)
	}
	for name, want := range bodies {
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes, %v; want the official build %q", name, len(got), err, want)
		}
		if !regexp.MustCompile(name + ` +downloaded and checksum-verified`).MatchString(stderr) {
			t.Errorf("the script did not report %s as verified", name)
		}
	}
	if strings.Contains(stderr, "from source") {
		t.Error("the script built something from source although everything was fetched")
	}
}

// A build whose checksum does not match is rejected, and the component is
// built from source instead: a real kube-scheduler comes out.
func TestBuildScriptRejectsAWrongChecksumAndBuildsFromSource(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("official control-plane builds are published for Linux only")
	}
	k8s := submatch(t, read(t, filepath.Join("..", "..", BuildScript)), `(?m)^k8s_version=(\S+)$`)
	tampered := map[string][]byte{"kube-scheduler": []byte("tampered")}
	wrongSum := map[string][]byte{"kube-scheduler": []byte(strings.Repeat("0", 64))}
	dir := cacheWithout(t, "kube-scheduler")
	_, stderr := runBuildScript(t, dir, releaseMirror(t, k8s, tampered, wrongSum))
	for _, want := range []string{"kube-scheduler           REJECTED the official build, checksum mismatch", "kube-scheduler           built in"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the script's report lacks %q", want)
		}
	}
	out, err := exec.Command(filepath.Join(dir, "kube-scheduler"), "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), k8s) {
		t.Errorf("kube-scheduler --version: %q, %v; want the source-built %s", out, err, k8s)
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".*"))
	if len(leftovers) > 0 {
		t.Errorf("temporary files left in the cache: %v", leftovers)
	}
}
