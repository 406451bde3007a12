package reconcile

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestCreations(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	a := types.NamespacedName{Namespace: "cs101", Name: "a"}
	b := types.NamespacedName{Namespace: "cs101", Name: "b"}
	c := &Creations{TTL: 5 * time.Second}

	if _, pending := c.Pending("Deployment", a, t0); pending {
		t.Fatal("pending before any creation")
	}
	c.Created("Deployment", a, t0)
	if left, pending := c.Pending("Deployment", a, t0.Add(time.Second)); !pending || left != 4*time.Second {
		t.Errorf("1s after creating: pending %v, %v left; want pending, 4s left", pending, left)
	}
	if _, pending := c.Pending("Service", a, t0.Add(time.Second)); pending {
		t.Error("another kind of the same name is pending")
	}
	c.Observed("Deployment", a)
	if _, pending := c.Pending("Deployment", a, t0.Add(time.Second)); pending {
		t.Error("pending after the cache showed it")
	}
	c.Created("Deployment", a, t0)
	if _, pending := c.Pending("Deployment", a, t0.Add(5*time.Second)); pending {
		t.Error("pending after TTL: a child deleted before the cache saw it must be made again")
	}
	// Entries nobody asks about again do not pile up.
	c.Created("Deployment", a, t0)
	c.Created("Deployment", b, t0.Add(6*time.Second))
	if n := c.Len(); n != 1 {
		t.Errorf("%d entries after TTL, want 1 (the expired one swept)", n)
	}
}
