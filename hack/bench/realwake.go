package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/devcontroller"
	"github.com/userland-dev/userland/internal/devenv"
	"github.com/userland-dev/userland/internal/envtiming"
	"github.com/userland-dev/userland/internal/realnode"
	"github.com/userland-dev/userland/internal/simcluster"
)

// The real-node wake needs what make test-node needs; make bench sets
// these from the build scripts, as make test-node does.
const (
	nodeDirEnv    = "USERLAND_NODE_DIR"
	appImagesEnv  = "USERLAND_APP_IMAGES"
	nodeImagesEnv = "USERLAND_REALNODE_IMAGES" // pause.tar and probe.tar (hack/nodeimage pack)
)

// realApp is one sample of `userland dev`'s demo: whose environment it
// is, and what its app answers on a plain request (on a real node; on
// kwok the built-in demo app answers).
type realApp struct {
	template, user, path, want string
}

// realApps are the samples' real apps, each woken on its own.
var realApps = []realApp{
	{template: "vscode", user: "alice", path: "/healthz", want: `"status"`}, // code-server's health answer
	{template: "jupyterlab", user: "alice", path: "/api", want: `"version"`},
	{template: "phpmyadmin", user: "bob", path: "/", want: "pma_username"}, // its sign-in form
}

// appWake is one app's wake on one stack.
type appWake struct {
	Stop time.Duration
	Wake envtiming.Answer
	// Pod is the woken pod's own created → Ready.
	Pod string
	// Err says why it was not measured.
	Err string
}

// realWakeResult is the real-node wake rows: each real app stopped →
// first byte through the gateway on a real node, beside the same on
// kwok, or why it was not run.
type realWakeResult struct {
	// NotRun says why nothing was run on a real node (the kwok side runs
	// anyway).
	NotRun     string
	Real, Kwok map[string]appWake
}

// failed lists the apps whose wake was run and failed.
func (r *realWakeResult) failed() error {
	var errs []error
	for _, side := range []map[string]appWake{r.Real, r.Kwok} {
		for app, w := range side {
			if w.Err != "" {
				errs = append(errs, fmt.Errorf("%s: %s", app, w.Err))
			}
		}
	}
	return errors.Join(errs...)
}

// benchRealWake runs `userland dev`'s stack (the controller and the
// gateway in this process) on kwok and then on a real node, and on each
// stops every sample's environment as idle and wakes it with one plain
// request through the gateway, timed to the first byte of the app's own
// answer.
func benchRealWake(ctx context.Context, dir string) *realWakeResult {
	r := &realWakeResult{}
	cp, err := simcluster.FindBinaries(simcluster.Full, os.Getenv("USERLAND_CONTROL_PLANE_DIR"), "")
	if err != nil {
		r.NotRun = err.Error()
		return r
	}
	logf("real-node wake: the same wakes on kwok first")
	r.Kwok = wakeApps(ctx, dir, "kwok", devenv.Options{ControlPlaneDir: cp}, func(name string, _ realApp) (string, string) {
		return "/", "Environment " + devenv.DemoNamespace + "/" + name + " "
	})
	node, why := realNodeOptions()
	if why != "" {
		r.NotRun = why
		logf("real-node wake: NOT RUN: %s", why)
		return r
	}
	logf("real-node wake: on a real node (waits while another real node runs)")
	r.Real = wakeApps(ctx, dir, "realnode", devenv.Options{ControlPlaneDir: cp, RealNode: node}, func(_ string, a realApp) (string, string) {
		return a.path, a.want
	})
	return r
}

// realNodeOptions are the node's parts, or why a node cannot run here.
func realNodeOptions() (*devenv.RealNodeOptions, string) {
	if err := realnode.Supported(); err != nil {
		return nil, err.Error()
	}
	var missing []string
	for _, env := range []string{nodeDirEnv, appImagesEnv, nodeImagesEnv} {
		if os.Getenv(env) == "" {
			missing = append(missing, env)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Sprintf("this machine can run a real node, but these are not set: %s (make bench sets them from hack/build-node.sh, hack/build-app-images.sh and hack/nodeimage)", strings.Join(missing, ", "))
	}
	archives, overrides, err := realnode.ReadAppImages(os.Getenv(appImagesEnv))
	if err != nil {
		return nil, err.Error()
	}
	images := []string{filepath.Join(os.Getenv(nodeImagesEnv), "pause.tar"), filepath.Join(os.Getenv(nodeImagesEnv), "probe.tar")}
	return &devenv.RealNodeOptions{
		NodeBinariesDir: os.Getenv(nodeDirEnv), Images: append(images, archives...), ImageOverrides: overrides,
		LockWait: 15 * time.Minute,
	}, ""
}

// wakeApps starts a dev stack with opts, wakes each real app's demo
// environment on it, and stops it. answer is the path to ask and what
// the answer holds, for an environment's name and app.
func wakeApps(ctx context.Context, dir, name string, opts devenv.Options, answer func(string, realApp) (string, string)) map[string]appWake {
	out := map[string]appWake{}
	fail := func(err error) map[string]appWake {
		logf("real-node wake: %s: FAILED: %v", name, err)
		for _, a := range realApps {
			if _, done := out[a.template]; !done {
				out[a.template] = appWake{Err: err.Error()}
			}
		}
		return out
	}
	listen, err := simcluster.FreeAddr()
	if err != nil {
		return fail(err)
	}
	log, err := os.Create(filepath.Join(dir, name+"-dev.log"))
	if err != nil {
		return fail(err)
	}
	defer func() { _ = log.Close() }()
	opts.StateDir, opts.Listen, opts.Log, opts.NewController = filepath.Join(dir, name+"-dev"), listen, log, devcontroller.New
	sctx, cancel := context.WithTimeout(ctx, 40*time.Minute)
	defer cancel()
	stack, err := devenv.Start(sctx, opts)
	if err != nil {
		return fail(fmt.Errorf("starting the dev stack (log %s): %w", log.Name(), err))
	}
	defer func() {
		if err := stack.Stop(); err != nil {
			logf("real-node wake: %s: stopping the dev stack: %v", name, err)
		}
	}()
	if err := keepOnlyRealApps(sctx, stack.Client); err != nil {
		return fail(err)
	}
	for _, a := range realApps {
		key, err := demoEnvironment(sctx, stack.Client, a)
		if err != nil {
			return fail(err)
		}
		path, want := answer(key.Name, a)
		w, err := wakeApp(sctx, stack, listen, key, a.user, path, want)
		if err != nil {
			w.Err = err.Error()
			logf("real-node wake: %s: %s: FAILED: %v", name, a.template, err)
		} else {
			logf("real-node wake: %s: %s: stopped in %s; woken, first byte after %s (%s), pod created → Ready %s",
				name, a.template, secs(w.Stop), secs(w.Wake.FirstByte), w.Wake.Requests(), w.Pod)
		}
		out[a.template] = w
	}
	return out
}

// keepOnlyRealApps deletes the demo's other environments (bob's VS
// Code), which would start beside the ones timed.
func keepOnlyRealApps(ctx context.Context, c client.Client) error {
	var uls v1alpha1.UserlandList
	if err := c.List(ctx, &uls, client.InNamespace(devenv.DemoNamespace)); err != nil {
		return err
	}
	for i := range uls.Items {
		ul := &uls.Items[i]
		timed := false
		for _, a := range realApps {
			timed = timed || ul.Spec.User == a.user && ul.Spec.TemplateRef.Name == a.template
		}
		if !timed {
			if err := c.Delete(ctx, ul); err != nil {
				return err
			}
		}
	}
	return nil
}

// demoEnvironment is the demo's environment of a's template and user.
func demoEnvironment(ctx context.Context, c client.Client, a realApp) (types.NamespacedName, error) {
	var uls v1alpha1.UserlandList
	if err := c.List(ctx, &uls, client.InNamespace(devenv.DemoNamespace)); err != nil {
		return types.NamespacedName{}, err
	}
	for _, ul := range uls.Items {
		if ul.Spec.User == a.user && ul.Spec.TemplateRef.Name == a.template {
			return types.NamespacedName{Namespace: ul.Namespace, Name: ul.Name}, nil
		}
	}
	return types.NamespacedName{}, fmt.Errorf("the dev stack made no %s environment for %s", a.template, a.user)
}

// wakeApp opens the environment once as its user (which gives the
// client the cookie of its origin), waits until the gateway has written
// that use, stops it as idle, and wakes it with one plain request.
func wakeApp(ctx context.Context, stack *devenv.Stack, listen string, key types.NamespacedName, user, path, want string) (appWake, error) {
	var w appWake
	c := stack.Client
	var ul v1alpha1.Userland
	deadline := time.Now().Add(15 * time.Minute) // a first start of a real app's image on a loaded machine
	for ul.Status.Phase != v1alpha1.PhaseReady || ul.Status.URL == "" {
		if time.Now().After(deadline) {
			return w, fmt.Errorf("%s not Ready after 15 minutes: phase %s", key, ul.Status.Phase)
		}
		time.Sleep(200 * time.Millisecond)
		if err := c.Get(ctx, key, &ul); err != nil {
			return w, err
		}
	}
	hc := envtiming.GatewayClient(listen)
	if err := envtiming.SignIn(ctx, hc, stack.URL, user, devenv.DemoPassword); err != nil {
		return w, err
	}
	u := strings.TrimSuffix(ul.Status.URL, "/") + path
	opened := time.Now()
	if _, err := envtiming.Open(ctx, hc, u, want, 5*time.Minute); err != nil {
		return w, fmt.Errorf("opening it: %w", err)
	}
	if err := envtiming.ActivityWritten(ctx, c, key, opened, 2*time.Minute); err != nil {
		return w, err
	}
	var err error
	if w.Stop, err = envtiming.IdleStop(ctx, c, key, 5*time.Minute); err != nil {
		return w, err
	}
	time.Sleep(2 * time.Second) // the stopped state reaches the gateway's cache
	if err := c.Get(ctx, key, &ul); err != nil {
		return w, err
	}
	if ul.Status.Phase != v1alpha1.PhaseStopped {
		return w, fmt.Errorf("started again before the wake request: phase %s", ul.Status.Phase)
	}
	if w.Wake, err = envtiming.Wake(ctx, hc, u, want, 5*time.Minute); err != nil {
		return w, err
	}
	w.Pod = "unknown"
	if pod, err := envtiming.ServingPod(ctx, c, key); err == nil {
		if d, ok := envtiming.CreatedToReady(pod); ok {
			w.Pod = d.String()
		}
	}
	return w, nil
}
