package gctune

import (
	"errors"
	"math"
	"os"
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/google/go-cmp/cmp"
)

// unsetenv removes key for the test and puts it back after; t.Setenv can
// only set.
func unsetenv(t *testing.T, key string) {
	t.Helper()
	if old, ok := os.LookupEnv(key); ok {
		t.Cleanup(func() { _ = os.Setenv(key, old) })
	} else {
		t.Cleanup(func() { _ = os.Unsetenv(key) })
	}
	_ = os.Unsetenv(key)
}

// Not parallel: the GC settings are the process's.
func TestApplySetsTheProfileAndNinetyPercentOfTheContainerLimit(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	for _, key := range []string{"GOGC", "GOMEMLIMIT", "AUTOMEMLIMIT"} {
		unsetenv(t, key)
	}
	limited := memlimit.WithProvider(memlimit.Limit(1000 << 20))
	unlimited := memlimit.WithProvider(func() (uint64, error) { return 0, memlimit.ErrNoLimit })
	unreadable := memlimit.WithProvider(func() (uint64, error) { return 0, errors.New("permission denied") })

	tests := []struct {
		name      string
		env       map[string]string
		profile   Profile
		container memlimit.Option
		want      Settings
		wantGC    int
		wantErr   bool
	}{
		{name: "controller in a 1000 MiB container", profile: Controller, container: limited,
			want: Settings{GCPercent: "50", MemoryLimit: 900 << 20}, wantGC: 50},
		{name: "gateway in a 1000 MiB container", profile: Proxy, container: limited,
			want: Settings{GCPercent: "400", MemoryLimit: 900 << 20}, wantGC: 400},
		{name: "no container limit", profile: Controller, container: unlimited,
			want: Settings{GCPercent: "50", MemoryLimit: math.MaxInt64}, wantGC: 50},
		{name: "the limit cannot be read: none, GOGC still set", profile: Controller, container: unreadable,
			want: Settings{GCPercent: "50", MemoryLimit: math.MaxInt64}, wantGC: 50, wantErr: true},
		{name: "GOGC set by the operator", env: map[string]string{"GOGC": "150"}, profile: Controller, container: limited,
			want: Settings{MemoryLimit: 900 << 20}, wantGC: 150},
		{name: "AUTOMEMLIMIT gives another ratio", env: map[string]string{"AUTOMEMLIMIT": "0.5"}, profile: Controller, container: limited,
			want: Settings{GCPercent: "50", MemoryLimit: 500 << 20}, wantGC: 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			// What the runtime would have set from the environment.
			debug.SetGCPercent(100)
			if tt.env["GOGC"] != "" {
				debug.SetGCPercent(150)
			}
			debug.SetMemoryLimit(math.MaxInt64)
			got, err := apply(tt.profile, tt.container)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want one: %t", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("settings (-want +got):\n%s", diff)
			}
			if gc := debug.SetGCPercent(100); gc != tt.wantGC {
				t.Errorf("GC percent %d, want %d", gc, tt.wantGC)
			}
			if limit := debug.SetMemoryLimit(-1); limit != tt.want.MemoryLimit {
				t.Errorf("runtime memory limit %d, want %d", limit, tt.want.MemoryLimit)
			}
		})
	}
}

func TestApplyLeavesAGOMEMLIMITTheOperatorSet(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	unsetenv(t, "GOGC")
	t.Setenv("GOMEMLIMIT", "300MiB")
	debug.SetMemoryLimit(300 << 20) // as the runtime read it at start
	got, err := apply(Controller, memlimit.WithProvider(memlimit.Limit(1000<<20)))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Settings{GCPercent: "50", MemoryLimit: 300 << 20}, got); diff != "" {
		t.Errorf("settings (-want +got):\n%s", diff)
	}
}
