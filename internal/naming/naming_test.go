package naming

import (
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/userland-dev/userland/api/v1alpha1"
)

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

func TestHostLabel(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 40)
	cases := map[string]struct {
		namespace, name string
		want            string
	}{
		"readable":                     {"cs101", "taro", "taro--cs101"},
		"namespace with a double dash": {"b--c", "a", "a-4db03c41aee2"},
		"name with a double dash":      {"c", "a--b", "a-b-ba5996911a35"},
		"too long for one label":       {long, long, long + "-423c2117d3e0"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := HostLabel(tc.namespace, tc.name)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if !dnsLabel.MatchString(got) {
				t.Errorf("%q is not a DNS label", got)
			}
		})
	}
	// The collision the readable scheme had: "a" in "b--c" and "a--b" in "c".
	if HostLabel("b--c", "a") == HostLabel("c", "a--b") {
		t.Error(`"a" in "b--c" and "a--b" in "c" share a host`)
	}
	seen := map[string]string{}
	for _, ns := range []string{"a", "a-b", "a--b", "b", "b--c", "c", long} {
		for _, n := range []string{"a", "a-b", "a--b", "b", "b--c", "c", long, long + "-x"} {
			label := HostLabel(ns, n)
			if other, dup := seen[label]; dup {
				t.Errorf("%s/%s and %s share the label %s", ns, n, other, label)
			}
			seen[label] = ns + "/" + n
			if !dnsLabel.MatchString(label) {
				t.Errorf("%s/%s: %q is not a DNS label", ns, n, label)
			}
		}
	}
}

func TestRoutesURL(t *testing.T) {
	t.Parallel()
	gw, _ := url.Parse("http://127.0.0.1:8000")
	r := Routes{GatewayURL: gw, Domain: "localhost"}
	cases := map[string]struct {
		routing v1alpha1.Routing
		domain  bool
		want    string
	}{
		"default with a domain is its own host": {"", true, "http://alice--demo.localhost:8000/"},
		"explicit path":                         {v1alpha1.RoutingPath, true, "http://127.0.0.1:8000/u/demo/alice/"},
		"subdomain without a domain is a path":  {v1alpha1.RoutingSubdomain, false, "http://127.0.0.1:8000/u/demo/alice/"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := r.URL("demo", "alice", Routing(tc.routing, tc.domain))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
