package simcluster

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A cluster with a StateDir keeps what a client's kubeconfig depends on:
// its certificate authority and its API server's port. A tool that read
// the kubeconfig before a restart keeps working after it.
const (
	caCertFile = "ca.crt"
	caKeyFile  = "ca.key"
	portFile   = "apiserver-port"
)

// stateAuthority loads the CA kept in dir, or makes one and keeps it.
func stateAuthority(dir string) (*authority, error) {
	certPEM, certErr := os.ReadFile(filepath.Join(dir, caCertFile))
	keyPEM, keyErr := os.ReadFile(filepath.Join(dir, caKeyFile))
	if certErr == nil && keyErr == nil {
		if a, err := parseAuthority(certPEM, keyPEM); err == nil {
			return a, nil
		}
	}
	a, err := newAuthority()
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(a.key)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	if err := os.WriteFile(filepath.Join(dir, caKeyFile), keyPEM, 0o600); err != nil {
		return nil, fmt.Errorf("keeping the CA key: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, caCertFile), a.certPEM, 0o600); err != nil {
		return nil, fmt.Errorf("keeping the CA certificate: %w", err)
	}
	return a, nil
}

func parseAuthority(certPEM, keyPEM []byte) (*authority, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, errors.New("not PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, err
	}
	key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, errors.New("the CA key cannot sign")
	}
	return &authority{cert: cert, key: signer, certPEM: certPEM}, nil
}

// statePort is the port kept in dir when it is still free, else a new
// free one (kept for next time). moved reports that the kept one was
// taken.
func statePort(dir string) (port int, moved bool, err error) {
	path := filepath.Join(dir, portFile)
	if data, err := os.ReadFile(path); err == nil {
		if p, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && p > 0 && p < 65536 {
			if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
				_ = l.Close()
				return p, false, nil
			}
			moved = true
		}
	}
	if port, err = FreePort(); err != nil {
		return 0, false, err
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(port)+"\n"), 0o600); err != nil {
		return 0, false, fmt.Errorf("keeping the API server's port: %w", err)
	}
	return port, moved, nil
}
