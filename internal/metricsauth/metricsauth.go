// Package metricsauth guards a metrics endpoint as the API server would
// guard it: the caller shows a bearer token the API server accepts
// (TokenReview), and RBAC allows that caller get on the endpoint's path, a
// non-resource URL (SubjectAccessReview through internal/access).
//
// Written by hand rather than with controller-runtime's
// filters.WithAuthenticationAndAuthorization, which does the same through
// k8s.io/apiserver's delegating authenticator: that answers a malformed or
// forged token with 500 rather than 401, and it links gRPC, OpenTelemetry
// and CEL into the controller for one endpoint. Reviews in flight are
// bounded, so a flood of made-up tokens costs the API server a few
// requests at a time, not one each; a caller allowed once is remembered for
// a few minutes, so such a flood cannot crowd out the scraper that matters.
package metricsauth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/userland-dev/userland/internal/access"
)

// MaxReviews bounds the token and access reviews in flight at once; a
// caller beyond it gets 429.
const MaxReviews = 4

// reviewTimeout bounds one caller's reviews.
const reviewTimeout = 10 * time.Second

// slotWait is how long a caller waits for a review slot before 429.
const slotWait = time.Second

// allowedTTL is how long an allowed token and path are remembered (a
// revoked binding or token is honoured after at most this); maxAllowed
// bounds how many are.
const (
	allowedTTL = 5 * time.Minute
	maxAllowed = 256
)

// Filter is a metricsserver.FilterProvider: it asks the API server, with
// config's identity (which needs create on tokenreviews and
// subjectaccessreviews), about each caller.
func Filter(config *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	scheme := runtime.NewScheme()
	if err := authenticationv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := authorizationv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(config, client.Options{Scheme: scheme, HTTPClient: httpClient})
	if err != nil {
		return nil, fmt.Errorf("a client for the metrics endpoint's reviews: %w", err)
	}
	g := &Guard{Client: c, slots: make(chan struct{}, MaxReviews)}
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return g.Wrap(log, next), nil
	}, nil
}

// Guard checks callers with Client.
type Guard struct {
	Client client.Client
	slots  chan struct{}

	mu sync.Mutex
	// allowed are the callers (a hash of token and path) allowed lately,
	// until when. Only allowed ones: made-up tokens never grow it.
	allowed map[[sha256.Size]byte]time.Time
}

func callerKey(token, path string) [sha256.Size]byte {
	return sha256.Sum256([]byte(token + "\x00" + path))
}

// allowedLately reports whether key was allowed less than allowedTTL ago.
func (g *Guard) allowedLately(key [sha256.Size]byte, now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	until, ok := g.allowed[key]
	return ok && now.Before(until)
}

// remember notes key as allowed. A full memory drops what expired, and if
// still full is emptied (a few reviews then, not unbounded growth).
func (g *Guard) remember(key [sha256.Size]byte, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.allowed) >= maxAllowed {
		for k, until := range g.allowed {
			if !now.Before(until) {
				delete(g.allowed, k)
			}
		}
	}
	if g.allowed == nil || len(g.allowed) >= maxAllowed {
		g.allowed = map[[sha256.Size]byte]time.Time{}
	}
	g.allowed[key] = now.Add(allowedTTL)
}

// errUnauthenticated is a token the API server does not accept.
var errUnauthenticated = errors.New("unauthenticated")

// Wrap serves next to callers RBAC allows get on the request's path.
func (g *Guard) Wrap(log logr.Logger, next http.Handler) http.Handler {
	reviewer := access.Reviewer{Client: g.Client}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearer(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
			http.Error(w, "a bearer token is required", http.StatusUnauthorized)
			return
		}
		key := callerKey(token, r.URL.Path)
		if g.allowedLately(key, time.Now()) {
			next.ServeHTTP(w, r)
			return
		}
		wait := time.NewTimer(slotWait)
		defer wait.Stop()
		select {
		case g.slots <- struct{}{}:
			defer func() { <-g.slots }()
		case <-wait.C:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "too many callers at once", http.StatusTooManyRequests)
			return
		case <-r.Context().Done():
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), reviewTimeout)
		defer cancel()
		who, err := g.authenticate(ctx, token)
		if errors.Is(err, errUnauthenticated) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
			http.Error(w, "the token was not accepted", http.StatusUnauthorized)
			return
		}
		if err != nil {
			log.Error(err, "reviewing a metrics caller's token")
			http.Error(w, "the caller could not be checked", http.StatusServiceUnavailable)
			return
		}
		act := access.Action{Verb: "get", Path: r.URL.Path}
		allowed, err := reviewer.Allowed(ctx, who, act)
		if err != nil {
			log.Error(err, "reviewing a metrics caller's access", "user", who.User)
			http.Error(w, "the caller could not be checked", http.StatusServiceUnavailable)
			return
		}
		if !allowed {
			http.Error(w, fmt.Sprintf("%s may not %s", who.User, act), http.StatusForbidden)
			return
		}
		g.remember(key, time.Now())
		next.ServeHTTP(w, r)
	})
}

// authenticate asks the API server who token belongs to.
func (g *Guard) authenticate(ctx context.Context, token string) (access.Subject, error) {
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
	if err := g.Client.Create(ctx, review); err != nil {
		return access.Subject{}, fmt.Errorf("creating a TokenReview: %w", err)
	}
	if !review.Status.Authenticated || review.Status.User.Username == "" {
		return access.Subject{}, errUnauthenticated
	}
	return access.FromUserInfo(review.Status.User), nil
}

// bearer is the request's bearer token.
func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	return token, ok && strings.EqualFold(scheme, "bearer") && token != ""
}
