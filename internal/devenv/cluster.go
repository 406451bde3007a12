package devenv

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/simcluster"
)

// acquire takes the state directory's lock, so a second `userland dev`
// says so instead of sharing etcd's data, then honours Reset.
func (s *Stack) acquire() error {
	if err := os.MkdirAll(s.opts.StateDir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", s.opts.StateDir, err)
	}
	lockPath := filepath.Join(s.opts.StateDir, "lock")
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("opening %s: %w", lockPath, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		pid, _ := io.ReadAll(f)
		_ = f.Close()
		return fmt.Errorf("%w with state in %s (pid %s); stop it first, or use --state-dir", ErrLocked, s.opts.StateDir, strings.TrimSpace(string(pid)))
	}
	s.lock = f
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	if s.opts.Reset {
		entries, err := os.ReadDir(s.opts.StateDir)
		if err != nil {
			return fmt.Errorf("reading %s: %w", s.opts.StateDir, err)
		}
		for _, e := range entries {
			if e.Name() != "lock" {
				if err := os.RemoveAll(filepath.Join(s.opts.StateDir, e.Name())); err != nil {
					return fmt.Errorf("--reset: %w", err)
				}
			}
		}
		s.logf("reset: removed the previous state in %s", s.opts.StateDir)
	}
	return nil
}

// cluster starts the simulated cluster, or connects to the given one.
func (s *Stack) cluster(ctx context.Context) error {
	scheme := v1alpha1.NewScheme()
	s.KubeconfigPath = filepath.Join(s.opts.StateDir, "kubeconfig")
	if s.opts.Kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", s.opts.Kubeconfig)
		if err != nil {
			return fmt.Errorf("loading %s: %w", s.opts.Kubeconfig, err)
		}
		s.Config, s.KubeconfigPath = cfg, s.opts.Kubeconfig
		s.Client, err = client.New(cfg, client.Options{Scheme: scheme})
		return err
	}
	crdDir := filepath.Join(s.opts.StateDir, "crds")
	if err := writeEmbedded("crd/bases", crdDir); err != nil {
		return err
	}
	runDir := filepath.Join(s.opts.StateDir, "run")
	_ = os.RemoveAll(runDir)
	if err := os.MkdirAll(runDir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", runDir, err)
	}
	cwd, _ := os.Getwd()
	bins, err := simcluster.FindBinaries(simcluster.Full, s.opts.ControlPlaneDir, simcluster.FindCheckout(cwd))
	if err != nil {
		return err
	}
	start := time.Now()
	if s.opts.RealNode != nil {
		if err := s.startRealNode(ctx, bins, crdDir); err != nil {
			return err
		}
	} else {
		s.logf("starting the simulated cluster (etcd, kube-apiserver, controller-manager, scheduler, kwok) …")
		env, err := simcluster.Start(ctx, simcluster.Options{
			Mode: simcluster.Full, BinariesDir: bins, Dir: runDir, StateDir: s.opts.StateDir, CRDDirectoryPaths: []string{crdDir},
		})
		if err != nil {
			return fmt.Errorf("starting the simulated cluster: %w", err)
		}
		s.env = env
	}
	env := s.env
	s.logf("cluster ready in %s", time.Since(start).Round(100*time.Millisecond))
	if env.PortMoved {
		s.logf("the API server's previous port was taken, so it listens on a new one: tools that read %s before must read it again", filepath.Join(s.opts.StateDir, "kubeconfig"))
	}
	data, err := os.ReadFile(env.KubeconfigPath)
	if err != nil {
		return fmt.Errorf("reading kubeconfig: %w", err)
	}
	if err := os.WriteFile(s.KubeconfigPath, data, 0o600); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	s.Config = env.Config
	s.Client, err = client.New(env.Config, client.Options{Scheme: scheme})
	return err
}
