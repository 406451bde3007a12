package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const (
	kubeVersion = "v1.37.1"
	etcdVersion = "v3.6.16"
)

var allNames = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// releaseServer mimics dl.k8s.io's and etcd's GitHub release layout, with
// faults to inject, and records which paths were asked for.
type releaseServer struct {
	*httptest.Server
	mu        sync.Mutex
	requested []string
	files     map[string][]byte
	// interrupt names paths whose body is cut off half-way.
	interrupt map[string]bool
}

func binary(name string) []byte { return []byte("#!/bin/sh\necho " + name + "\n") }

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func etcdTarball(t *testing.T, member string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	stem := "etcd-" + etcdVersion + "-linux-" + runtime.GOARCH
	for _, f := range []struct{ name, body string }{{stem + "/README.md", "etcd"}, {member, string(binary("etcd"))}, {stem + "/etcdctl", "ctl"}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o755, Size: int64(len(f.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(f.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func newReleaseServer(t *testing.T) *releaseServer {
	t.Helper()
	rs := &releaseServer{files: map[string][]byte{}, interrupt: map[string]bool{}}
	kube := "/kube/" + kubeVersion + "/bin/linux/" + runtime.GOARCH + "/"
	for _, name := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		rs.files[kube+name] = binary(name)
		// dl.k8s.io's .sha256 files hold the digest alone.
		rs.files[kube+name+".sha256"] = []byte(sum(binary(name)))
	}
	stem := "etcd-" + etcdVersion + "-linux-" + runtime.GOARCH
	tarball := etcdTarball(t, stem+"/etcd")
	rs.files["/etcd/"+etcdVersion+"/"+stem+".tar.gz"] = tarball
	rs.files["/etcd/"+etcdVersion+"/SHA256SUMS"] = fmt.Appendf(nil, "%s  etcd-%s-darwin-arm64.zip\n%s *%s.tar.gz\n",
		strings.Repeat("ab", 32), etcdVersion, sum(tarball), stem)
	rs.Server = httptest.NewServer(http.HandlerFunc(rs.serve))
	t.Cleanup(rs.Close)
	return rs
}

func (rs *releaseServer) serve(w http.ResponseWriter, r *http.Request) {
	rs.mu.Lock()
	rs.requested = append(rs.requested, r.URL.Path)
	body, ok := rs.files[r.URL.Path]
	cut := rs.interrupt[r.URL.Path]
	rs.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	if !cut {
		_, _ = w.Write(body)
		return
	}
	_, _ = w.Write(body[:len(body)/2])
	w.(http.Flusher).Flush()
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

func (rs *releaseServer) releases() []Release {
	return Releases(rs.URL+"/kube", rs.URL+"/etcd", kubeVersion, etcdVersion, "linux", runtime.GOARCH)
}

// listDir names every file in dir, temporary ones included.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

func TestRunFetchesVerifiesAndFallsBack(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("official control-plane builds are published for Linux only")
	}
	kubePath := func(name string) string { return "/kube/" + kubeVersion + "/bin/linux/" + runtime.GOARCH + "/" + name }
	tests := []struct {
		name    string
		fault   func(*releaseServer)
		present []string // already in the cache
		want    []string // in the cache afterwards
		says    []string // in the report
	}{{
		name: "every official build verified",
		want: allNames,
		says: []string{"etcd                     downloaded and checksum-verified", "kube-scheduler           downloaded and checksum-verified"},
	}, {
		name:  "a wrong checksum is rejected and left to the source build",
		fault: func(rs *releaseServer) { rs.files[kubePath("kube-scheduler")] = []byte("tampered") },
		want:  []string{"etcd", "kube-apiserver", "kube-controller-manager"},
		says:  []string{"kube-scheduler           REJECTED the official build, checksum mismatch: kube-scheduler has SHA-256 " + sum([]byte("tampered"))},
	}, {
		name: "a wrong checksum inside etcd's SHA256SUMS is rejected",
		fault: func(rs *releaseServer) {
			p := "/etcd/" + etcdVersion + "/SHA256SUMS"
			rs.files[p] = bytes.Replace(rs.files[p], []byte(sum(rs.files["/etcd/"+etcdVersion+"/etcd-"+etcdVersion+"-linux-"+runtime.GOARCH+".tar.gz"])), []byte(strings.Repeat("0", 64)), 1)
		},
		want: []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"},
		says: []string{"etcd                     REJECTED the official build"},
	}, {
		name:  "an interrupted download leaves nothing half-written and stops trying",
		fault: func(rs *releaseServer) { rs.interrupt[kubePath("kube-controller-manager")] = true },
		want:  []string{"kube-apiserver"},
		says:  []string{"could not download the official builds", "unexpected EOF", "building kube-controller-manager, kube-scheduler, etcd from source"},
	}, {
		name: "an interrupted archive leaves nothing half-written",
		fault: func(rs *releaseServer) {
			rs.interrupt["/etcd/"+etcdVersion+"/etcd-"+etcdVersion+"-linux-"+runtime.GOARCH+".tar.gz"] = true
		},
		want: []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"},
		says: []string{"could not download the official builds", "building etcd from source"},
	}, {
		name:  "a release without the file is built from source",
		fault: func(rs *releaseServer) { delete(rs.files, kubePath("kube-controller-manager")+".sha256") },
		want:  []string{"etcd", "kube-apiserver", "kube-scheduler"},
		says:  []string{"kube-controller-manager  no official build (GET ", "404 Not Found); building it from source"},
	}, {
		name:    "what the cache has is not downloaded again",
		present: []string{"etcd", "kube-apiserver"},
		want:    allNames,
		says:    []string{"kube-controller-manager  downloaded"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := newReleaseServer(t)
			if tt.fault != nil {
				tt.fault(rs)
			}
			dir := t.TempDir()
			for _, name := range tt.present {
				if err := os.WriteFile(filepath.Join(dir, name), []byte("cached"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			var out bytes.Buffer
			Run(context.Background(), newClient(), dir, rs.releases(), allNames, &out)
			t.Logf("report:\n%s", out.String())
			if diff := cmp.Diff(tt.want, listDir(t, dir)); diff != "" {
				t.Errorf("cache directory (-want +got):\n%s", diff)
			}
			for _, want := range tt.says {
				if !strings.Contains(out.String(), want) {
					t.Errorf("report lacks %q", want)
				}
			}
			for _, name := range tt.want {
				got, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				want := binary(name)
				if contains(tt.present, name) {
					want = []byte("cached")
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s holds %q, want %q", name, got, want)
				}
				if fi, _ := os.Stat(filepath.Join(dir, name)); fi.Mode().Perm()&0o100 == 0 {
					t.Errorf("%s is not executable: %v", name, fi.Mode())
				}
			}
			for _, p := range rs.requested {
				for _, name := range tt.present {
					if strings.HasSuffix(p, "/"+name) {
						t.Errorf("downloaded %s although the cache had it", p)
					}
				}
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// A machine without internet access (as CI's) must fall back at once, not
// after minutes of connection attempts.
func TestUnreachableHostsFallBackQuickly(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	_ = l.Close()
	dir := t.TempDir()
	var out bytes.Buffer
	start := time.Now()
	Run(context.Background(), newClient(), dir, Releases(closed, closed, kubeVersion, etcdVersion, "linux", "amd64"), allNames, &out)
	t.Logf("fell back after %s: %s", time.Since(start).Round(time.Millisecond), out.String())
	if got := strings.Count(out.String(), "\n"); got != 1 || !strings.Contains(out.String(), "could not download the official builds") {
		t.Errorf("report %q, want one line saying the downloads failed", out.String())
	}
	if got := listDir(t, dir); len(got) != 0 {
		t.Errorf("cache after a failed download: %v, want empty", got)
	}
}

func TestReleasesFollowTheOfficialLayout(t *testing.T) {
	got := Releases(KubernetesReleases, EtcdReleases, kubeVersion, etcdVersion, "linux", "arm64")
	want := []Release{
		{Name: "kube-apiserver", URL: "https://dl.k8s.io/release/v1.37.1/bin/linux/arm64/kube-apiserver", SumsURL: "https://dl.k8s.io/release/v1.37.1/bin/linux/arm64/kube-apiserver.sha256"},
		{Name: "kube-controller-manager", URL: "https://dl.k8s.io/release/v1.37.1/bin/linux/arm64/kube-controller-manager", SumsURL: "https://dl.k8s.io/release/v1.37.1/bin/linux/arm64/kube-controller-manager.sha256"},
		{Name: "kube-scheduler", URL: "https://dl.k8s.io/release/v1.37.1/bin/linux/arm64/kube-scheduler", SumsURL: "https://dl.k8s.io/release/v1.37.1/bin/linux/arm64/kube-scheduler.sha256"},
		{
			Name: "etcd", URL: "https://github.com/etcd-io/etcd/releases/download/v3.6.16/etcd-v3.6.16-linux-arm64.tar.gz",
			SumsURL: "https://github.com/etcd-io/etcd/releases/download/v3.6.16/SHA256SUMS", SumsEntry: "etcd-v3.6.16-linux-arm64.tar.gz",
			Member: "etcd-v3.6.16-linux-arm64/etcd",
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Releases (-want +got):\n%s", diff)
	}
	if got := Releases(KubernetesReleases, EtcdReleases, kubeVersion, etcdVersion, "darwin", "arm64"); len(got) != 0 {
		t.Errorf("macOS releases: %v, want none (Kubernetes publishes server binaries for Linux only)", got)
	}
}

func TestStaleTemporaryFilesAreRemoved(t *testing.T) {
	dir := t.TempDir()
	old, young := filepath.Join(dir, ".etcd.download-1"), filepath.Join(dir, ".etcd.download-2")
	for _, p := range []string{old, young} {
		if err := os.WriteFile(p, []byte("half"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	long := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(old, long, long); err != nil {
		t.Fatal(err)
	}
	removeStale(dir, time.Hour)
	if diff := cmp.Diff([]string{".etcd.download-2"}, listDir(t, dir)); diff != "" {
		t.Errorf("after removing stale files (-want +got):\n%s", diff)
	}
}
