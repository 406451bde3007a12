package naming

import (
	"strings"
	"testing"
)

// TestIsEnvironmentPod: which pod names are the environment's Deployment's.
func TestIsEnvironmentPod(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("l", 50)
	longer := strings.Repeat("m", 60)
	for _, tc := range []struct {
		userland, pod string
		want          bool
	}{
		{"alice", "alice-6d4b8c9f7c-x2x4z", true},
		{"alice", "alice-7c-x2x4z", true},
		{"alice", "bob-6d4b8c9f7c-x2x4z", false},
		{"alice", "alice-x-6d4b8c9f7c-x2x4z", false}, // alice-x's pod
		{"alice-x", "alice-x-6d4b8c9f7c-x2x4z", true},
		{"alice", "alice-6d4b8c9f7c", false},       // no random part
		{"alice", "alice-6d4b8c9f7c-x2x4", false},  // a short random part
		{"alice", "alice-6d4b8c9f7c-aaaaa", false}, // not Kubernetes' alphabet
		{"alice", "alice-6d4b8c9f7c6d-x2x4z", false},
		{"alice", "alice--x2x4z", false},
		{"alice", "x2x4z", false},
		{"alice", "alice", false},
		// A cut base: <userland>-<hash>- kept to 58 characters.
		{long, (long + "-6d4b8c9f7c-")[:58] + "x2x4z", true},
		{long, (strings.Repeat("n", 50) + "-6d4b8c9f7c-")[:58] + "x2x4z", false},
		{longer, longer[:58] + "x2x4z", true},
		{longer, strings.Repeat("m", 57) + "kx2x4z", false},
	} {
		if got := IsEnvironmentPod(tc.userland, tc.pod); got != tc.want {
			t.Errorf("IsEnvironmentPod(%q, %q) = %v, want %v", tc.userland, tc.pod, got, tc.want)
		}
	}
}
