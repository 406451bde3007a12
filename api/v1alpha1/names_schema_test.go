package v1alpha1_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
)

const validCourse = `
apiVersion: userland.dev/v1alpha1
kind: Course
metadata:
  name: c
spec:
  displayName: Databases (autumn 2026)
  term:
    start: "2026-09-28T00:00:00Z"
    end: "2027-01-29T23:59:59Z"
  students:
    users: [taro.yamada@uni.example.ac.jp]
    groups: [databases-2026-students]
    emailDomains: [students.uni.example.ac.jp]
  staff:
    users: [prof.tanaka@uni.example.ac.jp]
    groups: [databases-2026-tas]
  templates:
    - name: phpmyadmin
`

// TestNamesPrintedToTerminalsRefuseControlCharacters: display names and
// user lists reach kubectl and kubectl userland output as they are, so an
// ESC or a newline in one would drive the reader's terminal or forge
// rows. The API server refuses them, naming the field.
func TestNamesPrintedToTerminalsRefuseControlCharacters(t *testing.T) {
	t.Parallel()
	const esc = "Databases \x1b]8;;https://evil.example\x07click\x1b]8;;\x07"
	cases := map[string]invalidCase{
		"course displayName with an ESC": {validCourse, []func(*unstructured.Unstructured){set(esc, "spec", "displayName")},
			"spec.displayName", "must not contain control characters"},
		"student with a newline": {validCourse, []func(*unstructured.Unstructured){set([]any{"ok@example.org", "alice\nmallory\tstaff"}, "spec", "students", "users")},
			"spec.students.users[1]", "must not contain control characters"},
		"student group with a carriage return": {validCourse, []func(*unstructured.Unstructured){set([]any{"tas\r"}, "spec", "students", "groups")},
			"spec.students.groups[0]", "must not contain control characters"},
		"student e-mail domain with an ESC": {validCourse, []func(*unstructured.Unstructured){set([]any{"uni.example\x1b[2J"}, "spec", "students", "emailDomains")},
			"spec.students.emailDomains[0]", "should match"},
		"staff user with DEL": {validCourse, []func(*unstructured.Unstructured){set([]any{"prof\x7f"}, "spec", "staff", "users")},
			"spec.staff.users[0]", "must not contain control characters"},
		"staff group with a NUL": {validCourse, []func(*unstructured.Unstructured){set([]any{"tas\x00"}, "spec", "staff", "groups")},
			"spec.staff.groups[0]", "must not contain control characters"},
		"template displayName with an ESC": {validTemplate, []func(*unstructured.Unstructured){set("VS Code\x1b[31m", "spec", "displayName")},
			"spec.displayName", "must not contain control characters"},
		"auto-provisioned user with a newline": {validTemplate, []func(*unstructured.Unstructured){set([]any{"alice\nbob"}, "spec", "autoProvision", "users")},
			"spec.autoProvision.users[0]", "must not contain control characters"},
		"auto-provisioned group with an ESC": {validTemplate, []func(*unstructured.Unstructured){set([]any{"\x1b[8mstaff"}, "spec", "autoProvision", "groups")},
			"spec.autoProvision.groups[0]", "must not contain control characters"},
		"cluster template displayName with a newline": {strings.Replace(validTemplate, "kind: Template", "kind: ClusterTemplate", 1),
			[]func(*unstructured.Unstructured){set("VS\nCode", "spec", "displayName")},
			"spec.displayName", "must not contain control characters"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			createRefused(t, tc)
		})
	}
}

// TestNamesWithoutControlCharactersAreAccepted keeps the rule from
// catching what people write: accents, CJK, spaces, punctuation.
func TestNamesWithoutControlCharactersAreAccepted(t *testing.T) {
	t.Parallel()
	obj := parse(t, validCourse)
	obj.SetNamespace(env.Namespace(t))
	set("データベース論 (2026 秋) — Ü", "spec", "displayName")(obj)
	set([]any{"山田 太郎", "o'brien+test@example.org", "CN=Taro,OU=Students"}, "spec", "students", "users")(obj)
	if err := env.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("create: %v", err)
	}
}

// TestEgressDefaultsToInternet: a template that says nothing about its
// network is read back with egress Internet; one that says Unrestricted
// keeps it.
func TestEgressDefaultsToInternet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	for name, network := range map[string]map[string]any{
		"unset":        nil,
		"empty":        {},
		"unrestricted": {"egress": "Unrestricted"},
	} {
		obj := parse(t, validTemplate)
		obj.SetNamespace(ns)
		obj.SetName(name)
		if network != nil {
			set(network, "spec", "network")(obj)
		}
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatalf("%s: create: %v", name, err)
		}
	}
	for name, want := range map[string]v1alpha1.Egress{"unset": v1alpha1.EgressInternet, "empty": v1alpha1.EgressInternet, "unrestricted": v1alpha1.EgressUnrestricted} {
		var got v1alpha1.Template
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(&v1alpha1.NetworkSpec{Egress: want}, got.Spec.Network); diff != "" {
			t.Errorf("%s: network (-want +got):\n%s", name, diff)
		}
	}
}

// TestAllowedCIDRsCannotOpenMetadata: no allowedCIDRs entry may lie
// within link-local or a cloud metadata endpoint, for every entry of
// v1alpha1.MetadataCIDRs (which the controller also excepts), while a
// wider network that merely contains one is accepted (the controller
// excepts the endpoint from it).
func TestAllowedCIDRsCannotOpenMetadata(t *testing.T) {
	t.Parallel()
	for _, m := range v1alpha1.MetadataCIDRs {
		t.Run(m, func(t *testing.T) {
			t.Parallel()
			createRefused(t, invalidCase{validTemplate, []func(*unstructured.Unstructured){
				set([]any{"10.20.0.0/16", m}, "spec", "network", "allowedCIDRs"),
			}, "spec.network.allowedCIDRs[1]", "must not lie within link-local or cloud metadata"})
		})
	}
	t.Run("a host inside a metadata range", func(t *testing.T) {
		t.Parallel()
		createRefused(t, invalidCase{validTemplate, []func(*unstructured.Unstructured){
			set([]any{"169.254.169.254/32"}, "spec", "network", "allowedCIDRs"),
		}, "spec.network.allowedCIDRs[0]", "must not lie within link-local or cloud metadata"})
	})
	t.Run("networks around metadata are accepted", func(t *testing.T) {
		t.Parallel()
		obj := parse(t, validTemplate)
		obj.SetNamespace(env.Namespace(t))
		set([]any{"0.0.0.0/0", "168.63.0.0/16", "fd00::/8"}, "spec", "network", "allowedCIDRs")(obj)
		if err := env.Client.Create(context.Background(), obj); err != nil {
			t.Fatalf("create: %v", err)
		}
	})
}

// createRefused creates tc's manifest and wants it refused at tc.field.
func createRefused(t *testing.T, tc invalidCase) {
	t.Helper()
	obj := parse(t, tc.base)
	if ns := env.Namespace(t); obj.GetKind() != "ClusterTemplate" {
		obj.SetNamespace(ns)
	} else {
		obj.SetName("ct-" + ns)
	}
	for _, m := range tc.mutate {
		m(obj)
	}
	err := env.Client.Create(context.Background(), obj)
	if err == nil {
		_ = env.Client.Delete(context.Background(), obj)
		t.Fatalf("the API server accepted the manifest; want it refused at %q", tc.field)
	}
	assertFieldError(t, err, tc.field, tc.message)
}
