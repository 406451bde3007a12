package naming

import (
	"regexp"
	"strings"
)

// safeAlphabet is the alphabet of Kubernetes' rand.SafeEncodeString,
// which makes both a pod-template-hash and a generated name's random part.
var safeAlphabet = regexp.MustCompile(`^[bcdfghjklmnpqrstvwxz2456789]+$`)

// maxGeneratedBase is how much of generateName Kubernetes keeps before its
// 5 random characters (names.MaxGeneratedNameLength).
const maxGeneratedBase = 58

// IsEnvironmentPod says whether pod is named as a pod of the Deployment
// of the Userland named userland (the controller names the Deployment
// after the Userland): its
// ReplicaSet's generateName "<userland>-<pod-template-hash>-", cut to 58
// characters, then 5 random characters. A Service someone else pointed at
// another environment's pods (replaced under the same name, before the
// controller notices) lists pods named after that other environment; and
// "alice" does not take "alice-x"'s pods, whose hash part would hold a
// dash. Where the base is cut (long names) only its kept part can be
// compared.
func IsEnvironmentPod(userland, pod string) bool {
	if len(pod) <= 5 || !safeAlphabet.MatchString(pod[len(pod)-5:]) {
		return false
	}
	base := pod[:len(pod)-5]
	cut := len(base) == maxGeneratedBase
	rest, ok := strings.CutPrefix(base, userland+"-")
	if !ok {
		return cut && strings.HasPrefix(userland+"-", base)
	}
	hash, dash := strings.CutSuffix(rest, "-")
	if !dash && !cut {
		return false
	}
	return len(hash) <= 10 && (hash == "" && cut || safeAlphabet.MatchString(hash))
}
