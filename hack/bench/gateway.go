package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"
)

// raiseFileLimit lifts the soft descriptor limit to the hard one (20,000
// on this workplace's machines); children inherit it.
func raiseFileLimit() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}

// serveUpstream is the environment the proxies forward to: small and
// 1 MiB responses, and a WebSocket echo that stays open.
func serveUpstream() error {
	small := []byte(strings.Repeat("x", 64))
	big := []byte(strings.Repeat("y", 1<<20))
	mux := http.NewServeMux()
	mux.HandleFunc("/small", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(small) })
	mux.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(big) })
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer func() { _ = c.CloseNow() }()
		for {
			kind, msg, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if err := c.Write(r.Context(), kind, msg); err != nil {
				return
			}
		}
	})
	return listenAndAnnounce(mux)
}

// serveBareProxy is the ceiling for any proxy here: httputil.ReverseProxy
// with a Transport tuned for one busy upstream.
func serveBareProxy(upstream string) error {
	target, err := url.Parse("http://" + upstream)
	if err != nil {
		return err
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConns, transport.MaxIdleConnsPerHost = 4096, 4096
	rp := &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(target); r.SetXForwarded() },
		Transport: transport,
	}
	return listenAndAnnounce(rp)
}

// listenAndAnnounce serves on a free loopback port and prints it first.
func listenAndAnnounce(h http.Handler) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(l.Addr().String())
	return (&http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}).Serve(l)
}

// child runs this binary in a role and reads the address it announces.
func child(role string, args ...string) (*process, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	p := &process{name: role}
	p.cmd = execCommand(self, append([]string{role}, args...)...)
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	p.cmd.Stderr = os.Stderr
	if err := p.cmd.Start(); err != nil {
		return nil, "", err
	}
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return nil, "", fmt.Errorf("%s did not announce its address: %w", role, err)
	}
	return p, strings.TrimSpace(addr), nil
}

// interleaved runs every target rounds times, round by round, so drift on
// the shared machine (the cluster's own background work, a GC cycle, a
// noisy neighbour) falls on all of them alike, and keeps each target's
// median run by key. One 10 s run per target had the gateway at 0.73 and
// at 1.08 of the bare proxy in two runs of the same code.
func interleaved(rounds int, order []string, run func(name string) loadResult, key func(loadResult) float64) map[string]loadResult {
	runs := map[string][]loadResult{}
	for range rounds {
		for _, name := range order {
			runs[name] = append(runs[name], run(name))
		}
	}
	median := map[string]loadResult{}
	for name, rs := range runs {
		sort.Slice(rs, func(i, j int) bool { return key(rs[i]) < key(rs[j]) })
		median[name] = rs[len(rs)/2]
	}
	return median
}

// loadResult is one closed- or open-loop run.
type loadResult struct {
	Requests int
	Errors   int
	RPS      float64
	P50, P99 time.Duration
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
}

func newLoadClient(concurrency int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = concurrency*2, concurrency*2
	return &http.Client{Transport: t, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// load sends GETs to target with a cookie for d: closed loop with
// concurrency workers when rate is 0, else open loop at rate per second.
func load(target, cookie string, concurrency int, rate float64, d time.Duration) loadResult {
	c := newLoadClient(concurrency)
	var mu sync.Mutex
	var lat []time.Duration
	var errs atomic.Int64
	do := func() {
		req, _ := http.NewRequest(http.MethodGet, target, nil)
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		start := time.Now()
		resp, err := c.Do(req)
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
		}
		elapsed := time.Since(start)
		if err != nil {
			errs.Add(1)
			return
		}
		mu.Lock()
		lat = append(lat, elapsed)
		mu.Unlock()
	}
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	if rate == 0 {
		for range concurrency {
			wg.Go(func() {
				for time.Now().Before(deadline) {
					do()
				}
			})
		}
	} else {
		// Paced by the clock, not a Ticker: a Ticker drops ticks its
		// receiver misses, and at a few thousand a second it offers well
		// under the intended rate.
		sem := make(chan struct{}, concurrency*4)
		start, sent := time.Now(), 0
		for now := start; now.Before(deadline); now = time.Now() {
			for due := int(now.Sub(start).Seconds() * rate); sent < due; sent++ {
				select {
				case sem <- struct{}{}:
					wg.Go(func() { do(); <-sem })
				default:
					errs.Add(1) // the target fell behind the offered rate
				}
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	wg.Wait()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return loadResult{
		Requests: len(lat), Errors: int(errs.Load()), RPS: float64(len(lat)) / d.Seconds(),
		P50: percentile(lat, 0.50), P99: percentile(lat, 0.99),
	}
}

// wsResult is one held-WebSockets run.
type wsResult struct {
	Opened, Dropped int
	KiBPerConn      float64
}

// holdWebSockets opens n WebSockets through proxyURL, sends a frame on
// each every interval while held for hold, and measures the proxy
// process's RSS growth per connection.
func holdWebSockets(ctx context.Context, proxyURL, cookie string, pid, n int, hold time.Duration) wsResult {
	before, _ := memory(pid)
	header := http.Header{}
	if cookie != "" {
		header.Set("Cookie", cookie)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var opened, dropped atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			dialCtx, dcancel := context.WithTimeout(ctx, 30*time.Second)
			c, _, err := websocket.Dial(dialCtx, proxyURL, &websocket.DialOptions{HTTPHeader: header, HTTPClient: newLoadClient(1)})
			dcancel()
			<-sem
			if err != nil {
				dropped.Add(1)
				return
			}
			opened.Add(1)
			defer func() { _ = c.CloseNow() }()
			// Frames spread over the interval, as idle editors ping.
			t := time.NewTicker(5 * time.Second)
			defer t.Stop()
			time.Sleep(time.Duration(i%5000) * time.Millisecond)
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
					err := c.Write(wctx, websocket.MessageText, []byte("ping"))
					if err == nil {
						_, _, err = c.Read(wctx)
					}
					wcancel()
					if err != nil && ctx.Err() == nil {
						dropped.Add(1)
						return
					}
				}
			}
		})
	}
	// Hold, then measure while every connection is open.
	time.Sleep(hold)
	after, _ := memory(pid)
	cancel()
	wg.Wait()
	res := wsResult{Opened: int(opened.Load()), Dropped: int(dropped.Load())}
	if res.Opened > 0 {
		res.KiBPerConn = float64(after-before) / float64(res.Opened)
	}
	return res
}

// signIn posts the static-user form and returns the session cookie.
func signIn(gateway, user, password string) (string, error) {
	c := newLoadClient(1)
	resp, err := c.PostForm(gateway+"/login", url.Values{"username": {user}, "password": {password}, "rd": {"/"}})
	if err != nil {
		return "", err
	}
	_ = resp.Body.Close()
	for _, ck := range resp.Cookies() {
		if ck.Name == "userland_session" {
			return ck.Name + "=" + ck.Value, nil
		}
	}
	return "", fmt.Errorf("sign-in: %s and no session cookie", resp.Status)
}
