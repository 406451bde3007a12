package simcluster

import (
	"os/exec"
	"runtime"
	"syscall"
)

// StartTied starts cmd so that the kernel kills it when this process dies,
// whatever the binary is (official release builds have no parent watch of
// their own), and calls exited with its end.
//
// PR_SET_PDEATHSIG fires when the forking thread exits, not the process,
// and the Go runtime may end an idle thread at any time. So the child is
// started from a goroutine locked to its thread, which stays in Wait until
// the child ends: the thread lives exactly as long as the child needs it.
func StartTied(cmd *exec.Cmd, exited func(error)) error {
	started := make(chan error, 1)
	go func() {
		// Never unlocked: the thread is discarded with the goroutine, and
		// that happens only after the child has exited.
		runtime.LockOSThread()
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited(cmd.Wait())
	}()
	return <-started
}
