//go:build realnode

package realnode_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/userland-dev/userland/internal/realnode"
)

// startIngress is the stand-in for the ingress a cluster puts in front of
// the gateway, as the chart's own Ingress (gateway.ingress) describes it:
// TLS for url's host and *.<baseDomain> terminated with one certificate,
// both routed to the gateway's Service with the Host header kept and
// X-Forwarded-For/-Host/-Proto added, WebSocket upgrades passed through.
// There is no ingress controller on this machine, so this is the part of
// one the test needs, in Go: an httputil.ReverseProxy on 127.0.0.1 with a
// certificate it signs itself. It reaches the Service by its cluster DNS
// name from the node's network namespace, as an ingress controller on the
// node's host network does (ingress-nginx's hostNetwork DaemonSet); the
// node's own traffic is what the chart's gateway NetworkPolicy lets
// through here, as it lets an ingress-nginx namespace's pods. Chromium
// reaches it through --host-resolver-rules (the wildcard DNS record) and
// --ignore-certificate-errors (the certificate a university would buy).
// It speaks HTTP/1.1 only, so that a WebSocket is an Upgrade the proxy
// passes on rather than HTTP/2's extended CONNECT. It returns the
// listener's address; requests for any other host get 404, as an ingress
// controller's default backend answers.
func startIngress(t *testing.T, n *realnode.Node, backend, mainHost, baseDomain string) string {
	t.Helper()
	cert := selfSigned(t, mainHost, "*."+baseDomain)
	target := &url.URL{Scheme: "http", Host: backend}
	var mu sync.Mutex
	var failures []string
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host
			r.SetXForwarded()
		},
		Transport: &http.Transport{DialContext: n.ClusterDialContext, MaxIdleConnsPerHost: 32, IdleConnTimeout: 30 * time.Second},
		// Streamed answers (code-server's, Jupyter's) reach the browser
		// as they come, as ingress-nginx does with buffering off.
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			mu.Lock()
			failures = append(failures, fmt.Sprintf("%s %s%s: %v", time.Now().Format("15:04:05"), r.Host, r.URL.Path, err))
			mu.Unlock()
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	routed := func(host string) bool {
		host = strings.ToLower(host)
		return host == mainHost || (strings.HasSuffix(host, "."+baseDomain) && !strings.Contains(strings.TrimSuffix(host, "."+baseDomain), "."))
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !routed(r.Host) {
				http.NotFound(w, r)
				return
			}
			proxy.ServeHTTP(w, r)
		}),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}},
		TLSNextProto:      map[string]func(*http.Server, *tls.Conn, http.Handler){},
		ReadHeaderTimeout: 10 * time.Second,
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	t.Cleanup(func() {
		_ = srv.Close()
		mu.Lock()
		defer mu.Unlock()
		if len(failures) > 0 {
			t.Logf("the ingress stand-in could not reach the gateway %d times:\n  %s", len(failures), strings.Join(failures, "\n  "))
		}
	})
	return l.Addr().String()
}

// selfSigned is a certificate for names, signed by its own key.
func selfSigned(t *testing.T, names ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
