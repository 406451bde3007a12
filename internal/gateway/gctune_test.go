package gateway

import (
	"runtime/debug"
	"testing"
)

func TestTuneGCRaisesGOGCUnlessTheOperatorSetIt(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOMEMLIMIT", "1GiB") // no cgroup read in a unit test

	percent, _, err := TuneGC()
	if err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); got != proxyGCPercent || percent != "400" {
		t.Errorf("GOGC unset: GC percent %d (reported %q), want %d", got, percent, proxyGCPercent)
	}

	t.Setenv("GOGC", "150")
	debug.SetGCPercent(150)
	if percent, _, _ := TuneGC(); percent != "" {
		t.Errorf("GOGC set: TuneGC reported %q, want it left alone", percent)
	}
	if got := debug.SetGCPercent(150); got != 150 {
		t.Errorf("GOGC=150: GC percent %d after TuneGC", got)
	}
}
