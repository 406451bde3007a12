package realnode

import (
	"strings"
	"testing"
)

func TestDiskShortfall(t *testing.T) {
	const gi = 1 << 30
	for _, tc := range []struct {
		name        string
		size, avail uint64
		wantErr     string
	}{
		{"plenty", 252 * gi, 46 * gi, ""},
		{"exactly the threshold and the working room", 100 * gi, 1*gi + workingRoom, ""},
		// The run that failed: 5.5 GiB free of 252 GiB; the kubelet's
		// threshold alone is 2.5 GiB.
		{"the disk of a failed run", 252 * gi, 5.5 * gi, "needs 8.5 GiB free on the filesystem of /tmp (the kubelet evicts every pod below 1% free, 2.5 GiB here, and a run writes up to 6 GiB more), but only 5.5 GiB is free"},
		{"small disk, little free", 20 * gi, 1 * gi, "needs 6.2 GiB free"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := diskShortfall("/tmp", tc.size, tc.avail)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("diskShortfall(%d, %d) = %v, want nil", tc.size, tc.avail, err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("diskShortfall(%d, %d) = %v, want an error containing %q", tc.size, tc.avail, err, tc.wantErr)
			}
		})
	}
}
