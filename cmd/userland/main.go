// Command userland is the single Userland binary: controller, gateway, dev mode
// and version, as cobra subcommands.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}
