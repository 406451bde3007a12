package auth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/userland-dev/userland/internal/gateway/session"
)

// OIDCConfig configures OpenID Connect sign-in.
type OIDCConfig struct {
	// Issuer is the provider's issuer URL.
	Issuer string
	// ClientID and ClientSecret identify the gateway to the provider.
	ClientID, ClientSecret string
	// RedirectURL is the gateway's /oauth2/callback as the browser sees it.
	RedirectURL string
	// Scopes default to openid, email, profile and groups.
	Scopes []string
	// UserClaim names the identity: email (default), preferred_username or
	// sub.
	UserClaim string
	// GroupsClaim names the groups claim ("groups").
	GroupsClaim string
	// AllowedEmailDomains and AllowedGroups, when set, restrict who may
	// sign in at all.
	AllowedEmailDomains, AllowedGroups []string
}

// OIDC signs users in with the authorization code flow and PKCE.
type OIDC struct {
	cfg      OIDCConfig
	oauth    oauth2.Config
	verifier *oidc.IDTokenVerifier
}

// NewOIDC discovers the provider (one request to its well-known document).
func NewOIDC(ctx context.Context, cfg OIDCConfig) (*OIDC, error) {
	provider, err := oidc.NewProvider(ctx, cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("discovering OIDC issuer %s: %w", cfg.Issuer, err)
	}
	if len(cfg.Scopes) == 0 {
		cfg.Scopes = []string{oidc.ScopeOpenID, "email", "profile", "groups"}
	}
	if cfg.UserClaim == "" {
		cfg.UserClaim = "email"
	}
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = "groups"
	}
	switch cfg.UserClaim {
	case "email", "preferred_username", "sub":
	default:
		return nil, fmt.Errorf("user claim %q: must be email, preferred_username or sub", cfg.UserClaim)
	}
	return &OIDC{
		cfg: cfg,
		oauth: oauth2.Config{
			ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, RedirectURL: cfg.RedirectURL,
			Endpoint: provider.Endpoint(), Scopes: cfg.Scopes,
		},
		verifier: provider.Verifier(&oidc.Config{ClientID: cfg.ClientID}),
	}, nil
}

func randomString() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Start begins a sign-in: the flow to keep in a cookie and the provider URL
// to send the browser to.
func (o *OIDC) Start(returnTo string) (session.Flow, string) {
	f := session.Flow{State: randomString(), Nonce: randomString(), Verifier: oauth2.GenerateVerifier(), Return: returnTo}
	return f, o.oauth.AuthCodeURL(f.State, oauth2.S256ChallengeOption(f.Verifier), oidc.Nonce(f.Nonce))
}

// Sign-in failures, by reason (for metrics and plain-words errors).
var (
	ErrStateMismatch = errors.New("the sign-in expired or was started elsewhere; please try again")
	ErrNotAllowed    = errors.New("this account may not use Userland")
)

// Finish completes a sign-in from the callback's code and state.
func (o *OIDC) Finish(ctx context.Context, f session.Flow, state, code string) (session.Identity, error) {
	if state == "" || state != f.State {
		return session.Identity{}, ErrStateMismatch
	}
	token, err := o.oauth.Exchange(ctx, code, oauth2.VerifierOption(f.Verifier))
	if err != nil {
		return session.Identity{}, fmt.Errorf("exchanging the code: %w", err)
	}
	raw, ok := token.Extra("id_token").(string)
	if !ok {
		return session.Identity{}, errors.New("the provider returned no id_token")
	}
	idToken, err := o.verifier.Verify(ctx, raw)
	if err != nil {
		return session.Identity{}, fmt.Errorf("verifying the id_token: %w", err)
	}
	if idToken.Nonce != f.Nonce {
		return session.Identity{}, ErrStateMismatch
	}
	var claims map[string]any
	if err := idToken.Claims(&claims); err != nil {
		return session.Identity{}, fmt.Errorf("reading claims: %w", err)
	}
	return o.identity(claims)
}

func (o *OIDC) identity(claims map[string]any) (session.Identity, error) {
	str := func(k string) string { s, _ := claims[k].(string); return s }
	id := session.Identity{User: str(o.cfg.UserClaim)}
	if verified, _ := claims["email_verified"].(bool); verified {
		id.Email = str("email")
	}
	if o.cfg.UserClaim == "email" && id.Email == "" {
		// An unverified address must not become an identity.
		return session.Identity{}, fmt.Errorf("%w: the e-mail address is not verified", ErrNotAllowed)
	}
	if groups, ok := claims[o.cfg.GroupsClaim].([]any); ok {
		for _, g := range groups {
			if s, ok := g.(string); ok {
				id.Groups = append(id.Groups, s)
			}
		}
	}
	if id.User == "" {
		return session.Identity{}, fmt.Errorf("%w: the %s claim is empty", ErrNotAllowed, o.cfg.UserClaim)
	}
	if len(o.cfg.AllowedEmailDomains) > 0 {
		_, domain, _ := strings.Cut(id.Email, "@")
		if !slices.Contains(o.cfg.AllowedEmailDomains, strings.ToLower(domain)) {
			return session.Identity{}, fmt.Errorf("%w: e-mail domain not allowed", ErrNotAllowed)
		}
	}
	if len(o.cfg.AllowedGroups) > 0 && !slices.ContainsFunc(id.Groups, func(g string) bool { return slices.Contains(o.cfg.AllowedGroups, g) }) {
		return session.Identity{}, fmt.Errorf("%w: not in an allowed group", ErrNotAllowed)
	}
	return id, nil
}
