package naming

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzNameFor checks that every identity maps to a valid, stable Userland
// name, and that only an identity that already is such a name maps to
// itself.
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
		if name == identity != (len(validation.IsDNS1035Label(identity)) == 0) {
			t.Fatalf("NameFor(%q) = %q: identity mapping only for identities that are valid names", identity, name)
		}
	})
}

func TestNameFor(t *testing.T) {
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

func TestUserlandNamesAreDistinct(t *testing.T) {
	a := UserlandName("alice", "Template/vscode-x")
	b := UserlandName("alice-vscode", "Template/x")
	if a == b {
		t.Errorf("two user/template pairs share the name %s", a)
	}
	// Every replica must derive the same name: it is a pure function, so
	// pin one value.
	if got, want := UserlandName("alice", "Template/vscode"), "alice-template-vscode-"; got[:len(want)] != want || len(got) != len(want)+10 {
		t.Errorf("UserlandName = %q, want %q plus a 10-character hash", got, want)
	}
}
