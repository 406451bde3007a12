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
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/gateway/session"
	"github.com/userland-dev/userland/internal/idle"
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

// Resolver finds the address of an environment's pod.
type Resolver interface {
	// Resolve returns host:port of the serving pod of the Userland
	// namespace/name whose UID is uid: the one the request was authorised
	// for, not a later one of the same name.
	Resolve(ctx context.Context, namespace, name string, uid types.UID, port int32) (string, error)
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
	// Activity is called whenever the client does something that counts
	// as use under Rules: a request, or a WebSocket message it sends.
	// What the environment sends never counts.
	Activity func(v1alpha1.ActivitySource)
	// Rules are the template's activity rules (nil: the defaults).
	Rules *idle.Rules
	// CookiePath confines cookies the environment sets to its prefix
	// (path routing); empty with subdomain routing.
	CookiePath string
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
	// DropCookies are request cookies, besides the gateway's own, that no
	// environment sees: in header mode the authenticating proxy's
	// session, or a single sign-on cookie of a shared parent domain.
	DropCookies CookieNames
	// DropAuthorization removes the Authorization header: in header mode
	// it can carry the authenticating proxy's (or the identity
	// provider's) token, meant for the gateway's side of the proxy.
	DropAuthorization bool
	transport         http.RoundTripper
	dial              Dial
	webSockets        webSockets
}

// New returns a Proxy with a Transport tuned for one gateway talking to
// many small upstreams: many idle connections per host (Go's default of 2
// halves throughput), short dial timeouts so a stopped pod fails fast.
func New(extraIdentityHeaders []string) *Proxy {
	return NewWithTimeout(extraIdentityHeaders, DefaultResponseHeaderTimeout)
}

// DefaultResponseHeaderTimeout bounds the wait for an environment's
// response headers: long enough for a slow notebook save or a long poll,
// short enough that a hung app does not pin requests forever.
const DefaultResponseHeaderTimeout = 5 * time.Minute

// NewWithTimeout is New with a bound on how long an environment may take to
// send its response headers (0: no bound).
func NewWithTimeout(extraIdentityHeaders []string, responseHeaderTimeout time.Duration) *Proxy {
	return NewWithDial(extraIdentityHeaders, responseHeaderTimeout, nil)
}

// Dial connects to an environment's address (host:port, as a Resolver
// returned it).
type Dial func(ctx context.Context, network, addr string) (net.Conn, error)

// NewWithDial is NewWithTimeout connecting through dial (nil: a plain
// dialer): `userland dev --real-node` reaches pods from inside the real
// node's network namespace, since the host has no route to them.
func NewWithDial(extraIdentityHeaders []string, responseHeaderTimeout time.Duration, dial Dial) *Proxy {
	if dial == nil {
		dial = (&net.Dialer{Timeout: DialTimeout, KeepAlive: 30 * time.Second}).DialContext
	}
	dial = boundedDial(dial, DialTimeout)
	dial = retryingDial(dial, StartupDialBudget, sleepCtx)
	return &Proxy{
		ExtraIdentityHeaders: extraIdentityHeaders,
		dial:                 dial,
		transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           dial,
			MaxIdleConns:          1024,
			MaxIdleConnsPerHost:   64,
			IdleConnTimeout:       90 * time.Second,
			ResponseHeaderTimeout: responseHeaderTimeout,
			ForceAttemptHTTP2:     false,
		},
	}
}

// ServeHTTP forwards r per req. A protocol switch (WebSocket) is handed to
// a tunnel that outlives this call; req.Done reports its end.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request, req Request) {
	if req.Activity == nil {
		req.Activity = func(v1alpha1.ActivitySource) {}
	}
	if req.Rules.RequestCounts(r.Method, req.Path) {
		req.Activity(v1alpha1.ActivityRequest)
	}
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
		BufferPool: responseBuffers{},
		Rewrite:    func(pr *httputil.ProxyRequest) { p.rewrite(pr, req) },
		ModifyResponse: func(resp *http.Response) error {
			filterResponse(resp.Header, req.CookiePath)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, _ error) { p.unavailable(w, r) },
	}
	// The dial's retries end with the request (retryingDial).
	rp.ServeHTTP(w, r.WithContext(withRequestContext(r.Context())))
}

// responseBuffers lends ReverseProxy the tunnels' pooled copy buffers.
type responseBuffers struct{}

func (responseBuffers) Get() []byte { return *copyBuffers.Get().(*[]byte) }

func (responseBuffers) Put(b []byte) { copyBuffers.Put(&b) }

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
	dropIdentityHeaders(out.Header, p.ExtraIdentityHeaders)
	pr.SetXForwarded()
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
	if p.DropAuthorization {
		out.Header.Del("Authorization")
	}
	stripCookies(out.Header, &p.DropCookies)
}
