package main

import (
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
	query := fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(length.Seconds()))
	var mu sync.Mutex
	out := map[string]string{}
	set := func(name, v string) { mu.Lock(); out[name] = v; mu.Unlock() }
	var wg sync.WaitGroup
	get := func(name string, c *http.Client, url string) {
		defer wg.Done()
		resp, err := c.Get(url)
		if err != nil {
			set(name, "profile failed: "+err.Error())
			return
		}
		defer func() { _ = resp.Body.Close() }()
		path := filepath.Join(dir, name+".pprof")
		f, err := os.Create(path)
		if err == nil {
			_, err = io.Copy(f, resp.Body)
			_ = f.Close()
		}
		if err != nil || resp.StatusCode != http.StatusOK {
			set(name, fmt.Sprintf("profile failed: %s %v", resp.Status, err))
			return
		}
		top, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=15", path).Output()
		if err != nil {
			set(name, "pprof failed: "+err.Error())
			return
		}
		set(name, trimTop(string(top)))
	}
	apiClient, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		return map[string]string{"kube-apiserver": "profile failed: " + err.Error()}
	}
	wg.Add(2)
	go get("kube-apiserver", apiClient, strings.TrimSuffix(env.Config.Host, "/")+query)
	go get("controller", http.DefaultClient, controllerPprof+query)
	wg.Wait()
	return out
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
