//go:build !linux

package simcluster

import "os/exec"

// StartTied starts cmd and calls exited with its end. Outside Linux there
// is no parent-death signal; the binaries built from hack/tools watch their
// parent themselves.
func StartTied(cmd *exec.Cmd, exited func(error)) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { exited(cmd.Wait()) }()
	return nil
}
