//go:build linux

package realnode

import (
	"math"
	"testing"
)

func TestAdversaryToday2DiskShortfallEdges(t *testing.T) {
	const gi = 1 << 30
	for _, tc := range []struct {
		name        string
		size, avail uint64
		ok          bool
	}{
		{"huge fs, no overflow, little free", math.MaxUint64, 10 * gi, false},
		{"huge fs, all free", math.MaxUint64, math.MaxUint64, true},
		{"empty statfs (0,0)", 0, 0, false},
		{"one byte short", 100 * gi, 1*gi + workingRoom - 1, false},
		// The kubelet's threshold is 1% of capacity; one byte above it
		// plus the working room passes.
		{"tiny fs under the working room", 5 * gi, 5 * gi, false},
	} {
		if err := diskShortfall("/x", tc.size, tc.avail); (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if err := checkDisk("/no/such/dir"); err == nil {
		t.Error("checkDisk of a missing directory passed")
	}
	t.Logf("checkDisk(/tmp) = %v", checkDisk("/tmp"))
}
