package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// Run is the body of a package's TestMain: it sets up logging, starts one
// environment for the package, stores it in *env, runs the tests and stops it — also on
// SIGINT/SIGTERM, and shortly before `go test -timeout` would kill the
// binary. Use as: func TestMain(m *testing.M) { os.Exit(testenv.Run(m, opts, &env)) }.
func Run(m *testing.M, opts Options, env **Environment) int {
	flag.Parse()
	// Controller logs go to stderr at error level; USERLAND_TEST_LOGS=1
	// shows everything.
	level := zapcore.ErrorLevel
	if os.Getenv("USERLAND_TEST_LOGS") != "" {
		level = zapcore.DebugLevel
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(level)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	start := time.Now()
	e, err := Start(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "testenv: control plane (%s) ready in %s\n", opts.Mode, time.Since(start).Round(time.Millisecond))
	*env = e

	stopOnce := make(chan struct{}, 1)
	stopOnce <- struct{}{}
	stop := func(why string) {
		select {
		case <-stopOnce:
			if why != "" {
				fmt.Fprintf(os.Stderr, "testenv: %s: stopping the control plane\n", why)
			}
			if err := e.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "testenv: stopping: %v\n", err)
			}
		default:
		}
	}

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-signals
		stop("received " + sig.String())
		os.Exit(1)
	}()
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, err := time.ParseDuration(f.Value.String()); err == nil && d > time.Minute {
			// go test panics at the timeout; stop first so no process is
			// left behind (children also exit on their own when we die).
			timer := time.AfterFunc(d-30*time.Second, func() { stop("test timeout approaching") })
			defer timer.Stop()
		}
	}

	code := m.Run()
	stop("")
	return code
}

var unsafeNameChars = regexp.MustCompile(`[^a-z0-9-]+`)

// Namespace creates a namespace for one test, named after it with a random
// suffix, and deletes it when the test ends.
func (e *Environment) Namespace(t testing.TB) string {
	t.Helper()
	base := unsafeNameChars.ReplaceAllString(strings.ToLower(t.Name()), "-")
	if len(base) > 40 {
		base = base[:40]
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	name := strings.Trim(base, "-") + "-" + hex.EncodeToString(suffix)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		// Background propagation lets the namespace controller (full mode)
		// clean up; in API-only mode the namespace just stays Terminating.
		_ = e.Client.Delete(context.Background(), ns, client.PropagationPolicy(metav1.DeletePropagationBackground))
	})
	return name
}
