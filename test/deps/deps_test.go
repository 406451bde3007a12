// Package deps holds the repository's import rules, as Go's own
// go/build/deps_test.go does: dependencies point downwards, rule packages
// are leaves, and shipped binaries link no test code. make test runs it
// (and make verify, which once checked these with grep).
package deps

import (
	"errors"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/userland-dev/userland"

// leaves are the packages that each hold one rule (naming, template
// lookup, the access rule, course membership, user actions, how an
// environment is described to a person, …). They may
// use the API types and each other, never the components that call them.
var leaves = []string{
	"internal/access", "internal/actions", "internal/apilimits", "internal/apiverdict", "internal/budget", "internal/course", "internal/describe", "internal/gctune", "internal/identity", "internal/idle",
	"internal/naming", "internal/reconcile", "internal/roster", "internal/templates", "internal/timetable", "internal/userlands",
	"internal/version", "internal/wsframe",
}

// kit is the reconcile kit. Every reconciler is built on it, so it uses
// none of the project's packages, rule packages included: only the API
// machinery, client-go's utilities and controller-runtime.
const kit = "internal/reconcile"

// otherLeaves are the leaves but the kit, as names under internal/.
func otherLeaves() []string {
	var out []string
	for _, l := range leaves {
		if l != kit {
			out = append(out, strings.TrimPrefix(l, "internal/"))
		}
	}
	return out
}

// testCode is what a shipped binary must not link.
var testCode = regexp.MustCompile(`^testing$|/envtest|^` + regexp.QuoteMeta(module) + `/internal/(testenv|testobj)$|^net/http/httptest$`)

type rule struct {
	name string
	// roots are package patterns, relative to the module unless absolute.
	roots []string
	// forbidden matches an import path (of the whole dependency closure)
	// the roots must not reach.
	forbidden *regexp.Regexp
}

func internal(names ...string) *regexp.Regexp {
	return regexp.MustCompile(`^` + regexp.QuoteMeta(module) + `/internal/(` + strings.Join(names, "|") + `)(/|$)`)
}

var rules = []rule{
	{"shipped binaries link no test code", []string{"cmd/userland", "cmd/kubectl-userland"}, testCode},
	// `userland dev --real-node` is to use it (issue 34); its tests use
	// testenv, its own code must not.
	{"the real node links no test code", []string{"internal/realnode"}, testCode},
	{"the gateway and the plugin import neither the reconcilers, the webhooks nor certificate rotation",
		[]string{"cmd/kubectl-userland", "internal/gateway/...", "internal/plugin/..."},
		regexp.MustCompile(`^` + regexp.QuoteMeta(module) + `/internal/(controller|webhook)(/|$)|cert-controller`)},
	{"the controller and the webhooks do not import the gateway",
		[]string{"internal/controller/...", "internal/webhook/..."}, internal("gateway", "plugin")},
	{"rule packages are leaves", leaves,
		internal("gateway", "controller", "webhook", "plugin", "devenv", "simcluster", "chartrender", "testenv", "testobj", "image", "echo")},
	{"the API types import nothing of the implementation", []string{"api/..."}, internal(".*")},
	{"the reconcile kit imports no rule package either", []string{kit}, internal(otherLeaves()...)},
	// Time is passed in, so its tables need no client, cache or clock.
	{"the timetable and the budget are pure", []string{"internal/budget", "internal/timetable"}, regexp.MustCompile(`^sigs\.k8s\.io/controller-runtime|^k8s\.io/client-go/(rest|tools)(/|$)`)},
}

// deps is the dependency closure of the roots, test files excluded.
func deps(t *testing.T, roots []string) []string {
	t.Helper()
	args := []string{"list", "-deps", "-f", "{{.ImportPath}}"}
	for _, r := range roots {
		args = append(args, module+"/"+r)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			stderr = string(exit.Stderr)
		}
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return strings.Fields(string(out))
}

func TestImportRules(t *testing.T) {
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			all := deps(t, r.roots)
			if len(all) < len(r.roots) {
				t.Fatalf("go list found %d packages for %v: the roots moved?", len(all), r.roots)
			}
			var bad []string
			for _, p := range all {
				if r.forbidden.MatchString(p) {
					bad = append(bad, p)
				}
			}
			if len(bad) > 0 {
				t.Errorf("%v reach what they must not:\n  %s", r.roots, strings.Join(bad, "\n  "))
			}
		})
	}
}

// TestRulesCatchAViolation keeps the rules honest: each must match
// something it exists to forbid, so a typo in a pattern cannot make a
// rule that passes whatever the code imports.
func TestRulesCatchAViolation(t *testing.T) {
	examples := map[string]string{
		"shipped binaries link no test code": "testing",
		"the real node links no test code":   module + "/internal/testenv",
		"the gateway and the plugin import neither the reconcilers, the webhooks nor certificate rotation": module + "/internal/controller",
		"the controller and the webhooks do not import the gateway":                                        module + "/internal/gateway/dashboard",
		"rule packages are leaves":                           module + "/internal/gateway",
		"the API types import nothing of the implementation": module + "/internal/naming",
		"the reconcile kit imports no rule package either":   module + "/internal/templates",
		"the timetable and the budget are pure":              "sigs.k8s.io/controller-runtime/pkg/client",
	}
	for _, r := range rules {
		ex, ok := examples[r.name]
		if !ok {
			t.Errorf("rule %q has no example violation", r.name)
			continue
		}
		if !r.forbidden.MatchString(ex) {
			t.Errorf("rule %q does not forbid %s", r.name, ex)
		}
		if r.forbidden.MatchString(module + "/api/v1alpha1") {
			t.Errorf("rule %q forbids the API types, which everything may use", r.name)
		}
	}
	if !slices.IsSorted(leaves) {
		t.Errorf("keep the leaves sorted: %v", leaves)
	}
}
