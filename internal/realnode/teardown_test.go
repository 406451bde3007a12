//go:build realnode

package realnode_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/internal/realnode"
	"github.com/userland-dev/userland/internal/testenv"
)

// crashChildEnv makes the test binary a child that brings a node up with a
// running pod, prints crashChildReady and waits to be killed.
const (
	crashChildEnv   = "USERLAND_REALNODE_CRASH_CHILD"
	crashChildReady = "REALNODE-READY"
)

// TestTeardownAfterCrash kills -9 a test run that has a node up with a
// running pod (its daemons die with it; containerd's shims and the pod do
// not, nor do mounts, namespaces, cgroups and rules), checks that the
// teardown removes everything, and that the next bring-up starts clean.
func TestTeardownAfterCrash(t *testing.T) {
	opts := nodeOptions(t)
	before := hostSysctls(t)
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), crashChildEnv+"=1", imagesEnv+"="+imagesDir(opts.Images),
		"USERLAND_CONTROL_PLANE_DIR="+opts.ControlPlaneDir, "USERLAND_NODE_DIR="+opts.NodeBinariesDir)
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == crashChildReady {
				ready <- true
			}
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			_ = child.Wait()
			t.Fatalf("the child run ended before its node was up: %v", child.ProcessState)
		}
	case <-time.After(5 * time.Minute):
		_ = child.Process.Kill()
		t.Fatal("the child run's node was not up in 5 minutes")
	}
	t.Logf("TIMING child run: node and pod up in %s", time.Since(start).Round(10*time.Millisecond))

	// A second node cannot start beside it (the names are the machine's),
	// and trying does not tear the running one down: at once without a
	// wait, and after its wait with one.
	for _, wait := range []time.Duration{0, 2 * time.Second} {
		second := opts
		second.LockWait = wait
		asked := time.Now()
		if n, err := realnode.Start(context.Background(), second); err == nil {
			_ = n.Stop()
			t.Fatalf("a second node (lock wait %s) started while the child's ran", wait)
		} else if !strings.Contains(err.Error(), "another real node runs") {
			t.Fatalf("a second Start (lock wait %s): %v, want: another real node runs", wait, err)
		} else if took := time.Since(asked); took < wait || took > wait+time.Minute {
			t.Fatalf("a second Start with lock wait %s gave up after %s", wait, took)
		} else {
			t.Logf("a second Start (lock wait %s) while the child's node runs, refused after %s: %v", wait, took.Round(10*time.Millisecond), err)
		}
	}
	if _, err := os.Stat(realnode.DefaultStateDir + "/ns/mnt"); err != nil {
		t.Fatalf("the child's node was touched by the refused Start: %v", err)
	}

	// The crash: SIGKILL to the whole test run, which leaves no chance
	// for cleanup. Its daemons die with it (they are tied to it).
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	time.Sleep(time.Second)
	left := realnode.Leftovers(realnode.DefaultStateDir)
	t.Logf("host sysctls after the crash (the kubelet's, host-wide):\n%s", hostSysctls(t))
	t.Logf("left by the crash (%d):\n  %s", len(left), strings.Join(left, "\n  "))
	if len(left) == 0 {
		t.Error("a crash left nothing behind: the test did not crash a running node")
	}

	start = time.Now()
	if err := realnode.Teardown(realnode.DefaultStateDir); err != nil {
		t.Fatalf("teardown after the crash: %v", err)
	}
	t.Logf("TIMING teardown after the crash took %s", time.Since(start).Round(10*time.Millisecond))
	if left := realnode.Leftovers(realnode.DefaultStateDir); len(left) > 0 {
		t.Fatalf("left after the teardown:\n  %s", strings.Join(left, "\n  "))
	}
	checkHostClean(t)
	if after := hostSysctls(t); after != before {
		t.Errorf("host sysctls after the teardown:\n%s\nwant, as before the run:\n%s", after, before)
	}
	if err := realnode.Teardown(realnode.DefaultStateDir); err != nil {
		t.Errorf("a second teardown: %v", err)
	}

	// A bring-up after it starts clean (startNode checks what its own
	// teardown leaves).
	n := startNode(t)
	t.Logf("second bring-up: node Ready after %s", n.Timings[len(n.Timings)-1].After.Round(10*time.Millisecond))
}

// checkHostClean checks the host's own network state for the node's
// traces: its nftables table, iptables chains, and a netns by its name.
func checkHostClean(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("nft", "list", "ruleset").CombinedOutput(); err != nil {
		t.Errorf("nft list ruleset: %v: %s", err, out)
	} else if strings.Contains(string(out), "userland-realnode") || strings.Contains(string(out), "kube-") {
		t.Errorf("the host's nftables ruleset holds the node's rules:\n%s", out)
	}
	if out, err := exec.Command("ip", "netns", "list").CombinedOutput(); err == nil && strings.Contains(string(out), realnode.NetnsName) {
		t.Errorf("ip netns list still shows %s", realnode.NetnsName)
	}
}

// hostSysctls are the host-wide sysctls the node changes (the kubelet's
// four; forwarding is set only inside the node's namespace).
func hostSysctls(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, k := range []string{"kernel.panic", "kernel.panic_on_oops", "vm.overcommit_memory", "vm.panic_on_oom", "net.ipv4.ip_forward"} {
		v, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(k, ".", "/"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s=%s ", k, strings.TrimSpace(string(v)))
	}
	return b.String()
}

// imagesDir is the directory packImages wrote the archives to.
func imagesDir(paths []string) string {
	if len(paths) == 0 {
		return ""
	}
	return filepath.Dir(paths[0])
}

// crashChild is the child run: a node with one Ready pod of the probe
// image, then it waits for its SIGKILL.
func crashChild() int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		return 1
	}
	imgs, err := packImages()
	if err != nil {
		return fail(err)
	}
	n, err := realnode.Start(context.Background(), realnode.Options{
		NodeBinariesDir:   os.Getenv("USERLAND_NODE_DIR"),
		ControlPlaneDir:   os.Getenv("USERLAND_CONTROL_PLANE_DIR"),
		CRDDirectoryPaths: []string{filepath.Join(testenv.RepoRoot(), "config", "crd", "bases")},
		Images:            imgs,
		Logf:              func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) },
	})
	if err != nil {
		return fail(err)
	}
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "probe"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: probeImage, ReadinessProbe: readiness()}}},
	}
	if err := n.Cluster.Client.Create(ctx, pod); err != nil {
		return fail(err)
	}
	for deadline := time.Now().Add(3 * time.Minute); ; {
		var live corev1.Pod
		if err := n.Cluster.Client.Get(ctx, client.ObjectKeyFromObject(pod), &live); err == nil && podReady(&live) {
			break
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("pod not Ready in 3 minutes"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Println(crashChildReady)
	time.Sleep(time.Hour)
	return 1
}
