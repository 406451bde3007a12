package gateway

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// StaticResolver sends every environment to fixed addresses: tests and
// `userland dev`, where pods are simulated and a local demo app answers.
type StaticResolver struct {
	mu sync.RWMutex
	// Default answers for environments without their own entry.
	Default string
	byName  map[string]string
}

// Set routes one environment to addr.
func (s *StaticResolver) Set(namespace, name, addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byName == nil {
		s.byName = map[string]string{}
	}
	s.byName[namespace+"/"+name] = addr
}

// Resolve returns the address for an environment.
func (s *StaticResolver) Resolve(_ context.Context, namespace, name string, _ types.UID, _ int32) (string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if addr, ok := s.byName[namespace+"/"+name]; ok {
		return addr, nil
	}
	if s.Default == "" {
		return "", fmt.Errorf("no address for %s/%s", namespace, name)
	}
	return s.Default, nil
}
