package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// student drives one browser through a class start: open the environment
// signed out, sign in on the main host, follow the hand-off back, sit on
// the progress page (reloading as its meta refresh says) until the
// environment answers, then make the app's first requests: three
// subresources and a WebSocket, as Jupyter and VS Code do on load.
type student struct {
	gwAddr, mainHost, envHost string
	user, password            string
	// deadline bounds the whole visit.
	deadline time.Duration
}

// visit runs the sequence and says what it saw.
func (st student) visit(ctx context.Context) studentRun {
	run := studentRun{User: st.user}
	ctx, cancel := context.WithTimeout(ctx, st.deadline)
	defer cancel()
	jar, _ := cookiejar.New(nil)
	transport := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, st.gwAddr)
		},
		MaxIdleConnsPerHost: 4,
	}
	defer transport.CloseIdleConnections()
	c := &http.Client{Jar: jar, Transport: transport}
	fail := func(format string, args ...any) studentRun {
		run.Errors = append(run.Errors, fmt.Sprintf(format, args...))
		return run
	}
	envURL := "http://" + st.envHost + "/"
	resp, err := navigate(ctx, c, http.MethodGet, envURL, nil)
	if err != nil {
		return fail("opening the environment signed out: %v", err)
	}
	drain(resp)
	if resp.Request.URL.Host != st.mainHost || resp.Request.URL.Path != "/login" || resp.StatusCode != http.StatusOK {
		return fail("opening the environment signed out led to %s (%s), not the sign-in form", resp.Request.URL.Path, resp.Status)
	}
	form := url.Values{"username": {st.user}, "password": {st.password}, "rd": {resp.Request.URL.Query().Get("rd")}}
	run.SignIn = time.Now()
	resp, err = navigate(ctx, c, http.MethodPost, "http://"+st.mainHost+"/login", form)
	for err == nil {
		page := resp.Request.URL
		if page.Host != st.envHost {
			drain(resp)
			return fail("sign-in ended at %s%s (%s), not on the environment host", page.Host, page.Path, resp.Status)
		}
		switch resp.StatusCode {
		case http.StatusOK:
			run.FirstByte = time.Now()
			drain(resp)
			run.Errors = append(run.Errors, st.appRequests(ctx, c)...)
			return run
		case http.StatusAccepted:
			run.ProgressPages++
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			_ = resp.Body.Close()
			select {
			case <-ctx.Done():
				return fail("still on the progress page after %s", st.deadline)
			case <-time.After(refreshDelay(body)):
			}
			resp, err = navigate(ctx, c, http.MethodGet, page.String(), nil)
		default:
			drain(resp)
			return fail("%s: %s", page.Path, resp.Status)
		}
	}
	return fail("%v", err)
}

// navigate is a top-level navigation (the browser follows redirects).
func navigate(ctx context.Context, c *http.Client, method, u string, form url.Values) (*http.Response, error) {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Accept", "text/html")
	req.Header.Set("Sec-Fetch-Mode", "navigate")
	return c.Do(req)
}

// appRequests are the page's first requests on its own origin.
func (st student) appRequests(ctx context.Context, c *http.Client) []string {
	var mu sync.Mutex
	var errs []string
	note := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, fmt.Sprintf(format, args...))
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+st.envHost+"/small", nil)
			req.Header.Set("Sec-Fetch-Mode", "no-cors")
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			resp, err := c.Do(req)
			if err != nil {
				note("subresource: %v", err)
				return
			}
			drain(resp)
			if resp.StatusCode != http.StatusOK {
				note("subresource: %s", resp.Status)
			}
		})
	}
	wg.Go(func() {
		h := http.Header{"Origin": {"http://" + st.envHost}}
		ws, _, err := websocket.Dial(ctx, "ws://"+st.envHost+"/ws", &websocket.DialOptions{HTTPClient: c, HTTPHeader: h})
		if err != nil {
			note("WebSocket: %v", err)
			return
		}
		defer func() { _ = ws.CloseNow() }()
		if _, _, err := ws.Read(ctx); err != nil {
			note("WebSocket greeting: %v", err)
		}
	})
	wg.Wait()
	return errs
}

var metaRefresh = regexp.MustCompile(`http-equiv="refresh" content="([0-9]+)"`)

// refreshDelay is how long a browser stays on a page before its meta
// refresh reloads it (a second when it has none).
func refreshDelay(page []byte) time.Duration {
	if m := metaRefresh.FindSubmatch(page); m != nil {
		if n, err := strconv.Atoi(string(m[1])); err == nil {
			return time.Duration(n) * time.Second
		}
	}
	return time.Second
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 8<<20))
	_ = resp.Body.Close()
}
