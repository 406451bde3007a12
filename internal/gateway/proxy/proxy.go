// Package proxy forwards a signed-in user's requests to their environment:
// HTTP, streaming responses and WebSockets, through
// net/http/httputil.ReverseProxy with Rewrite. It removes every identity
// header the client sent and the gateway's session cookie, and sets its own.
package proxy

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/userland-dev/userland/internal/gateway/session"
)

// Identity headers the gateway sets for environments. Whatever a client
// sends under these names (and under any configured extra names) is
// dropped first.
const (
	HeaderUser   = "X-Forwarded-User"
	HeaderEmail  = "X-Forwarded-Email"
	HeaderGroups = "X-Forwarded-Groups"
	HeaderPrefix = "X-Forwarded-Prefix"
)

// Resolver finds the address of an environment's Service.
type Resolver interface {
	// Resolve returns host:port for the Userland's Service.
	Resolve(namespace, name string, port int32) (string, error)
}

// ClusterDNS resolves Services by their cluster DNS name.
type ClusterDNS struct {
	// Domain is the cluster domain, "cluster.local" by default.
	Domain string
}

// Resolve returns <name>.<namespace>.svc.<domain>:<port>.
func (c ClusterDNS) Resolve(namespace, name string, port int32) (string, error) {
	domain := c.Domain
	if domain == "" {
		domain = "cluster.local"
	}
	return net.JoinHostPort(name+"."+namespace+".svc."+domain, strconv.Itoa(int(port))), nil
}

// Request is one request to forward.
type Request struct {
	// Upstream is host:port of the environment.
	Upstream string
	// Path is the escaped path to send upstream (prefix stripped or not).
	Path string
	// Prefix is sent as X-Forwarded-Prefix when the prefix was stripped.
	Prefix string
	// Identity is who the gateway signed in.
	Identity session.Identity
	// Activity is called whenever bytes flow in either direction,
	// including on upgraded (WebSocket) connections.
	Activity func()
	// Done, if set, is called once when the exchange is over: when
	// ServeHTTP returns for plain requests, when the tunnel closes for
	// upgraded ones.
	Done func()
}

// Proxy forwards requests.
type Proxy struct {
	// ExtraIdentityHeaders are more client headers to drop (e.g. the
	// trusted-header names in that mode).
	ExtraIdentityHeaders []string
	transport            http.RoundTripper
	dial                 func(ctx context.Context, network, addr string) (net.Conn, error)
}

// New returns a Proxy with a Transport tuned for one gateway talking to
// many small upstreams: many idle connections per host (Go's default of 2
// halves throughput), short dial timeouts so a stopped pod fails fast.
func New(extraIdentityHeaders []string) *Proxy {
	dial := (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	return &Proxy{
		ExtraIdentityHeaders: extraIdentityHeaders,
		dial:                 dial,
		transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           dial,
			MaxIdleConns:          1024,
			MaxIdleConnsPerHost:   64,
			IdleConnTimeout:       90 * time.Second,
			ResponseHeaderTimeout: 0, // long polls and SSE are legitimate
			ForceAttemptHTTP2:     false,
		},
	}
}

// ServeHTTP forwards r per req. A protocol switch (WebSocket) is handed to
// a tunnel that outlives this call; req.Done reports its end.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request, req Request) {
	if req.Activity == nil {
		req.Activity = func() {}
	}
	req.Activity()
	if isUpgrade(r) {
		p.serveUpgrade(w, r, req)
		return
	}
	if req.Done != nil {
		defer req.Done()
	}
	rp := &httputil.ReverseProxy{
		Transport: p.transport,
		// ReverseProxy flushes responses of unknown length (chunked
		// streams) and text/event-stream at once by itself; flushing every
		// write of a sized response too would cost a syscall per write.
		FlushInterval: 0,
		// Without a pool every response allocates a fresh 32 KiB copy
		// buffer: most of the proxy's garbage under small requests.
		BufferPool:   responseBuffers{},
		Rewrite:      func(pr *httputil.ProxyRequest) { p.rewrite(pr, req) },
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, _ error) { p.unavailable(w, r) },
	}
	rp.ServeHTTP(&activityWriter{ResponseWriter: w, activity: req.Activity}, r)
}

// responseBuffers lends ReverseProxy the tunnels' pooled copy buffers.
type responseBuffers struct{}

func (responseBuffers) Get() []byte { return *copyBuffers.Get().(*[]byte) }

func (responseBuffers) Put(b []byte) { copyBuffers.Put(&b) }

// identityHeaders are dropped from every client request: whatever a client
// says about who it is, only the gateway's word reaches an environment.
var identityHeaders = []string{
	HeaderUser, HeaderEmail, HeaderGroups, HeaderPrefix,
	"X-Auth-Request-User", "X-Auth-Request-Email", "X-Auth-Request-Groups", "X-Remote-User", "Remote-User",
}

// rewrite points the outgoing request at the environment and replaces the
// identity headers.
func (p *Proxy) rewrite(pr *httputil.ProxyRequest, req Request) {
	out := pr.Out
	out.URL.Scheme = "http"
	out.URL.Host = req.Upstream
	out.URL.RawPath = req.Path
	if u, err := url.PathUnescape(req.Path); err == nil {
		out.URL.Path = u
	}
	out.Host = pr.In.Host
	pr.SetXForwarded()
	for _, h := range identityHeaders {
		out.Header.Del(h)
	}
	for _, h := range p.ExtraIdentityHeaders {
		out.Header.Del(h)
	}
	out.Header.Set(HeaderUser, req.Identity.User)
	if req.Identity.Email != "" {
		out.Header.Set(HeaderEmail, req.Identity.Email)
	}
	if len(req.Identity.Groups) > 0 {
		out.Header.Set(HeaderGroups, strings.Join(req.Identity.Groups, ","))
	}
	if req.Prefix != "" {
		out.Header.Set(HeaderPrefix, req.Prefix)
	}
	stripSessionCookie(out.Header)
}

// stripSessionCookie removes the gateway's cookie: an environment must
// never see a credential for other environments.
func stripSessionCookie(h http.Header) {
	cookies := h.Values("Cookie")
	h.Del("Cookie")
	for _, line := range cookies {
		var kept []string
		for _, part := range strings.Split(line, ";") {
			name, _, _ := strings.Cut(strings.TrimSpace(part), "=")
			if name != session.CookieName && strings.TrimSpace(part) != "" {
				kept = append(kept, strings.TrimSpace(part))
			}
		}
		if len(kept) > 0 {
			h.Add("Cookie", strings.Join(kept, "; "))
		}
	}
}

// activityWriter reports activity on every write of a response.
type activityWriter struct {
	http.ResponseWriter
	activity func()
}

func (a *activityWriter) Write(b []byte) (int, error) {
	a.activity()
	return a.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush on the real writer.
func (a *activityWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }
