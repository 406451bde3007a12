package simcluster

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BinariesEnvVar names the directory holding the control-plane binaries.
const BinariesEnvVar = "USERLAND_CONTROL_PLANE_DIR"

// CacheName is the directory, under the user's cache directory
// ($XDG_CACHE_HOME or ~/.cache) and "userland", that
// hack/build-control-plane.sh builds into. It names every version, so a
// binary of Userland finds the control plane it was tested with; a test
// keeps it in step with the script.
const CacheName = "k8s-v1.37.1-etcd-v3.6.16-kwok-v0.8.0-r1"

// BuildScript is the script, relative to a Userland checkout, that builds
// the control plane.
const BuildScript = "hack/build-control-plane.sh"

// binaryNames are the programs each mode needs.
var binaryNames = map[Mode][]string{
	APIOnly: {"etcd", "kube-apiserver"},
	Full:    {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"},
}

// FindBinaries returns the directory holding mode's control-plane binaries.
// It looks, in order, in dir (a flag; empty: none), in $BinariesEnvVar and
// in the cache directory the build script fills. When none has them and
// checkout is a Userland checkout (empty: none), it runs the checkout's
// build script, which builds what is missing (first run only). Otherwise
// the error says what to run.
func FindBinaries(mode Mode, dir, checkout string) (string, error) {
	var tried []string
	for _, candidate := range []string{dir, os.Getenv(BinariesEnvVar), DefaultCacheDir()} {
		if candidate == "" {
			continue
		}
		if missing := missingBinaries(mode, candidate); len(missing) == 0 {
			return candidate, nil
		}
		tried = append(tried, candidate)
	}
	if checkout != "" {
		if _, err := os.Stat(filepath.Join(checkout, BuildScript)); err == nil {
			return build(mode, checkout)
		}
	}
	return "", fmt.Errorf("the simulated cluster's binaries (%s) are not in %s: in a Userland checkout run `make control-plane` (needs Go and the Go module proxy), or pass their directory with --control-plane-dir or $%s",
		strings.Join(binaryNames[mode], ", "), strings.Join(tried, " or "), BinariesEnvVar)
}

// DefaultCacheDir is where the build script puts the binaries.
func DefaultCacheDir() string {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "userland", CacheName)
}

func missingBinaries(mode Mode, dir string) []string {
	var missing []string
	for _, name := range binaryNames[mode] {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			missing = append(missing, name)
		}
	}
	return missing
}

// build runs the checkout's build script and returns the directory it
// prints on its last line.
func build(mode Mode, checkout string) (string, error) {
	script := filepath.Join(checkout, BuildScript)
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(script)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building the control plane with %s failed: %w\n%s", script, err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	dir := lines[len(lines)-1]
	if missing := missingBinaries(mode, dir); len(missing) > 0 {
		return "", fmt.Errorf("%s left %v missing from %s", script, missing, dir)
	}
	return dir, nil
}

// FindCheckout returns the Userland checkout that holds dir (the working
// directory, usually), or "" when dir is not inside one.
func FindCheckout(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, BuildScript)); err == nil {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				return d
			}
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}
