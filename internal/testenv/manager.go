package testenv

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// managers are the package-wide managers RunManager started.
type managers struct {
	mu    sync.Mutex
	stops []func() error
}

// RunManager runs a package-wide manager (a controller every test of the
// package shares, as the gateway's tests do) in the background until the
// environment stops. Stop stops it first and waits for it, so that it
// does not outlive the control plane, failing (and logging) against an
// API server that has gone away.
func (e *Environment) RunManager(mgr interface{ Start(context.Context) error }) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	e.OnStop(func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			return errors.New("manager did not stop within 30s")
		}
	})
}

// OnStop registers stop to run when the environment stops, before the
// cluster does: for what a package runs beside its tests.
func (e *Environment) OnStop(stop func() error) {
	e.managers.mu.Lock()
	defer e.managers.mu.Unlock()
	e.managers.stops = append(e.managers.stops, stop)
}

// Stop stops the managers RunManager started, then the cluster.
func (e *Environment) Stop() error {
	e.managers.mu.Lock()
	stops := e.managers.stops
	e.managers.stops = nil
	e.managers.mu.Unlock()
	var errs []error
	for _, stop := range stops {
		if err := stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping a manager: %w", err))
		}
	}
	return errors.Join(append(errs, e.Cluster.Stop())...)
}
