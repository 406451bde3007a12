package naming

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// FuzzNameFor checks that every identity maps to a valid, stable Userland
// name, and that an identity maps to itself exactly when it already is
// such a name (without a run of '-', which sanitising collapses).
func FuzzNameFor(f *testing.F) {
	for _, seed := range []string{"alice", "Taro.Yamada@uni.example.ac.jp", "", "42", "--", strings.Repeat("x", 100), "日本語"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, identity string) {
		name := NameFor(identity)
		if len(validation.IsDNS1035Label(name)) > 0 {
			t.Fatalf("NameFor(%q) = %q is not a DNS-1035 label", identity, name)
		}
		if NameFor(identity) != name {
			t.Fatalf("NameFor(%q) is not stable", identity)
		}
		// Valid names map to themselves, except those with a run of '-',
		// which sanitising has always collapsed (so they are hashed; names
		// already given must not change).
		valid := len(validation.IsDNS1035Label(identity)) == 0
		if name == identity && !valid || valid && !strings.Contains(identity, "--") && name != identity {
			t.Fatalf("NameFor(%q) = %q: identity mapping exactly for identities that are valid names without a run of '-'", identity, name)
		}
	})
}

func TestNameFor(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"alice":                         "alice",
		"Taro.Yamada@uni.example.ac.jp": "taro-yamada-uni-example-ac-jp-" + NameFor("Taro.Yamada@uni.example.ac.jp")[30:],
		"42":                            "u-42-" + NameFor("42")[5:],
	}
	for identity, want := range cases {
		if got := NameFor(identity); got != want {
			t.Errorf("NameFor(%q) = %q, want %q", identity, got, want)
		}
	}
	if NameFor("Alice") == NameFor("alice") {
		t.Error("identities differing in case share a name")
	}
	if NameFor("a.b") == NameFor("a-b") {
		t.Error("identities differing in punctuation share a name")
	}
}

func TestReadableNames(t *testing.T) {
	t.Parallel()
	lab := v1alpha1.TemplateReference{Kind: v1alpha1.TemplateKindTemplate, Name: "jupyterlab"}
	cases := []struct{ user, template, want string }{
		{"alice", "jupyterlab", "alice-jupyterlab"},
		{"Taro.Yamada@uni.example.ac.jp", "vscode", "taro-yamada-vscode"},
		{"42@x.example", "vscode", "u-42-vscode"},
		{"dave@uni.example.ac.jp", "2024-intro", "dave-2024-intro"},
		{strings.Repeat("long", 20) + "@x", strings.Repeat("t", 40), strings.Repeat("long", 5) + "-" + strings.Repeat("t", 24)},
	}
	var got []string
	var want []string
	for _, c := range cases {
		got = append(got, ReadableName(c.user, c.template))
		want = append(want, c.want)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReadableName (-want +got):\n%s", diff)
	}
	// The hashed form is the readable one and six hex digits, differs by
	// user, kind and template, and fits a Service name.
	h := HashedName("alice@a.example", lab)
	if !strings.HasPrefix(h, "alice-jupyterlab-") || len(h) != len("alice-jupyterlab-")+6 {
		t.Errorf("HashedName = %q", h)
	}
	cluster := lab
	cluster.Kind = v1alpha1.TemplateKindClusterTemplate
	if h == HashedName("alice@b.example", lab) || h == HashedName("alice@a.example", cluster) {
		t.Error("hashed names of different users or kinds collide")
	}
	longest := HashedName(strings.Repeat("u", 99), v1alpha1.TemplateReference{Name: strings.Repeat("t", 99)})
	if errs := validation.IsDNS1035Label(longest); len(errs) > 0 {
		t.Errorf("%q: %v", longest, errs)
	}
}

// FuzzCandidateNames checks that every user and template give valid,
// distinct candidate names.
func FuzzCandidateNames(f *testing.F) {
	f.Add("alice@uni.example", "jupyterlab")
	f.Add("", "")
	f.Add("--", "9")
	f.Fuzz(func(t *testing.T, user, template string) {
		names := CandidateNames(user, v1alpha1.TemplateReference{Kind: v1alpha1.TemplateKindTemplate, Name: template})
		for _, n := range names {
			if errs := validation.IsDNS1035Label(n); len(errs) > 0 {
				t.Fatalf("CandidateNames(%q, %q): %q: %v", user, template, n, errs)
			}
		}
		if names[0] == names[1] {
			t.Fatalf("CandidateNames(%q, %q) repeats %q", user, template, names[0])
		}
	})
}
