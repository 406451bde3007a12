package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/userland-dev/userland/internal/testenv"
)

// takeProfiles waits, then takes CPU profiles of the API server (its own
// /debug/pprof, as an administrator) and the controller at once, and
// returns the top entries of each as `go tool pprof -top` prints them.
func takeProfiles(env *testenv.Environment, controllerPprof, dir string, after, length time.Duration) map[string]string {
	time.Sleep(after)
	out := map[string]string{}
	apiClient, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		return map[string]string{"kube-apiserver": "profile failed: " + err.Error()}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, target := range map[string]struct {
		c    *http.Client
		base string
	}{
		// The host of envtest's config ends in a slash.
		"kube-apiserver": {apiClient, strings.TrimSuffix(env.Config.Host, "/")},
		"controller":     {http.DefaultClient, controllerPprof},
	} {
		wg.Go(func() {
			top := cpuProfile(target.c, target.base, filepath.Join(dir, name+".pprof"), length)
			mu.Lock()
			out[name] = top
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// cpuProfile takes a CPU profile from base's /debug/pprof, keeps it at
// path, and returns its top entries by flat and by cumulative time.
func cpuProfile(c *http.Client, base, path string, length time.Duration) string {
	if err := keepProfile(c, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, int(length.Seconds())), path); err != nil {
		return "profile failed: " + err.Error()
	}
	flat, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=15", path).Output()
	if err != nil {
		return "pprof failed: " + err.Error()
	}
	cum, err := exec.Command("go", "tool", "pprof", "-top", "-cum", "-nodecount=25", path).Output()
	if err != nil {
		return "pprof failed: " + err.Error()
	}
	return trimTop(string(flat)) + "\n\nBy cumulative time:\n\n" + tableOnly(string(cum))
}

// trimTop keeps pprof's summary and table.
func trimTop(s string) string {
	var keep []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if strings.HasPrefix(l, "File:") || strings.HasPrefix(l, "Build ID:") || strings.HasPrefix(l, "Type:") || strings.HasPrefix(l, "Time:") {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

// tableOnly keeps the table of a pprof -top output.
func tableOnly(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		if strings.Contains(l, "flat%") {
			return strings.Join(lines[i:], "\n")
		}
	}
	return s
}

// heapProfile keeps base's in-use heap profile at path and returns its
// top entries by in-use bytes, flat and cumulative, to show what the
// process's memory holds once it has settled.
func heapProfile(base, path string) string {
	if err := keepProfile(http.DefaultClient, base+"/debug/pprof/heap", path); err != nil {
		return "heap profile failed: " + err.Error()
	}
	flat, err := exec.Command("go", "tool", "pprof", "-top", "-sample_index=inuse_space", "-nodecount=20", path).Output()
	if err != nil {
		return "pprof failed: " + err.Error()
	}
	cum, err := exec.Command("go", "tool", "pprof", "-top", "-cum", "-sample_index=inuse_space", "-nodecount=30", path).Output()
	if err != nil {
		return "pprof failed: " + err.Error()
	}
	return trimTop(string(flat)) + "\n\nBy cumulative bytes:\n\n" + tableOnly(string(cum))
}

// keepProfile fetches a pprof profile from url and keeps it at path.
func keepProfile(c *http.Client, url, path string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, resp.Body)
	return errors.Join(err, f.Close())
}
