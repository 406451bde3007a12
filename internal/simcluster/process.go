package simcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Process is one program the cluster (or a test) started, logging to a file
// of its own.
type Process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error
	// dir, bin and args start it again (Respawn).
	dir, bin string
	args     []string
	// starts counts the times it was started, for the log file's name.
	starts int
}

// StartProcess starts bin with args, logging to <dir>/<name>.log. The child
// exits if this process dies abruptly: on Linux the kernel kills it
// (StartTied), and binaries built from hack/tools also watch their parent
// when given parentwatch's variable, which covers other systems.
func StartProcess(dir, name, bin string, args ...string) (*Process, error) {
	return startProcess(dir, name, bin, args, 1)
}

// Respawn starts the process again with the same program and arguments,
// after it ended; its log goes to <name>-<n>.log.
func (p *Process) Respawn() (*Process, error) {
	<-p.done
	return startProcess(p.dir, p.name, p.bin, p.args, p.starts+1)
}

func startProcess(dir, name, bin string, args []string, starts int) (*Process, error) {
	logName := name + ".log"
	if starts > 1 {
		logName = fmt.Sprintf("%s-%d.log", name, starts)
	}
	logPath := filepath.Join(dir, logName)
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating log for %s: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), ExitWithParentEnv+"=1")
	// A process group of its own keeps terminal Ctrl-C from racing the
	// harness's orderly shutdown.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &Process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{}), dir: dir, bin: bin, args: args, starts: starts}
	err = StartTied(cmd, func(err error) {
		p.err = err
		_ = logFile.Close()
		close(p.done)
	})
	if err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	return p, nil
}

// Exited reports whether the process has ended, with its log tail.
func (p *Process) Exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%w); last log lines:\n%s", p.name, p.err, p.logTail(20))
	default:
		return nil
	}
}

// Stop sends SIGTERM, then SIGKILL after the grace period.
func (p *Process) Stop(grace time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing %s: %w", p.name, err)
	}
	<-p.done
	return nil
}

// Kill sends SIGKILL, as an OOM kill or a node failure would, and waits for
// the process to end.
func (p *Process) Kill() error {
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing %s: %w", p.name, err)
	}
	<-p.done
	return nil
}

// LogPath is the file the process logs to.
func (p *Process) LogPath() string { return p.logPath }

func (p *Process) logTail(n int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
