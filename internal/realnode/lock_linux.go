package realnode

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// LockPath is the lock a running node holds. The names it uses
// (NetnsName, CgroupName, HostVeth) are the machine's, so one node runs
// at a time, whatever its state directory: a second Start would tear the
// first down. The kernel drops the lock when its holder dies, so a crash
// never leaves it taken. The file itself, empty, stays.
const LockPath = "/tmp/userland-realnode.lock"

// lock takes LockPath or says who holds it.
func lock() (*os.File, error) {
	f, err := os.OpenFile(LockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(LockPath)
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("another real node runs on this machine (%s holds %s)", strings.TrimSpace(string(holder)), LockPath)
		}
		return nil, fmt.Errorf("locking %s: %w", LockPath, err)
	}
	// Who holds it, for the message above.
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(fmt.Sprintf("pid %d\n", os.Getpid())), 0)
	return f, nil
}
