package realnode

import "fmt"

// The kubelet of the node evicts every pod once the filesystem under its
// state directory has less than this share free (configs.go:
// evictionHard nodefs.available and imagefs.available).
const evictionFreePercent = 1

// workingRoom is what a run of the node writes on top of that: the
// imported images of the real apps unpacked by containerd, the pods'
// writable layers, logs and claims. A run of make test-node measured
// under 3 GiB; the rest is margin.
const workingRoom = 6 << 30

// diskShortfall says why a filesystem of size bytes with avail bytes
// free cannot hold a run of the node, or nil if it can. Without this
// check a full disk shows up minutes later as pods evicted with
// "The node was low on resource: ephemeral-storage", far from its cause.
func diskShortfall(dir string, size, avail uint64) error {
	need := size/100*evictionFreePercent + workingRoom
	if avail >= need {
		return nil
	}
	return fmt.Errorf("the real node needs %.1f GiB free on the filesystem of %s (the kubelet evicts every pod below %d%% free, %.1f GiB here, and a run writes up to %d GiB more), but only %.1f GiB is free: free some space (old build caches, earlier runs' directories) and run again",
		gib(need), dir, evictionFreePercent, gib(size/100*evictionFreePercent), workingRoom>>30, gib(avail))
}

func gib(b uint64) float64 { return float64(b) / (1 << 30) }
