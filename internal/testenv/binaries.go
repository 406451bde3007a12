package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// BinariesEnvVar names the directory holding the control-plane binaries.
// `make test` sets it; when it is unset the harness runs
// hack/build-control-plane.sh itself, which builds what is missing.
const BinariesEnvVar = "USERLAND_CONTROL_PLANE_DIR"

// binaryNames are the programs each mode needs.
var binaryNames = map[Mode][]string{
	APIOnly: {"etcd", "kube-apiserver"},
	Full:    {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"},
}

// RepoRoot returns the repository root, found from this source file so that
// tests in any package locate config/ and hack/.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// BinariesDir returns the directory holding the control-plane binaries,
// building them first when needed. The error says what to install or run.
func BinariesDir(mode Mode) (string, error) {
	dir := os.Getenv(BinariesEnvVar)
	if dir == "" {
		script := filepath.Join(RepoRoot(), "hack", "build-control-plane.sh")
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(script)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("building the control plane with %s failed: %w\n%s", script, err, stderr.String())
		}
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		dir = lines[len(lines)-1]
	}
	var missing []string
	for _, name := range binaryNames[mode] {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("control-plane binaries %v are missing from %s: run `make control-plane` (needs Go and the Go module proxy)", missing, dir)
	}
	return dir, nil
}
