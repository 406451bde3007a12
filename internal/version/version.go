// Package version holds the build identity of the userland binary, stamped by
// the Makefile through -ldflags.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

var (
	// Version is the release version, set with -ldflags at build time.
	Version = "v0.0.0-dev"
	// Commit is the git commit the binary was built from, set with -ldflags.
	Commit = ""
)

// Info is the printable build identity.
type Info struct {
	Version   string
	Commit    string
	GoVersion string
}

// Get returns the build identity, falling back to the VCS data the Go
// toolchain embeds when the commit was not stamped.
func Get() Info {
	commit := Commit
	if commit == "" {
		commit = "unknown"
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					commit = s.Value
				}
			}
		}
	}
	return Info{Version: Version, Commit: commit, GoVersion: runtime.Version()}
}

// String renders the identity on one line, as `userland version` prints it.
func (i Info) String() string {
	return fmt.Sprintf("userland %s (commit %s, %s)", i.Version, i.Commit, i.GoVersion)
}
