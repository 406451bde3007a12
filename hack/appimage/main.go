// Command appimage packs a root filesystem into an OCI image archive, without
// a registry or a container engine (issue 34): hack/build-app-images.sh
// builds each real app's root filesystem from Debian's packages (and
// code-server's npm cache) and tars it; appimage wraps that tar as the
// image's one layer, with the configuration an app's image.json gives, and
// writes an archive that `ctr -n k8s.io images import` loads.
//
// Usage:
//
//	appimage pack -layer LAYER.tar -config image.json -ref REF -out ARCHIVE.tar
//
// Beside ARCHIVE.tar it writes ARCHIVE.json, the image's entry in the
// manifest hack/build-app-images.sh prints: its local reference, the
// archive, and the public images it stands in for (Entry).
package main

import (
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/userland-dev/userland/internal/image"
)

// Config is an app's image.json: the image's run configuration and the
// public images (the samples' names) that this local build stands in for
// in the real-node tests.
type Config struct {
	// Name is the local image's name, tagged with the build's content key.
	Name string `json:"name"`
	// Replaces are the public image references this build stands in for.
	Replaces   []string `json:"replaces"`
	User       string   `json:"user"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
	Env        []string `json:"env,omitempty"`
	WorkingDir string   `json:"workingDir,omitempty"`
	// Packages are the Debian packages hack/build-app-images.sh installs.
	Packages []string `json:"packages"`
}

// Entry is one image of the manifest: the real-node tests import Archive
// and run Ref wherever a sample names one of Replaces.
type Entry struct {
	Ref      string   `json:"ref"`
	Archive  string   `json:"archive"`
	Replaces []string `json:"replaces"`
}

func main() {
	if len(os.Args) < 2 || os.Args[1] != "pack" {
		fmt.Fprintln(os.Stderr, "usage: appimage pack -layer LAYER.tar -config image.json -ref REF -out ARCHIVE.tar")
		os.Exit(2)
	}
	fs := flag.NewFlagSet("pack", flag.ExitOnError)
	layer := fs.String("layer", "", "the root filesystem as an uncompressed tar")
	config := fs.String("config", "", "the app's image.json")
	ref := fs.String("ref", "", "the image reference to tag the archive with")
	out := fs.String("out", "", "the OCI archive to write")
	_ = fs.Parse(os.Args[2:])
	if *layer == "" || *config == "" || *ref == "" || *out == "" {
		fs.Usage()
		os.Exit(2)
	}
	if err := pack(*layer, *config, *ref, *out); err != nil {
		fmt.Fprintln(os.Stderr, "appimage:", err)
		os.Exit(1)
	}
}

func pack(layerPath, configPath, ref, out string) error {
	data, err := os.ReadFile(configPath)
	if err != nil {
		return err
	}
	var c Config
	if err := json.Unmarshal(data, &c); err != nil {
		return fmt.Errorf("%s: %w", configPath, err)
	}
	// Compressed once at the fastest level: these archives are imported
	// locally, never pushed.
	l, err := tarball.LayerFromFile(layerPath, tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		return fmt.Errorf("reading the layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	if img, err = mutate.AppendLayers(img, l); err != nil {
		return fmt.Errorf("adding the layer: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Created = v1.Time{Time: time.Unix(0, 0)}
	env := append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}, c.Env...)
	cfg.Config = v1.Config{User: c.User, Entrypoint: c.Entrypoint, Cmd: c.Cmd, Env: env, WorkingDir: c.WorkingDir}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := image.WriteOCIArchive(img, ref, tmp); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	entry, err := json.MarshalIndent(Entry{Ref: ref, Archive: out, Replaces: c.Replaces}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(strings.TrimSuffix(out, ".tar")+".json", append(entry, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}
