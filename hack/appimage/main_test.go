package main

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/userland-dev/userland/internal/image"
)

// TestPack packs a small root filesystem as hack/build-app-images.sh does
// and reads the archive back: its one layer keeps owners, modes and
// links; the configuration is image.json's; the entry beside the archive
// names the reference, the archive and the images it replaces.
func TestPack(t *testing.T) {
	dir := t.TempDir()
	layer := filepath.Join(dir, "layer.tar")
	f, err := os.Create(layer)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	for _, h := range []*tar.Header{
		{Typeflag: tar.TypeDir, Name: "./home/jovyan/", Mode: 0o755, Uid: 1000, Gid: 100},
		{Typeflag: tar.TypeReg, Name: "./usr/local/bin/start", Mode: 0o755, Size: 3},
		{Typeflag: tar.TypeSymlink, Name: "./bin", Linkname: "usr/bin", Mode: 0o777},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			_, _ = tw.Write([]byte("hi\n"))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	want := Config{
		Name: "userland.local/app", Replaces: []string{"docker.io/example/app:1"}, User: "1000:100",
		Cmd: []string{"start"}, Env: []string{"HOME=/home/jovyan"}, WorkingDir: "/home/jovyan", Packages: []string{"x"},
	}
	data, _ := json.Marshal(want)
	config := filepath.Join(dir, "image.json")
	if err := os.WriteFile(config, data, 0o644); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "app-key.tar")
	if err := pack(layer, config, "userland.local/app:key", archive); err != nil {
		t.Fatal(err)
	}

	img, layout, err := image.ReadOCIArchive(archive)
	t.Cleanup(func() { _ = os.RemoveAll(layout) })
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != "1000:100" || cfg.Config.WorkingDir != "/home/jovyan" || cfg.OS != "linux" || cfg.Architecture != "amd64" {
		t.Errorf("config: user %q, workdir %q, platform %s/%s", cfg.Config.User, cfg.Config.WorkingDir, cfg.OS, cfg.Architecture)
	}
	if diff := cmp.Diff([]string{"start"}, cfg.Config.Cmd); diff != "" {
		t.Errorf("cmd (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("HOME=/home/jovyan", cfg.Config.Env[len(cfg.Config.Env)-1]); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	got := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = fmt.Sprintf("%c %s %o %d:%d", h.Typeflag, h.Linkname, h.Mode, h.Uid, h.Gid)
	}
	wantFiles := map[string]string{
		"./home/jovyan/":        "5  755 1000:100",
		"./usr/local/bin/start": "0  755 0:0",
		"./bin":                 "2 usr/bin 777 0:0",
	}
	if diff := cmp.Diff(wantFiles, got); diff != "" {
		t.Errorf("layer (-want +got):\n%s", diff)
	}

	var entry Entry
	data, err = os.ReadFile(filepath.Join(dir, "app-key.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &entry); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Entry{Ref: "userland.local/app:key", Archive: archive, Replaces: want.Replaces}, entry); diff != "" {
		t.Errorf("entry (-want +got):\n%s", diff)
	}
}
