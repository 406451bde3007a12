package image

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/userland-dev/userland/internal/testenv"
)

// TestImageArchive builds the real static binary and image, then opens the
// archive with the same library and checks what a cluster will run.
func TestImageArchive(t *testing.T) {
	dir := t.TempDir()
	binary := filepath.Join(dir, "userland")
	build := exec.Command("go", "build", "-trimpath", "-o", binary, "./cmd/userland")
	build.Dir = testenv.RepoRoot()
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the static binary: %v\n%s", err, out)
	}
	img, err := Build(Options{Binary: binary, Version: "v1.2.3", Revision: "abc123", Created: time.Unix(0, 0).UTC()})
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "userland-image.tar")
	if err := WriteOCIArchive(img, "ghcr.io/userland-dev/userland:v1.2.3", archive); err != nil {
		t.Fatal(err)
	}

	got, layoutDir, err := ReadOCIArchive(archive)
	t.Cleanup(func() { _ = os.RemoveAll(layoutDir) })
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := got.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != "65532:65532" {
		t.Errorf("user %q, want the non-root 65532:65532", cfg.Config.User)
	}
	if diff := cmp.Diff([]string{"/usr/local/bin/userland"}, cfg.Config.Entrypoint); diff != "" {
		t.Errorf("entrypoint (-want +got):\n%s", diff)
	}
	if cfg.OS != "linux" || cfg.Architecture != "amd64" {
		t.Errorf("platform %s/%s", cfg.OS, cfg.Architecture)
	}
	wantLabels := map[string]string{
		"org.opencontainers.image.version":  "v1.2.3",
		"org.opencontainers.image.revision": "abc123",
		"org.opencontainers.image.source":   "https://github.com/userland-dev/userland",
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
	for k, v := range wantLabels {
		if cfg.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, cfg.Config.Labels[k], v)
		}
	}
	if mt, _ := got.MediaType(); !strings.Contains(string(mt), "oci") {
		t.Errorf("manifest media type %s, want OCI", mt)
	}

	// The files, as the container runtime will unpack them.
	files := map[string]*tar.Header{}
	contents := map[string][]byte{}
	layers, err := got.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			files["/"+h.Name] = h
			contents["/"+h.Name], _ = io.ReadAll(tr)
		}
		_ = rc.Close()
	}
	bin, ok := files["/usr/local/bin/userland"]
	if !ok || bin.Mode&0o111 == 0 {
		t.Fatalf("the binary is missing or not executable: %+v", bin)
	}
	exe, err := elf.NewFile(bytes.NewReader(contents["/usr/local/bin/userland"]))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range exe.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary is dynamically linked; a scratch image has no loader")
		}
	}
	if certs := contents["/etc/ssl/certs/ca-certificates.crt"]; !bytes.Contains(certs, []byte("BEGIN CERTIFICATE")) {
		t.Error("no CA certificates in the image")
	}
	if !strings.Contains(string(contents["/etc/passwd"]), "nonroot:x:65532:65532") {
		t.Error("/etc/passwd lacks the nonroot user")
	}
}
