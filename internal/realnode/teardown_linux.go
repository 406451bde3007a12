package realnode

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Teardown removes everything a node with this state directory made,
// whatever state it was left in (a clean stop, a failed start, a kill -9
// of the test run, a second call): the processes, the mounts, the network
// namespace (with it the veth, the pod network and every nftables/iptables
// rule and ipset, which live only there), the cgroups, the kubelet's
// sysctls and the files. It keys everything on stateDir and the package's
// fixed names, so it can always be re-run; it returns nil only when
// nothing is left.
func Teardown(stateDir string) error {
	if err := Supported(); err != nil {
		return err
	}
	if stateDir == "" {
		stateDir = DefaultStateDir
	}
	stateDir = filepath.Clean(stateDir)
	var errs []error
	if err := killAll(stateDir, true); err != nil {
		errs = append(errs, err)
	}
	if err := unmountAll(stateDir); err != nil {
		errs = append(errs, err)
	}
	if err := removeNetwork(); err != nil {
		errs = append(errs, err)
	}
	if err := removeCgroups(); err != nil {
		errs = append(errs, err)
	}
	if err := restoreSysctls(stateDir); err != nil {
		errs = append(errs, err)
	}
	// Files last, and only with nothing mounted beneath: RemoveAll would
	// otherwise reach into a mount that is still there.
	if len(errs) == 0 {
		if err := os.RemoveAll(stateDir); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", stateDir, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("realnode teardown incomplete (re-run it): %w", errors.Join(errs...))
	}
	return nil
}

// Leftovers lists what a node with this state directory left on the
// machine, one line each; empty when Teardown has nothing to do. Tests
// check it after Teardown.
func Leftovers(stateDir string) []string {
	if stateDir == "" {
		stateDir = DefaultStateDir
	}
	stateDir = filepath.Clean(stateDir)
	var left []string
	for _, p := range nodePIDs(stateDir, true) {
		left = append(left, fmt.Sprintf("process %d (%s)", p, cmdline(p)))
	}
	for _, m := range mountsUnder(stateDir) {
		left = append(left, "mount "+m)
	}
	if _, err := os.Stat(netnsPath()); err == nil {
		left = append(left, "network namespace "+netnsPath())
	}
	if _, err := net.InterfaceByName(HostVeth); err == nil {
		left = append(left, "veth "+HostVeth)
	}
	for _, d := range cgroupDirs() {
		left = append(left, "cgroup "+d)
	}
	if _, err := os.Stat(stateDir); err == nil {
		left = append(left, "directory "+stateDir)
	}
	return left
}

func netnsPath() string { return "/run/netns/" + NetnsName }

// killNode kills the node's daemons, shims and pods, leaving the control
// plane (on the host) to stop on its own: pods that watch the API server
// would otherwise hold its graceful shutdown for seconds.
func killNode(stateDir string) error { return killAll(stateDir, false) }

// killAll kills, with SIGKILL, every process of the node: with byCmdline
// those Start marked (the control plane, containerd and its shims, the
// node's daemons; see StateEnv), and always those in the cgroup (the pods)
// and those in the network namespace. Shims outlive containerd and pods
// outlive their shims, so the loop goes on until none is left.
func killAll(stateDir string, byCmdline bool) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := nodePIDs(stateDir, byCmdline)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes still alive: %v", pids)
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// nodePIDs are the node's live processes (zombies cannot be killed and
// leave with their parent), never this one or its parent.
func nodePIDs(stateDir string, byCmdline bool) []int {
	self, parent := os.Getpid(), os.Getppid()
	found := map[int]bool{}
	var netnsIno uint64
	if st, err := os.Stat(netnsPath()); err == nil {
		netnsIno = st.Sys().(*syscall.Stat_t).Ino
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil || p == self || p == parent {
			continue
		}
		if byCmdline && marked(p, stateDir) {
			found[p] = true
			continue
		}
		if netnsIno != 0 {
			if st, err := os.Stat(fmt.Sprintf("/proc/%d/ns/net", p)); err == nil && st.Sys().(*syscall.Stat_t).Ino == netnsIno {
				found[p] = true
			}
		}
	}
	for _, d := range cgroupDirs() {
		_ = filepath.WalkDir(d, func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || e.Name() != "cgroup.procs" {
				return nil
			}
			data, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(data)) {
				if p, err := strconv.Atoi(f); err == nil && p != self && p != parent {
					found[p] = true
				}
			}
			return nil
		})
	}
	var pids []int
	for p := range found {
		if state(p) != "" && state(p) != "Z" {
			pids = append(pids, p)
		}
	}
	sort.Ints(pids)
	return pids
}

// marked reports that the process started with StateEnv naming stateDir:
// a process of the node's, and not, say, someone's `tail -f` of a log in
// the state directory.
func marked(pid int, stateDir string) bool {
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return false
	}
	for _, kv := range strings.Split(string(env), "\x00") {
		if kv == StateEnv+"="+stateDir {
			return true
		}
	}
	return false
}

func cmdline(pid int) string {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.TrimSpace(strings.ReplaceAll(string(data), "\x00", " "))
}

// state is the process's state letter ("" when it is gone).
func state(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// The command name (field 2) may hold spaces; the state follows its ')'.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

// mountsUnder lists the host's mount points under dir, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer func() { _ = f.Close() }()
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		m := unescapeMount(fields[4])
		if m == dir || strings.HasPrefix(m, dir+"/") {
			mounts = append(mounts, m)
		}
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
	return mounts
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountAll detaches every mount under the state directory: the pinned
// mount namespace (whose own mounts, container root filesystems, volumes
// and pod network namespaces, go with it once its processes are gone)
// and the bind mount that pins it.
func unmountAll(stateDir string) error {
	for range 5 {
		mounts := mountsUnder(stateDir)
		if len(mounts) == 0 {
			return nil
		}
		for _, m := range mounts {
			_ = syscall.Unmount(m, syscall.MNT_DETACH)
		}
	}
	if left := mountsUnder(stateDir); len(left) > 0 {
		return fmt.Errorf("mounts left: %v", left)
	}
	return nil
}

// removeNetwork deletes the network namespace (the node's end of the veth
// and everything in it go with it) and the veth's host end.
func removeNetwork() error {
	var errs []error
	if _, err := os.Stat(netnsPath()); err == nil {
		// What `ip netns del` does: the name is a bind mount of the
		// namespace on a file.
		_ = syscall.Unmount(netnsPath(), syscall.MNT_DETACH)
		if err := os.Remove(netnsPath()); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", netnsPath(), err))
		}
	}
	// The kernel deletes the pair asynchronously once the namespace is
	// gone; delete the host end by hand only if it stays.
	for range 30 {
		if _, err := net.InterfaceByName(HostVeth); err != nil {
			return errors.Join(errs...)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out, err := exec.Command("ip", "link", "del", HostVeth).CombinedOutput(); err != nil {
		if _, gone := net.InterfaceByName(HostVeth); gone == nil {
			errs = append(errs, fmt.Errorf("ip link del %s: %w: %s", HostVeth, err, out))
		}
	}
	return errors.Join(errs...)
}

// cgroupDirs are the node's cgroup directories, one per hierarchy.
func cgroupDirs() []string {
	var dirs []string
	seen := map[string]bool{}
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range hierarchies {
		real, err := filepath.EvalSymlinks(h)
		if err != nil || seen[real] {
			continue
		}
		seen[real] = true
		if st, err := os.Stat(filepath.Join(real, CgroupName)); err == nil && st.IsDir() {
			dirs = append(dirs, filepath.Join(real, CgroupName))
		}
	}
	// A unified hierarchy mounted at the root (cgroup v2 only) holds the
	// cgroup directly under /sys/fs/cgroup.
	if st, err := os.Stat(filepath.Join("/sys/fs/cgroup", CgroupName)); err == nil && st.IsDir() && !seen[filepath.Join("/sys/fs/cgroup", CgroupName)] {
		dirs = append(dirs, filepath.Join("/sys/fs/cgroup", CgroupName))
	}
	return dirs
}

// removeCgroups removes the cgroups deepest first; a cgroup goes once its
// processes have (the pods' take a moment after SIGKILL).
func removeCgroups() error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, d := range cgroupDirs() {
			var dirs []string
			_ = filepath.WalkDir(d, func(path string, e fs.DirEntry, err error) error {
				if err == nil && e.IsDir() {
					dirs = append(dirs, path)
				}
				return nil
			})
			for i := len(dirs) - 1; i >= 0; i-- {
				_ = syscall.Rmdir(dirs[i])
			}
		}
		left := cgroupDirs()
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroups left: %v", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// restoreSysctls writes back the values saved before the kubelet started.
func restoreSysctls(stateDir string) error {
	data, err := os.ReadFile(filepath.Join(stateDir, sysctlFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		if err := os.WriteFile(sysctlPath(k), []byte(v+"\n"), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restoring %s=%s: %w", k, v, err))
		}
	}
	return errors.Join(errs...)
}

// The sysctls the kubelet sets host-wide (they are not per network
// namespace), saved in sysctlFile before it starts.
var hostSysctls = []string{"kernel.panic", "kernel.panic_on_oops", "vm.overcommit_memory", "vm.panic_on_oom"}

const sysctlFile = "sysctl.saved"

func sysctlPath(key string) string {
	return "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
}

// saveSysctls records hostSysctls for Teardown.
func saveSysctls(stateDir string) error {
	var b strings.Builder
	for _, k := range hostSysctls {
		v, err := os.ReadFile(sysctlPath(k))
		if err != nil {
			return fmt.Errorf("reading %s: %w", k, err)
		}
		fmt.Fprintf(&b, "%s=%s\n", k, strings.TrimSpace(string(v)))
	}
	return os.WriteFile(filepath.Join(stateDir, sysctlFile), []byte(b.String()), 0o600)
}
