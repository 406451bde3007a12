package testenv

import (
	"errors"
	"os"
	"os/exec"
)

// ChromiumPath finds Chromium for the browser tests (test/e2e and the
// real node's): USERLAND_CHROMIUM, else the first of Debian's and
// Google's names on PATH. `make test` installs Debian's package when it
// can; a missing browser is an error, never a skip.
func ChromiumPath() (string, error) {
	if p := os.Getenv("USERLAND_CHROMIUM"); p != "" {
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no Chromium found: run hack/ensure-chromium.sh (installs Debian's chromium) or set USERLAND_CHROMIUM")
}
