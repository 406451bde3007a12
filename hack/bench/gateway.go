package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/cookiejar"
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

	"github.com/userland-dev/userland/internal/echo"
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

// serveUpstream is the environment the proxies forward to: the echo app
// (64-byte and 1 MiB answers, and a WebSocket echo that stays open).
func serveUpstream() error {
	return listenAndAnnounce(echo.Handler())
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
	if err := p.start(); err != nil {
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
// noisy neighbour) falls on all of them alike. The first round keeps the
// given order; later ones shuffle it (with a fixed seed, so runs are
// comparable), so no target always follows the same one, and a second
// passes between runs for the last run's connections to close. It returns
// every run, in round order, by target. One 10 s run per target had the
// gateway at 0.73 and at 1.08 of the bare proxy in two runs of the same
// code.
func interleaved(rounds int, order []string, run func(name string) loadResult) map[string][]loadResult {
	runs := map[string][]loadResult{}
	shuffle := rand.New(rand.NewPCG(1, 2))
	for round := range rounds {
		this := append([]string(nil), order...)
		if round > 0 {
			shuffle.Shuffle(len(this), func(i, j int) { this[i], this[j] = this[j], this[i] })
		}
		for _, name := range this {
			time.Sleep(settle)
			r := run(name)
			logf("  %s: %.0f req/s, p50 %s, p99 %s, %d errors", name, r.RPS, ms(r.P50), ms(r.P99), r.Errors)
			runs[name] = append(runs[name], r)
		}
	}
	return runs
}

// settle is the pause before each load run.
var settle = time.Second

// medianBy is the run with the median key.
func medianBy(rs []loadResult, key func(loadResult) float64) loadResult {
	if len(rs) == 0 {
		return loadResult{}
	}
	sorted := append([]loadResult(nil), rs...)
	sort.Slice(sorted, func(i, j int) bool { return key(sorted[i]) < key(sorted[j]) })
	return sorted[len(sorted)/2]
}

// medians is medianBy for every target.
func medians(runs map[string][]loadResult, key func(loadResult) float64) map[string]loadResult {
	out := map[string]loadResult{}
	for name, rs := range runs {
		out[name] = medianBy(rs, key)
	}
	return out
}

// pairedRatio is the median over rounds of a's throughput over b's in the
// same round: a target is compared with the baseline that ran seconds
// before it, not with a baseline from a calmer or busier minute.
func pairedRatio(a, b []loadResult) float64 {
	var ratios []float64
	for i := range min(len(a), len(b)) {
		if b[i].RPS > 0 {
			ratios = append(ratios, a[i].RPS/b[i].RPS)
		}
	}
	if len(ratios) == 0 {
		return 0
	}
	sort.Float64s(ratios)
	return ratios[len(ratios)/2]
}

// loadResult is one closed- or open-loop run.
type loadResult struct {
	Requests int
	Errors   int
	// ErrorKinds counts Errors by kind (errorKind): what they are matters
	// as much as how many.
	ErrorKinds map[string]int
	RPS        float64
	P50, P99   time.Duration
	// ServerCPU is the CPU time (user and system) the process serving the
	// target spent during the run, when measured: on this shared 2-core
	// machine a steadier figure of a proxy's own cost than its throughput.
	ServerCPU time.Duration
}

// CPUPerRequest is ServerCPU spread over the requests served.
func (r loadResult) CPUPerRequest() time.Duration {
	if r.Requests == 0 {
		return 0
	}
	return r.ServerCPU / time.Duration(r.Requests)
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

// target is where a load run sends its requests: a URL, the Host they
// carry (environment hosts are reached at the gateway's own address), and
// the cookie that signs them in.
type target struct{ URL, Host, Cookie string }

// load sends GETs to t for d: closed loop with concurrency workers when
// rate is 0, else open loop at rate per second.
func load(t target, concurrency int, rate float64, d time.Duration) loadResult {
	c := newLoadClient(concurrency)
	var mu sync.Mutex
	var lat []time.Duration
	var errs atomic.Int64
	kinds := map[string]int{}
	failed := func(kind string) {
		errs.Add(1)
		mu.Lock()
		kinds[kind]++
		mu.Unlock()
	}
	do := func() {
		elapsed, err := fetch(c, t)
		if err != nil {
			failed(errorKind(err))
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
					failed(kindNotSent) // the target fell behind the offered rate
				}
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	wg.Wait()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return loadResult{
		Requests: len(lat), Errors: int(errs.Load()), ErrorKinds: kinds, RPS: float64(len(lat)) / d.Seconds(),
		P50: percentile(lat, 0.50), P99: percentile(lat, 0.99),
	}
}

// fetch sends one GET to t, reads the whole answer and says how long it
// took; an answer other than 200 is an error.
func fetch(c *http.Client, t target) (time.Duration, error) {
	req, err := http.NewRequest(http.MethodGet, t.URL, nil)
	if err != nil {
		return 0, err
	}
	if t.Host != "" {
		req.Host = t.Host
	}
	if t.Cookie != "" {
		req.Header.Set("Cookie", t.Cookie)
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if err == nil && resp.StatusCode != http.StatusOK {
		err = statusError(resp.StatusCode)
	}
	return time.Since(start), err
}

// statusError is an answer other than 200.
type statusError int

func (e statusError) Error() string { return fmt.Sprintf("status %d", int(e)) }

// kindNotSent is a request the open loop could not send: every allowed
// request was still waiting for an answer, so the target had fallen behind
// the offered rate (latency, not a failure of the answer itself).
const kindNotSent = "not sent: the target fell behind the offered rate"

// errorKind names what kind of failure err is, coarsely enough to count.
func errorKind(err error) string {
	var status statusError
	var netErr net.Error
	switch {
	case errors.As(err, &status):
		return fmt.Sprintf("HTTP %d", int(status))
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return "no local port free (EADDRNOTAVAIL)"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed before the answer (EOF)"
	case errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	}
	return "other: " + err.Error()
}

// addKinds adds b's counts into a (allocating it when nil) and returns it.
func addKinds(a, b map[string]int) map[string]int {
	if a == nil {
		a = map[string]int{}
	}
	for k, v := range b {
		a[k] += v
	}
	return a
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
			if err == nil {
				_, _, err = c.Read(dialCtx) // the echo app's greeting
			}
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

// signInHosts signs the user in as a browser would: it opens the
// environment host signed out, signs in on the main host's form, and
// follows the hand-off back. It returns the main host's session cookie and
// the environment host's own cookie. Every host is dialled at gwAddr.
func signInHosts(gwAddr, mainHost, envHost, user, password string) (session, env string, err error) {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, gwAddr)
		},
	}}
	req, _ := http.NewRequest(http.MethodGet, "http://"+envHost+"/", nil)
	req.Header.Set("Sec-Fetch-Mode", "navigate")
	resp, err := c.Do(req)
	if err != nil {
		return "", "", err
	}
	_ = resp.Body.Close()
	if resp.Request.URL.Host != mainHost || resp.Request.URL.Path != "/login" {
		return "", "", fmt.Errorf("a signed-out environment host led to %s (%s), not the sign-in form", resp.Request.URL, resp.Status)
	}
	form := url.Values{"username": {user}, "password": {password}, "rd": {resp.Request.URL.Query().Get("rd")}}
	if resp, err = c.PostForm("http://"+mainHost+"/login", form); err != nil {
		return "", "", err
	}
	_ = resp.Body.Close()
	if resp.Request.URL.Host != envHost {
		return "", "", fmt.Errorf("sign-in ended at %s (%s), not back on the environment host", resp.Request.URL, resp.Status)
	}
	session = cookieNamed(jar, "http://"+mainHost, "userland_session")
	env = cookieNamed(jar, "http://"+envHost, "userland_env")
	if session == "" || env == "" {
		return "", "", fmt.Errorf("sign-in left the session cookie %q and the environment cookie %q", session, env)
	}
	return session, env, nil
}

// cookieNamed is the "name=value" of the jar's cookie for u, or "".
func cookieNamed(jar http.CookieJar, u, name string) string {
	parsed, _ := url.Parse(u)
	for _, ck := range jar.Cookies(parsed) {
		if ck.Name == name {
			return ck.Name + "=" + ck.Value
		}
	}
	return ""
}
