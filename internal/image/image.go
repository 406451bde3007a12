// Package image builds Userland's container image without a container
// engine, with github.com/google/go-containerregistry: a scratch base, the
// static binary, CA certificates (the gateway talks HTTPS to identity
// providers), a non-root user, and OCI labels. The result is an OCI image
// layout in a tar file (an "oci-archive"), which `crane push`,
// `skopeo copy oci-archive:…` and `podman load` accept.
package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Image facts the tests and the Dockerfile share.
const (
	// BinaryPath is where the binary lives in the image.
	BinaryPath = "/usr/local/bin/userland"
	// CertsPath is the CA bundle's path (Debian's, which Go looks in).
	CertsPath = "/etc/ssl/certs/ca-certificates.crt"
	// User is the non-root user and group, distroless's "nonroot".
	User = "65532:65532"
	// Source is the repository, for the OCI source label.
	Source = "https://github.com/userland-dev/userland"
	// License is the SPDX licence, for the OCI licenses label.
	License = "Apache-2.0"
)

// Options say what goes in.
type Options struct {
	// Binary is a statically linked linux/amd64 (or Arch) userland binary.
	Binary string
	// CACertificates is a PEM bundle (the build machine's by default).
	CACertificates string
	// Version and Revision label the image.
	Version, Revision string
	// Arch is the image's architecture (amd64).
	Arch string
	// Created is the image's creation time; fixed for reproducible builds.
	Created time.Time
}

type file struct {
	name string
	mode int64
	data []byte
}

// layer makes one uncompressed-tar layer with OCI media type.
func layer(files []file, created time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range files {
		// Parent directories first, as image tools expect.
		var parents []string
		for d := filepath.Dir(f.name); d != "/" && d != "."; d = filepath.Dir(d) {
			parents = append([]string{d}, parents...)
		}
		for _, d := range parents {
			if dirs[d] {
				continue
			}
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d[1:] + "/", Mode: 0o755, ModTime: created}); err != nil {
				return nil, err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name[1:], Mode: f.mode, Size: int64(len(f.data)), ModTime: created}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// Build assembles the image.
func Build(opts Options) (v1.Image, error) {
	if opts.Arch == "" {
		opts.Arch = "amd64"
	}
	if opts.CACertificates == "" {
		opts.CACertificates = CertsPath
	}
	binary, err := os.ReadFile(opts.Binary)
	if err != nil {
		return nil, fmt.Errorf("reading the binary: %w", err)
	}
	certs, err := os.ReadFile(opts.CACertificates)
	if err != nil {
		return nil, fmt.Errorf("reading CA certificates (install Debian's ca-certificates): %w", err)
	}
	// The base layer changes rarely (certificates, users); the binary
	// changes every build, so it is its own layer.
	base, err := layer([]file{
		{name: CertsPath, mode: 0o644, data: certs},
		{name: "/etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "/etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{name: "/home/nonroot/.keep", mode: 0o644},
		{name: "/tmp/.keep", mode: 0o644},
	}, opts.Created)
	if err != nil {
		return nil, fmt.Errorf("building the base layer: %w", err)
	}
	bin, err := layer([]file{{name: BinaryPath, mode: 0o755, data: binary}}, opts.Created)
	if err != nil {
		return nil, fmt.Errorf("building the binary layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	if img, err = mutate.AppendLayers(img, base, bin); err != nil {
		return nil, fmt.Errorf("adding layers: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", opts.Arch
	cfg.Created = v1.Time{Time: opts.Created}
	cfg.Config = v1.Config{
		User:       User,
		Entrypoint: []string{BinaryPath},
		WorkingDir: "/home/nonroot",
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=" + CertsPath, "HOME=/home/nonroot"},
		Labels: map[string]string{
			"org.opencontainers.image.title":       "userland",
			"org.opencontainers.image.description": "Per-user browser environments on Kubernetes: controller, gateway and dashboard",
			"org.opencontainers.image.version":     opts.Version,
			"org.opencontainers.image.revision":    opts.Revision,
			"org.opencontainers.image.source":      Source,
			"org.opencontainers.image.licenses":    License,
		},
	}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return nil, fmt.Errorf("setting the configuration: %w", err)
	}
	return img, nil
}

// WriteOCIArchive writes img as an OCI image layout in a tar file, tagged
// ref (e.g. ghcr.io/userland-dev/userland:v0.1.0) in its index annotations.
func WriteOCIArchive(img v1.Image, ref, path string) error {
	dir, err := os.MkdirTemp("", "userland-image-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("creating the OCI layout: %w", err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
		return fmt.Errorf("writing the image: %w", err)
	}
	return tarDir(dir, path)
}

// tarDir packs dir's files into a tar at path.
func tarDir(dir, path string) error {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(out)
	err = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if info.IsDir() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		_ = out.Close()
		return fmt.Errorf("packing %s: %w", path, err)
	}
	if err := tw.Close(); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// ReadOCIArchive opens an archive written by WriteOCIArchive; the caller
// removes the returned directory.
func ReadOCIArchive(path string) (v1.Image, string, error) {
	dir, err := os.MkdirTemp("", "userland-image-read-")
	if err != nil {
		return nil, "", err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, dir, err
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, dir, fmt.Errorf("reading %s: %w", path, err)
		}
		target := filepath.Join(dir, filepath.Clean("/"+hdr.Name))
		if hdr.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(target, 0o755); err != nil {
				return nil, dir, err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return nil, dir, err
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, dir, err
		}
		if err := os.WriteFile(target, data, 0o644); err != nil {
			return nil, dir, err
		}
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, dir, fmt.Errorf("opening the OCI layout: %w", err)
	}
	manifest, err := idx.IndexManifest()
	if err != nil {
		return nil, dir, err
	}
	if len(manifest.Manifests) != 1 {
		return nil, dir, fmt.Errorf("the archive holds %d images, want 1", len(manifest.Manifests))
	}
	img, err := idx.Image(manifest.Manifests[0].Digest)
	return img, dir, err
}
