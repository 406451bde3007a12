package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/userland-dev/userland/internal/version"
)

// newRootCommand assembles the userland command tree.
func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "userland",
		Short:         "Per-user browser environments on Kubernetes",
		Long:          "Userland gives every member of a class or team their own browser environment (VS Code, JupyterLab, ...) on Kubernetes.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newVersionCommand(), newControllerCommand(), newGatewayCommand(), newDevCommand(), newCopySelfCommand())
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), version.Get())
			return err
		},
	}
}
