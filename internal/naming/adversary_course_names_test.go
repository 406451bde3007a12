package naming

import (
	"testing"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// TestAdversaryCourseNameTakesAPersonalName: a course environment's name
// is "<user>-<template>-<course>", and a claim is "<userland>-<volume>".
// A course manager picks the course's name. Naming course "db" on
// template "lab" gives alice's course environment the name her personal
// environment of template "lab-db" has; naming it after the hash of her
// hashed personal name does the same. Claims are re-adopted by name and
// user (volumes.go: managed-by and user-hash only), so once the personal
// environment is deleted under reclaimPolicy Retain (the default), the
// course environment mounts alice's personal home, and the course's staff
// reach it through the gateway. No course name may produce a name of the
// personal scheme.
func TestAdversaryCourseNameTakesAPersonalName(t *testing.T) {
	t.Parallel()
	lab := v1alpha1.TemplateReference{Name: "lab"}
	personal := map[string]bool{}
	for _, ref := range []v1alpha1.TemplateReference{{Name: "lab-db"}, lab} {
		for _, n := range CandidateNames("alice", ref) {
			personal[n] = true
		}
	}
	hashed := HashedName("alice", lab)
	hashSuffix := hashed[len(ReadableName("alice", "lab"))+1:]
	for _, courseName := range []string{"db", hashSuffix} {
		for _, n := range CourseCandidateNames(courseName, "alice", lab) {
			if personal[n] {
				t.Errorf("HOLE: course %q names alice's course environment %q, a name her personal environments take (its claims %q-<volume> are hers)", courseName, n, n)
			}
		}
	}
}
