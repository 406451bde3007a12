// Package parentwatch makes a control-plane binary exit when the process that
// started it goes away, so a test binary that panics, times out or is killed
// leaves no stray kube-apiserver, etcd or kwok behind.
package parentwatch

import (
	"os"
	"time"
)

// EnvVar names the environment variable that turns the watch on. The test
// harness and `userland dev` set it; a binary started by hand is unaffected.
const EnvVar = "USERLAND_EXIT_WITH_PARENT"

// Start begins watching the parent process when EnvVar is "1". It polls
// getppid once a second: when the parent dies the process is re-parented and
// the id changes. Polling is used rather than PR_SET_PDEATHSIG because the
// latter fires when the forking OS thread exits, which the Go runtime of the
// parent may do at any time.
func Start() {
	if os.Getenv(EnvVar) != "1" {
		return
	}
	parent := os.Getppid()
	go func() {
		for range time.Tick(time.Second) {
			if os.Getppid() != parent {
				os.Exit(1)
			}
		}
	}()
}
