// Command fetchrelease downloads the official builds of the pinned
// Kubernetes and etcd versions into the control-plane cache, verifying each
// against the SHA-256 its release publishes. hack/build-control-plane.sh
// runs it first and builds from source whatever it did not fetch, so it
// never fails a build: an unreachable host, a missing file or a wrong
// checksum are reported on stderr and leave the component to the source
// build.
//
// Usage: fetchrelease -dir DIR -kubernetes VERSION -etcd VERSION NAME...
//
// The release hosts can be replaced (a mirror, or a test's server) with
// $USERLAND_KUBERNETES_RELEASES and $USERLAND_ETCD_RELEASES;
// $USERLAND_RELEASE_DOWNLOADS=off skips downloading altogether.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Defaults for the release hosts.
const (
	KubernetesReleases = "https://dl.k8s.io/release"
	EtcdReleases       = "https://github.com/etcd-io/etcd/releases/download"
)

func main() {
	dir := flag.String("dir", "", "the control-plane cache directory")
	kube := flag.String("kubernetes", "", "Kubernetes version, e.g. v1.37.1")
	etcd := flag.String("etcd", "", "etcd version, e.g. v3.6.16")
	flag.Parse()
	if *dir == "" || *kube == "" || *etcd == "" {
		flag.Usage()
		os.Exit(2)
	}
	if os.Getenv("USERLAND_RELEASE_DOWNLOADS") == "off" {
		return
	}
	releases := Releases(envOr("USERLAND_KUBERNETES_RELEASES", KubernetesReleases), envOr("USERLAND_ETCD_RELEASES", EtcdReleases),
		*kube, *etcd, runtime.GOOS, runtime.GOARCH)
	Run(context.Background(), newClient(), *dir, releases, flag.Args(), os.Stderr)
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

// newClient fails fast on a host that cannot be reached (a machine without
// internet access should fall back to the source build in seconds) but
// lets a slow, working download take its time.
func newClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
	}}
}

// Run fetches each of want that releases offers and dir lacks, reporting a
// line per component to out. After the first network failure it stops
// trying (the same hosts serve the rest) and says so once.
func Run(ctx context.Context, c *http.Client, dir string, releases []Release, want []string, out io.Writer) {
	removeStale(dir, time.Hour)
	var todo []Release
	for _, r := range releases {
		if slices.Contains(want, r.Name) && !exists(filepath.Join(dir, r.Name)) {
			todo = append(todo, r)
		}
	}
	if len(todo) == 0 {
		if len(releases) == 0 && len(want) > 0 {
			_, _ = fmt.Fprintf(out, "control plane: no official builds for %s/%s are published; building from source\n", runtime.GOOS, runtime.GOARCH)
		}
		return
	}
	for _, r := range todo {
		start := time.Now()
		fctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		err := Fetch(fctx, c, dir, r)
		cancel()
		took := time.Since(start).Round(100 * time.Millisecond)
		switch {
		case err == nil:
			_, _ = fmt.Fprintf(out, "control plane: %-24s downloaded and checksum-verified in %s\n", r.Name, took)
		case errors.Is(err, errChecksum):
			_, _ = fmt.Fprintf(out, "control plane: %-24s REJECTED the official build, %v; building it from source\n", r.Name, err)
		case unreachable(err):
			var rest []string
			for _, left := range todo[slices.Index(todo, r):] {
				rest = append(rest, left.Name)
			}
			_, _ = fmt.Fprintf(out, "control plane: could not download the official builds (%v); building %s from source\n", err, strings.Join(rest, ", "))
			return
		default:
			_, _ = fmt.Fprintf(out, "control plane: %-24s no official build (%v); building it from source\n", r.Name, err)
		}
	}
}

// unreachable reports whether err means the host, rather than one file,
// is out of reach.
func unreachable(err error) bool {
	// net.Error covers refused connections, DNS failures and timeouts.
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// removeStale deletes temporary files a killed run left behind. Only old
// ones: a concurrent run's files in progress are young.
func removeStale(dir string, age time.Duration) {
	for _, pattern := range []string{".*.download-*", ".*.archive-*"} {
		matches, _ := filepath.Glob(filepath.Join(dir, pattern))
		for _, m := range matches {
			if fi, err := os.Stat(m); err == nil && time.Since(fi.ModTime()) > age {
				_ = os.Remove(m)
			}
		}
	}
}
