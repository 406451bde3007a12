package gctune

import (
	"runtime/debug"
	"strconv"
	"testing"
)

func TestApplySetsTheProfileUnlessTheOperatorSetGOGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOMEMLIMIT", "1GiB") // no cgroup read in a unit test

	for _, p := range []Profile{Proxy, Controller} {
		debug.SetGCPercent(100)
		percent, _, err := Apply(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := debug.SetGCPercent(100); got != int(p) || percent != strconv.Itoa(int(p)) {
			t.Errorf("GOGC unset, profile %d: GC percent %d (reported %q)", p, got, percent)
		}
	}

	t.Setenv("GOGC", "150")
	debug.SetGCPercent(150)
	if percent, _, _ := Apply(Controller); percent != "" {
		t.Errorf("GOGC set: Apply reported %q, want it left alone", percent)
	}
	if got := debug.SetGCPercent(150); got != 150 {
		t.Errorf("GOGC=150: GC percent %d after Apply", got)
	}
}
