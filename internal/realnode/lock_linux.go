package realnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// LockPath is the lock a running node holds. The names it uses
// (NetnsName, CgroupName, HostVeth) are the machine's, so one node runs
// at a time, whatever its state directory: a second Start would tear the
// first down. The kernel drops the lock when its holder dies, so a crash
// never leaves it taken. The file itself, empty, stays.
const LockPath = "/tmp/userland-realnode.lock"

// lock takes LockPath, waiting up to wait (polling, and saying once
// whom it waits for) while another node holds it, or says who holds it.
func lock(ctx context.Context, wait time.Duration, logf func(string, ...any)) (*os.File, error) {
	f, err := os.OpenFile(LockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	for said := false; ; said = true {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		holder, _ := os.ReadFile(LockPath)
		if !errors.Is(err, unix.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("locking %s: %w", LockPath, err)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			_ = f.Close()
			return nil, fmt.Errorf("another real node runs on this machine (%s holds %s)", strings.TrimSpace(string(holder)), LockPath)
		}
		if !said {
			logf("another real node runs on this machine (%s holds %s): waiting up to %s for it", strings.TrimSpace(string(holder)), LockPath, wait)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	// Who holds it, for the message above.
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(fmt.Sprintf("pid %d\n", os.Getpid())), 0)
	return f, nil
}
