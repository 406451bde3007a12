// Package gctune sets the Go garbage collector of each Userland process
// for the memory it holds: one rule, two profiles.
//
// A proxy (the gateway) holds a small live heap and makes garbage with
// every request, so it collects less often. A controller holds a large
// live heap (its informer caches) and makes little garbage, so it
// collects more often: with Go's default the heap may grow to twice the
// caches before a collection, and at 10,000 environments that headroom
// took the controller past its memory target.
package gctune

import (
	"context"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr"
)

// Profile is a GC percent (GOGC) suited to one kind of process.
type Profile int

const (
	// Proxy is the gateway's GOGC. `make bench` measured the gateway at
	// 0.79 of the bare proxy's small-request throughput with Go's default
	// of 100 and 0.83–0.85 with 400.
	Proxy Profile = 400
	// Controller is the controller's GOGC: the heap may grow by half its
	// live size between collections instead of doubling. Its CPU is
	// mostly waiting on the API server, so the extra collections cost
	// little; docs/benchmarking.md has what it saved.
	Controller Profile = 50
)

// limitRatio is the share of the container's memory limit given to Go as
// its soft limit (GOMEMLIMIT): near it the collector works harder (up to
// half the CPU, Go's own cap) rather than let the process be killed, and
// the rest is left for memory Go does not count.
const limitRatio = 0.9

// refreshEvery is how often the container's limit is read again, so a
// limit resized in place (a VerticalPodAutoscaler's) is followed without
// a restart.
const refreshEvery = time.Minute

// Settings is what Apply set.
type Settings struct {
	// GCPercent is the GOGC applied, or "" when GOGC was set (the
	// runtime applied it).
	GCPercent string
	// MemoryLimit is the soft memory limit in bytes; math.MaxInt64 is
	// none (no container limit, or GOMEMLIMIT set to none).
	MemoryLimit int64
}

// keysAndValues describes s for a log line.
func (s Settings) keysAndValues() []any {
	percent := s.GCPercent
	if percent == "" {
		percent = "GOGC " + os.Getenv("GOGC")
	}
	limit := "none"
	if s.MemoryLimit != math.MaxInt64 {
		limit = strconv.FormatInt(s.MemoryLimit, 10)
	}
	return []any{"gcPercent", percent, "memoryLimitBytes", limit}
}

// Apply sets the collector for p and logs what it set: GOGC p unless GOGC
// is set, and a soft memory limit of 90% of the container's memory limit,
// read again every minute until ctx ends, unless GOMEMLIMIT is set or
// AUTOMEMLIMIT is "off" (AUTOMEMLIMIT may also give another ratio).
// A limit that cannot be read leaves none; that is logged, not fatal.
func Apply(ctx context.Context, p Profile, log logr.Logger) {
	s, err := apply(p, memlimit.WithRefreshInterval(ctx, refreshEvery))
	if err != nil {
		log.Error(err, "could not read the container's memory limit; no soft memory limit is set", s.keysAndValues()...)
		return
	}
	log.Info("garbage collector tuned", s.keysAndValues()...)
}

// apply is Apply without the log, its options after the ratio's.
func apply(p Profile, opts ...memlimit.Option) (Settings, error) {
	var s Settings
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(int(p))
		s.GCPercent = strconv.Itoa(int(p))
	}
	limit, err := memlimit.Set(append([]memlimit.Option{memlimit.WithRatio(limitRatio)}, opts...)...)
	s.MemoryLimit = limit
	return s, err
}
