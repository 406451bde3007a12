package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// newCopySelfCommand copies this binary to a path. The image pullers'
// first init container runs it, so their other init containers can run
// the copy (`version`) in images that have no shell (internal/controller,
// course_puller.go).
func newCopySelfCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "copy-self PATH",
		Short:  "Copy the userland binary to PATH (used by the image pullers)",
		Args:   cobra.ExactArgs(1),
		Hidden: true,
		RunE: func(_ *cobra.Command, args []string) error {
			return copySelf(args[0])
		},
	}
}

func copySelf(to string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this binary: %w", err)
	}
	in, err := os.Open(self)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	// Readable and executable by every user: the pullers' images run as
	// nobody, as does this copy.
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return fmt.Errorf("copying %s to %s: %w", self, to, err)
	}
	return out.Close()
}
