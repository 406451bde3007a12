package main

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// maxDownload bounds one file: the largest control-plane binary is about
// 100 MB, so a server streaming without end fills no disk.
const maxDownload = 512 << 20

// errChecksum marks a download whose digest differs from the published
// one. Unlike an unreachable host it is worth reporting loudly: either the
// release was replaced or something between here and it altered the file.
var errChecksum = errors.New("checksum mismatch")

// Release says where one component's official build and its published
// checksum live, and how to take the binary out of what is downloaded.
type Release struct {
	Name string
	// URL is the file to download.
	URL string
	// SumsURL is the published checksum: a file holding the hex digest
	// alone (Kubernetes) or sha256sum lines naming SumsEntry (etcd).
	SumsURL   string
	SumsEntry string
	// Member, when set, is the binary's path inside a .tar.gz at URL.
	Member string
}

// Releases lists the official builds of the pinned versions for goos and
// goarch. Kubernetes publishes server binaries for Linux only and etcd
// tarballs for Linux only (zips elsewhere), so other systems get none and
// build from source. kwok publishes no checksums and Dex no binaries, so
// neither is listed.
func Releases(kubeBase, etcdBase, kubeVersion, etcdVersion, goos, goarch string) []Release {
	if goos != "linux" {
		return nil
	}
	var out []Release
	for _, name := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		u := fmt.Sprintf("%s/%s/bin/%s/%s/%s", strings.TrimSuffix(kubeBase, "/"), kubeVersion, goos, goarch, name)
		out = append(out, Release{Name: name, URL: u, SumsURL: u + ".sha256"})
	}
	stem := fmt.Sprintf("etcd-%s-%s-%s", etcdVersion, goos, goarch)
	dir := fmt.Sprintf("%s/%s", strings.TrimSuffix(etcdBase, "/"), etcdVersion)
	out = append(out, Release{
		Name: "etcd", URL: dir + "/" + stem + ".tar.gz",
		SumsURL: dir + "/SHA256SUMS", SumsEntry: stem + ".tar.gz", Member: stem + "/etcd",
	})
	return out
}

// Fetch downloads r into dir/r.Name when its SHA-256 matches the published
// one. The file appears under its final name only once verified and
// complete (written to a temporary name and renamed), so an interrupted or
// rejected download leaves nothing a later run would take for a binary.
func Fetch(ctx context.Context, c *http.Client, dir string, r Release) error {
	want, err := publishedSum(ctx, c, r)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+r.Name+".download-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // a no-op after the rename
	defer func() { _ = tmp.Close() }()

	body, err := get(ctx, c, r.URL)
	if err != nil {
		return err
	}
	defer func() { _ = body.Close() }()
	sum := sha256.New()
	archive := tmp
	if r.Member != "" {
		// The archive is checked whole before anything is taken out of it.
		if archive, err = os.CreateTemp(dir, "."+r.Name+".archive-*"); err != nil {
			return err
		}
		defer func() { _ = os.Remove(archive.Name()) }()
		defer func() { _ = archive.Close() }()
	}
	n, err := io.Copy(io.MultiWriter(archive, sum), io.LimitReader(body, maxDownload+1))
	if err != nil {
		return fmt.Errorf("downloading %s: %w", r.URL, err)
	}
	if n > maxDownload {
		return fmt.Errorf("downloading %s: larger than %d MiB", r.URL, maxDownload>>20)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != want {
		return fmt.Errorf("%w: %s has SHA-256 %s, the release publishes %s", errChecksum, path.Base(r.URL), got, want)
	}
	if r.Member != "" {
		if _, err := archive.Seek(0, io.SeekStart); err != nil {
			return err
		}
		if err := extract(archive, r.Member, tmp); err != nil {
			return fmt.Errorf("%s: %w", path.Base(r.URL), err)
		}
	}
	if err := tmp.Chmod(0o755); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, r.Name))
}

// publishedSum reads the release's checksum for r.
func publishedSum(ctx context.Context, c *http.Client, r Release) (string, error) {
	body, err := get(ctx, c, r.SumsURL)
	if err != nil {
		return "", err
	}
	defer func() { _ = body.Close() }()
	s := bufio.NewScanner(io.LimitReader(body, 1<<20))
	for s.Scan() {
		fields := strings.Fields(s.Text())
		switch {
		case len(fields) == 0:
			continue
		case r.SumsEntry == "" && len(fields) == 1,
			r.SumsEntry != "" && len(fields) == 2 && strings.TrimPrefix(fields[1], "*") == r.SumsEntry:
			if sum := strings.ToLower(fields[0]); isSHA256(sum) {
				return sum, nil
			}
		}
	}
	if err := s.Err(); err != nil {
		return "", fmt.Errorf("reading %s: %w", r.SumsURL, err)
	}
	return "", fmt.Errorf("%s has no SHA-256 for %s", r.SumsURL, path.Base(r.URL))
}

func isSHA256(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == sha256.Size
}

func get(ctx context.Context, c *http.Client, u string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return resp.Body, nil
}

// extract copies member of the gzipped tar r to w.
func extract(r io.Reader, member string, w io.Writer) error {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("no %s in the archive", member)
		}
		if err != nil {
			return err
		}
		if path.Clean(h.Name) != member || h.Typeflag != tar.TypeReg {
			continue
		}
		if _, err := io.Copy(w, io.LimitReader(tr, maxDownload)); err != nil {
			return fmt.Errorf("extracting %s: %w", member, err)
		}
		return nil
	}
}
