// Package gctune sets the Go garbage collector of each Userland process
// for the memory it holds: one rule, two profiles.
//
// A proxy (the gateway) holds a small live heap and makes garbage with
// every request, so it collects less often. A controller holds a large
// live heap (its informer caches) and makes little garbage, so it
// collects more often: with Go's default the heap grows to twice the
// caches before a collection, and that headroom, not the caches, was
// most of the controller's resident memory at 10,000 environments.
package gctune

import (
	"os"
	"runtime/debug"
	"strconv"

	"github.com/KimMachineGun/automemlimit/memlimit"
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
	// little; `make bench-10k` reports the resident memory it saves.
	Controller Profile = 50
)

// limitRatio is the share of the container's memory limit given to Go as
// its soft limit (GOMEMLIMIT): near it the collector works harder rather
// than let the process be killed, and the rest is left for memory Go does
// not count (stacks of cgo, the kernel's buffers).
const limitRatio = 0.9

// Apply sets the collector for p: GOGC p unless GOGC is set, and a soft
// memory limit of 90% of the container's memory limit unless GOMEMLIMIT
// is set. It returns what it applied: the GC percent ("" when GOGC was
// set, which the runtime already applied) and the memory limit
// (math.MaxInt64: none). An error means no container limit was read; the
// GC percent is set all the same.
func Apply(p Profile) (gcPercent string, memoryLimit int64, err error) {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(int(p))
		gcPercent = strconv.Itoa(int(p))
	}
	memoryLimit, err = memlimit.Set(memlimit.WithRatio(limitRatio))
	return gcPercent, memoryLimit, err
}
