// Command nodeimage makes the real test node's two local images without a
// registry or a container engine (issue 34): it packs its own static binary
// (build it with CGO_ENABLED=0) into OCI archives that `ctr -n k8s.io images
// import` loads:
//   - userland.local/pause:1, the pod sandbox image (containerd's
//     sandbox_image; registry.k8s.io is unreachable here), running
//     `nodeimage pause`;
//   - userland.local/probe:1, a test pod that serves HTTP on :8080
//     (`nodeimage serve`; /healthz for probes, /dial?addr=host:port to test
//     connections from inside the pod).
//
// Usage: nodeimage pack DIR | nodeimage pause | nodeimage serve
package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/userland-dev/userland/internal/image"
)

const binPath = "/nodeimage"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: nodeimage pack DIR | pause | serve")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "pause":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
		<-c
	case "serve":
		serve()
	case "pack":
		if len(os.Args) != 3 {
			fmt.Fprintln(os.Stderr, "usage: nodeimage pack DIR")
			os.Exit(2)
		}
		if err := pack(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "nodeimage:", err)
			os.Exit(1)
		}
	default:
		fmt.Fprintln(os.Stderr, "nodeimage: unknown mode", os.Args[1])
		os.Exit(2)
	}
}

func serve() {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/dial", func(w http.ResponseWriter, r *http.Request) {
		addr := r.URL.Query().Get("addr")
		start := time.Now()
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			http.Error(w, fmt.Sprintf("refused %s after %s: %v", addr, time.Since(start).Round(time.Millisecond), err), http.StatusBadGateway)
			return
		}
		_ = c.Close()
		fmt.Fprintf(w, "reached %s in %s\n", addr, time.Since(start).Round(time.Millisecond))
	})
	mux.HandleFunc("/lookup", func(w http.ResponseWriter, r *http.Request) {
		addrs, err := net.LookupHost(r.URL.Query().Get("name"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		fmt.Fprintln(w, addrs)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h, _ := os.Hostname()
		fmt.Fprintf(w, "hello from %s\n", h)
	})
	srv := &http.Server{Addr: ":8080", Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
		<-c
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func pack(dir string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	bin, err := os.ReadFile(self)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, im := range []struct{ ref, file, mode, user string }{
		{"userland.local/pause:1", "pause.tar", "pause", "65535:65535"},
		{"userland.local/probe:1", "probe.tar", "serve", "65532:65532"},
	} {
		img, err := build(bin, im.mode, im.user)
		if err != nil {
			return err
		}
		if err := image.WriteOCIArchive(img, im.ref, filepath.Join(dir, im.file)); err != nil {
			return err
		}
		d, _ := img.Digest()
		fmt.Printf("%s: %s (%s)\n", filepath.Join(dir, im.file), im.ref, d)
	}
	return nil
}

func build(bin []byte, mode, user string) (v1.Image, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	for _, h := range []*tar.Header{
		{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777, ModTime: epoch},
		{Typeflag: tar.TypeReg, Name: binPath[1:], Mode: 0o755, Size: int64(len(bin)), ModTime: epoch},
	} {
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(bin); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	if img, err = mutate.AppendLayers(img, l); err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Created = v1.Time{Time: epoch}
	cfg.Config = v1.Config{User: user, Entrypoint: []string{binPath, mode}, Env: []string{"PATH=/"}}
	return mutate.ConfigFile(img, cfg)
}
