package envtiming

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptrace"
	"net/url"
	"strings"
	"time"
)

// GatewayClient keeps cookies and sends every host (the dashboard's and
// each environment's own origin) to the gateway's address, as a browser
// resolving *.localhost to this machine does.
func GatewayClient(gateway string) *http.Client {
	jar, _ := cookiejar.New(nil) // never fails without options
	var d net.Dialer
	return &http.Client{Jar: jar, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, gateway)
		},
	}}
}

// SignIn signs user in on the gateway's static-user form.
func SignIn(ctx context.Context, c *http.Client, base, user, password string) error {
	form := url.Values{"username": {user}, "password": {password}, "rd": {"/"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(base, "/")+"/login", strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("signing %s in: %w", user, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("signing %s in: HTTP %d after redirects", user, resp.StatusCode)
	}
	return nil
}

// Answer is the app's answer to a request through the gateway.
type Answer struct {
	// FirstByte is from sending the first request to the first byte of
	// the answer that held the app's own content.
	FirstByte time.Duration
	// Attempts is how many requests that took: more than one when the
	// app answered something else first (a pod Ready before its app
	// serves, the gateway's 502 or 503 while it starts).
	Attempts int
	// Body is the start of that answer.
	Body string
	// Others are the other answers, in order, each "HTTP <code>" or the
	// error.
	Others []string
	// Took is how long each request took to its answer (or error), in
	// order: a request the gateway held, or one stuck on a dead
	// connection, shows here.
	Took []time.Duration
}

// Open loads u as a browser's page load does, following the gateway's
// sign-in hand-off to the environment's origin (which sets its cookie in
// c), until the answer holds want or timeout passes.
func Open(ctx context.Context, c *http.Client, u, want string, timeout time.Duration) (Answer, error) {
	return get(ctx, c, u, want, "text/html", timeout)
}

// Wake sends one plain request (not a page load: the gateway holds it
// while the environment starts, rather than answering with its progress
// page) to u, and again every 200 ms until an answer of 200 holds want or
// timeout passes. The environment's cookie must be in c (Open).
func Wake(ctx context.Context, c *http.Client, u, want string, timeout time.Duration) (Answer, error) {
	return get(ctx, c, u, want, "*/*", timeout)
}

func get(ctx context.Context, c *http.Client, u, want, accept string, timeout time.Duration) (Answer, error) {
	var a Answer
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		a.Attempts++
		var first time.Time
		trace := &httptrace.ClientTrace{GotFirstResponseByte: func() { first = time.Now() }}
		rctx, cancel := context.WithDeadline(httptrace.WithClientTrace(ctx, trace), deadline)
		sent := time.Now()
		code, body, err := fetch(rctx, c, u, accept)
		cancel()
		a.Took = append(a.Took, time.Since(sent))
		switch {
		case err != nil:
			a.Others = append(a.Others, err.Error())
		case code == http.StatusOK && strings.Contains(body, want):
			// The first byte of the last answer (redirects come first).
			a.FirstByte, a.Body = first.Sub(start), body
			return a, nil
		default:
			a.Others = append(a.Others, fmt.Sprintf("HTTP %d", code))
		}
		if time.Now().After(deadline) {
			return a, fmt.Errorf("GET %s: no 200 with %q within %s after %d requests: %s; last body %.200q",
				u, want, timeout, a.Attempts, summary(a.Others), body)
		}
		select {
		case <-ctx.Done():
			return a, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func fetch(ctx context.Context, c *http.Client, u, accept string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Accept", accept)
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(body), err
}

// summary counts repeated answers: "HTTP 502 ×12, HTTP 200".
func summary(others []string) string {
	var out []string
	for i := 0; i < len(others); {
		j := i
		for j < len(others) && others[j] == others[i] {
			j++
		}
		if j-i > 1 {
			out = append(out, fmt.Sprintf("%s ×%d", others[i], j-i))
		} else {
			out = append(out, others[i])
		}
		i = j
	}
	return strings.Join(out, ", ")
}

// Summary is Others counted: "HTTP 502 ×12, HTTP 503".
func (a Answer) Summary() string { return summary(a.Others) }

// Requests says how many requests it took and what came before:
// "1 request" or "4 requests, after HTTP 502 ×3".
func (a Answer) Requests() string {
	if a.Attempts == 1 {
		return "1 request"
	}
	if len(a.Others) == 0 {
		return fmt.Sprintf("%d requests", a.Attempts)
	}
	took := make([]string, len(a.Took))
	for i, d := range a.Took {
		took[i] = d.Round(time.Millisecond).String()
	}
	return fmt.Sprintf("%d requests, after %s; each took %s", a.Attempts, a.Summary(), strings.Join(took, ", "))
}
