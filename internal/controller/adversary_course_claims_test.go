package controller_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestAdversaryCourseEnvironmentMountsPersonalHome: alice had a personal
// environment of template lab-db ("alice-lab-db", claim
// "alice-lab-db-home", reclaimPolicy Retain, the default) and deleted it;
// her data stays. A course manager (no right on claims) creates course
// "db" on template lab listing alice. The course environment is named
// "<user>-<template>-<course>" = "alice-lab-db", its claim name is
// alice's old claim, whose user hash matches, so the controller mounts
// her personal home in the course environment, which the course's staff
// reach through the gateway.
func TestAdversaryCourseEnvironmentMountsPersonalHome(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	sharedController(t)
	ctx := context.Background()
	const alice = "alice@uni.example"
	create(t, template(ns, "lab-db", "example.org/lab:1"), template(ns, "lab", "example.org/lab:1"),
		userland(ns, "alice-lab-db", alice, "lab-db"))
	var home corev1.PersistentVolumeClaim
	env.Eventually(t, time.Minute, "alice's personal home claim", func(ctx context.Context) (bool, error) {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "alice-lab-db-home"}, &home) == nil, nil
	})
	personal, err := get(t, ctx, ns, "alice-lab-db")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, personal); err != nil {
		t.Fatal(err)
	}
	env.Eventually(t, time.Minute, "alice's personal environment gone", func(ctx context.Context) (bool, error) {
		_, err := get(t, ctx, ns, "alice-lab-db")
		return apierrors.IsNotFound(err), nil
	})

	create(t, testobj.MakeCourse(ns, "db").Students(alice).Template("lab", v1alpha1.ProvisionUpFront).Obj())
	waitCourse(t, ns, "db", "alice provisioned", func(c *v1alpha1.Course) bool { return c.Status.Provisioned == 1 })
	items := courseUserlands(t, ctx, ns, "db")
	if len(items) != 1 {
		t.Fatalf("course environments: %d, want 1", len(items))
	}
	ul := items[0]
	t.Logf("the course environment of %s is %s", alice, ul.Name)
	var dep appsv1.Deployment
	env.Eventually(t, time.Minute, "the course environment's deployment", func(ctx context.Context) (bool, error) {
		return env.Client.Get(ctx, client.ObjectKeyFromObject(&ul), &dep) == nil, nil
	})
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == home.Name {
			var now corev1.PersistentVolumeClaim
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(&home), &now); err == nil && now.UID == home.UID {
				t.Errorf("HOLE: course environment %s mounts alice's personal home %s (same claim, uid %s)", ul.Name, home.Name, home.UID)
			}
		}
	}
}
