package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"sync"
	"time"
)

// slowResult is the gateway under slow anonymous clients: connections that
// hold request headers or a sign-in form open for as long as the gateway
// lets them, while a signed-in user goes on working.
type slowResult struct {
	Clients int
	// BeforeKiB, PeakKiB and AfterKiB are the gateway's RSS before the
	// clients connect, the highest sampled while they are connected, and
	// once they are gone.
	BeforeKiB, PeakKiB, AfterKiB int64
	// Cut is how many connections the gateway closed within slowHold;
	// Longest is the longest any was held.
	Cut     int
	Longest time.Duration
	// Probes are the signed-in requests sent meanwhile.
	Probes, ProbeErrors int
	ProbeP99            time.Duration
}

// GrowthKiB is what the slow clients added at their peak.
func (r slowResult) GrowthKiB() int64 { return r.PeakKiB - r.BeforeKiB }

// slowHold is how long a slow client waits to be cut off before it gives
// up: well beyond the gateway's 20 s header and form read deadlines.
const slowHold = 60 * time.Second

// slowKind is one way to hold a connection: what is sent first, and what
// is then sent again every tick until the gateway closes the connection.
type slowKind struct {
	name        string
	first, each func(host string) []byte
	// flood is how many bytes of body follow first at once.
	flood int
	tick  time.Duration
}

// floodBody is the body every flooding client sends from: one buffer, so
// the attackers' own allocations do not load the machine being measured.
var floodBody = make([]byte, 30<<20)

// slowKinds are the attacks the issue found: stalled headers (slowloris),
// a sign-in form trickled a few bytes at a time, and a 40 MB multipart
// form of which 30 MiB is sent at once before stalling (which took the
// gateway to 553 MiB when forms were parsed before any limit).
var slowKinds = []slowKind{
	{
		name:  "stalled headers",
		first: func(host string) []byte { return fmt.Appendf(nil, "GET /login HTTP/1.1\r\nHost: %s\r\n", host) },
		each:  func(string) []byte { return []byte("X-Slow: 1\r\n") },
		tick:  2 * time.Second,
	},
	{
		name: "trickled form",
		first: func(host string) []byte {
			return fmt.Appendf(nil, "POST /login HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000000\r\n\r\nusername=", host)
		},
		each: func(string) []byte { return []byte(strings.Repeat("a", 100)) },
		tick: 2 * time.Second,
	},
	{
		name: "flooded multipart form",
		first: func(host string) []byte {
			return fmt.Appendf(nil, "POST /login HTTP/1.1\r\nHost: %s\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 40000000\r\n\r\n--b\r\nContent-Disposition: form-data; name=\"username\"; filename=\"f\"\r\n\r\n", host)
		},
		flood: 30 << 20,
		tick:  time.Second, // nothing more is sent: it stalls
	},
}

// slowClients connects n slow clients to the gateway at addr (as many of
// each kind), samples the gateway's memory until the last is closed or
// gives up, and meanwhile sends a signed-in request to probe every 100 ms.
func slowClients(ctx context.Context, addr, host string, pid, n int, probe target) *slowResult {
	res := &slowResult{Clients: n}
	res.BeforeKiB, _ = memory(pid)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var sampler sync.WaitGroup
	sampler.Go(func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			if rss, _ := memory(pid); rss > res.PeakKiB {
				res.PeakKiB = rss
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	var probes []time.Duration
	sampler.Go(func() {
		c := newLoadClient(1)
		for ctx.Err() == nil {
			took, err := fetch(c, probe)
			res.Probes++
			if err != nil {
				res.ProbeErrors++
			} else {
				probes = append(probes, took)
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	})

	held := make([]time.Duration, n)
	cut := make([]bool, n)
	var wg sync.WaitGroup
	for i := range n {
		kind := slowKinds[i%len(slowKinds)]
		wg.Go(func() { held[i], cut[i] = holdSlow(ctx, addr, host, kind) })
		if i%50 == 49 {
			time.Sleep(100 * time.Millisecond) // a burst, not one SYN flood
		}
	}
	wg.Wait()
	time.Sleep(3 * time.Second)
	cancel()
	sampler.Wait()
	res.AfterKiB, _ = memory(pid)
	for i := range n {
		if cut[i] {
			res.Cut++
		}
		res.Longest = max(res.Longest, held[i])
	}
	sort.Slice(probes, func(i, j int) bool { return probes[i] < probes[j] })
	res.ProbeP99 = percentile(probes, 0.99)
	return res
}

// holdSlow runs one slow client and returns how long its connection lasted
// and whether the gateway, not the client, ended it.
func holdSlow(ctx context.Context, addr, host string, kind slowKind) (time.Duration, bool) {
	start := time.Now()
	conn, err := (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, false
	}
	defer func() { _ = conn.Close() }()
	closed := make(chan struct{})
	go func() {
		// Whatever the gateway answers, the connection ends when it
		// closes it.
		_, _ = io.Copy(io.Discard, conn)
		close(closed)
	}()
	deadline := start.Add(slowHold)
	_ = conn.SetWriteDeadline(deadline)
	_, err = conn.Write(kind.first(host))
	if err == nil && kind.flood > 0 {
		_, err = conn.Write(floodBody[:kind.flood])
	}
	if err != nil {
		<-closedOrDeadline(closed, deadline)
		return time.Since(start), isClosed(closed)
	}
	t := time.NewTicker(kind.tick)
	defer t.Stop()
	for {
		select {
		case <-closed:
			return time.Since(start), true
		case <-time.After(time.Until(deadline)):
			return time.Since(start), false
		case <-t.C:
			if kind.each == nil {
				continue
			}
			if _, err := conn.Write(kind.each(host)); err != nil {
				<-closedOrDeadline(closed, deadline)
				return time.Since(start), isClosed(closed)
			}
		}
	}
}

// closedOrDeadline is closed when the connection is, or at the deadline.
func closedOrDeadline(closed <-chan struct{}, deadline time.Time) <-chan struct{} {
	out := make(chan struct{})
	go func() {
		select {
		case <-closed:
		case <-time.After(time.Until(deadline)):
		}
		close(out)
	}()
	return out
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
