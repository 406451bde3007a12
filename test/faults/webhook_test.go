//go:build faults

package faults

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/config"
	"github.com/userland-dev/userland/internal/simcluster"
	"github.com/userland-dev/userland/internal/testobj"
)

const webhookConfigName = "userland-validating-webhook-configuration"

// installWebhooks applies the generated webhook configuration pointed at
// port on this machine, as `userland dev` does; the controller injects its
// CA.
func installWebhooks(t *testing.T, port int) {
	t.Helper()
	data, err := fs.ReadFile(config.Manifests, "webhook/manifests.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg admissionregistrationv1.ValidatingWebhookConfiguration
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Name = webhookConfigName
	for i := range cfg.Webhooks {
		p := *cfg.Webhooks[i].ClientConfig.Service.Path
		cfg.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptr.To(fmt.Sprintf("https://localhost:%d%s", port, p))}
	}
	if err := env.Client.Create(context.Background(), &cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), &cfg) })
}

// TestWebhookUnavailable kills the controller that serves the admission
// webhooks. With the documented failure policy (Fail), Template and
// Userland writes are refused with the API server's message naming the
// webhook, and they succeed again once a controller serves, with no
// manual step.
func TestWebhookUnavailable(t *testing.T) {
	releaseLease(t)
	ctx := context.Background()
	sys := &corev1.Namespace{}
	sys.Name = "userland-system"
	if err := env.Client.Create(ctx, sys); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	port, err := simcluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	installWebhooks(t, port)
	certDir := t.TempDir()
	args := []string{fmt.Sprintf("--webhook-port=%d", port), "--webhook-cert-mode=self", "--webhook-write-certs",
		"--webhook-cert-dir=" + certDir, "--webhook-cert-secret=userland-system/userland-webhook-cert",
		"--webhook-config-name=" + webhookConfigName, "--webhook-extra-dns-names=localhost"}
	ns := env.Namespace(t)
	n := 0
	// create tries a new Template (privileged when bad) and a Userland.
	create := func(bad bool) (error, error) {
		n++
		tw := testobj.MakeTemplate(ns, fmt.Sprintf("t%d", n)).Container("app")
		tmpl := tw.Obj()
		if bad {
			tmpl.Spec.PodTemplate.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		}
		terr := env.Client.Create(ctx, tmpl, client.DryRunAll)
		uerr := env.Client.Create(ctx, testobj.MakeUserland(ns, fmt.Sprintf("u%d", n), "alice", "t").Obj(), client.DryRunAll)
		return terr, uerr
	}
	serving := func(what string) time.Duration {
		t.Helper()
		start := time.Now()
		var terr, uerr error
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
			terr, uerr = create(false)
			return terr == nil && uerr == nil, nil
		})
		if err != nil {
			t.Fatalf("%s: the webhooks never admitted a valid Template and Userland (%v; %v)", what, terr, uerr)
		}
		return time.Since(start)
	}

	first := startController(t, "controller", args...)
	t.Logf("webhooks serving %s after the controller started", serving("first start").Round(time.Millisecond))
	if terr, _ := create(true); terr == nil || !strings.Contains(terr.Error(), "privileged") {
		t.Fatalf("a privileged Template while the webhooks serve: %v, want a denial naming privileged", terr)
	}

	// Two environments made while the webhooks serve: one that has used
	// compute hours (which only a granter may delete) and one that has not,
	// in a namespace of their own that is deleted while the webhooks are down.
	doomed := env.Namespace(t)
	for _, name := range []string{"plain", "spent"} {
		if err := env.Client.Create(ctx, testobj.MakeUserland(doomed, name, "alice", "t").Obj()); err != nil {
			t.Fatal(err)
		}
	}

	if err := first.Kill(); err != nil {
		t.Fatal(err)
	}
	spent := &v1alpha1.Userland{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: doomed, Name: "spent"}, spent); err != nil {
		t.Fatal(err)
	}
	before := spent.DeepCopy()
	spent.Status.Usage = &v1alpha1.UsageStatus{PeriodStart: metav1.NewTime(time.Now().Add(-time.Hour)), UsedSeconds: 600}
	if err := env.Client.Status().Patch(ctx, spent, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	terr, uerr := create(false)
	t.Logf("with the webhooks down, a Template write says: %v", terr)
	t.Logf("with the webhooks down, a Userland write says: %v", uerr)
	for what, err := range map[string]error{"Template": terr, "Userland": uerr} {
		if err == nil || !strings.Contains(err.Error(), "failed calling webhook") || !strings.Contains(err.Error(), "userland.dev") {
			t.Errorf("%s write with the webhooks down: %v; want a refusal naming the Userland webhook (failure policy Fail)", what, err)
		}
	}

	deleteWebhooksDown(t, doomed)

	startController(t, "controller-restarted", args...)
	t.Logf("writes admitted again %s after the controller restarted, with no manual step", serving("restart").Round(time.Millisecond))
}

// deleteWebhooksDown: with the webhooks down, deleting an environment that
// has used no hours goes through (the webhook's match conditions leave it
// out), deleting one that has is refused (it may be a grant), and the
// namespace's deletion removes both: the namespace controller's deletions
// (kube-system's, or here system:masters', as this cluster's
// controller-manager signs in) are never sent to the webhook, so a
// namespace does not hang Terminating.
func deleteWebhooksDown(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	// A user manager deletes them (not system:masters, whose deletions the
	// webhook is not asked about: RBAC allows them grant anyway).
	deleter := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "faults-userland-deleter"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"userlands"}, Verbs: []string{"get", "delete"}}},
	}
	if err := env.Client.Create(ctx, deleter); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	cfg, err := env.ConfigBoundTo(ctx, "manager@uni.example", deleter.Name)
	if err != nil {
		t.Fatal(err)
	}
	manager, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	plain := testobj.MakeUserland(ns, "plain", "alice", "t").Obj()
	if err := manager.Delete(ctx, plain); err != nil {
		t.Errorf("a user manager deleting an environment with no usage while the webhooks are down: %v, want it deleted", err)
	}
	spent := testobj.MakeUserland(ns, "spent", "alice", "t").Obj()
	err = manager.Delete(ctx, spent)
	t.Logf("with the webhooks down, deleting an environment that used hours says: %v", err)
	if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Errorf("deleting an environment that used hours while the webhooks are down: %v, want a refusal naming the webhook", err)
	}
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if err := env.Client.Delete(ctx, nsObj); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(spent), &v1alpha1.Userland{})), nil
	})
	if err != nil {
		t.Fatalf("the namespace's deletion never removed the environment that used hours while the webhooks were down: %v", err)
	}
	t.Logf("the namespace's deletion removed it in %s with the webhooks down", time.Since(start).Round(time.Millisecond))
}
