package v1alpha1_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

const validTemplate = `
apiVersion: userland.dev/v1alpha1
kind: Template
metadata:
  name: t
spec:
  podTemplate:
    spec:
      containers:
        - name: app
          image: example.org/app:1
          ports: [{containerPort: 8080}]
        - name: db
          image: example.org/db:1
          ports: [{containerPort: 3306}]
  http:
    port: 8080
  volumes:
    - name: home
      mountPath: /home
    - name: data
      mountPath: /data
      containers: [db]
  idle:
    timeout: 30m
  rollout:
    policy: Immediate
    maxUnavailable: 2
  autoProvision:
    emailDomains: [uni.example.ac.jp]
`

const validUserland = `
apiVersion: userland.dev/v1alpha1
kind: Userland
metadata:
  name: u
spec:
  user: Taro.Yamada@uni.example.ac.jp
  templateRef:
    name: t
`

func parse(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatalf("parsing manifest: %v", err)
	}
	return &unstructured.Unstructured{Object: m}
}

func set(value any, path ...string) func(*unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) {
		if err := unstructured.SetNestedField(u.Object, value, path...); err != nil {
			panic(err)
		}
	}
}

func remove(path ...string) func(*unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) { unstructured.RemoveNestedField(u.Object, path...) }
}

func containers(n int) []any {
	var out []any
	for i := range n {
		out = append(out, map[string]any{
			"name": "c" + strings.Repeat("x", i), "image": "example.org/app:1",
			"ports": []any{map[string]any{"containerPort": int64(8080 + i)}},
		})
	}
	return out
}

type invalidCase struct {
	base   string
	mutate []func(*unstructured.Unstructured)
	// field is the path the API server must name; message a fragment of
	// the reason it gives.
	field   string
	message string
}

func TestInvalidManifestsAreRejectedNamingTheField(t *testing.T) {
	t.Parallel()
	vol := func(fields map[string]any) []any {
		v := map[string]any{"name": "home", "mountPath": "/home"}
		for k, val := range fields {
			v[k] = val
		}
		return []any{v}
	}
	cases := map[string]invalidCase{
		"port zero": {validTemplate, []func(*unstructured.Unstructured){set(int64(0), "spec", "http", "port")},
			"spec.http.port", "greater than or equal to 1"},
		"port above 65535": {validTemplate, []func(*unstructured.Unstructured){set(int64(70000), "spec", "http", "port")},
			"spec.http.port", "less than or equal to 65535"},
		"port that no container serves": {validTemplate, []func(*unstructured.Unstructured){set(int64(9090), "spec", "http", "port")},
			"spec.http.port", "containerPort of a container in podTemplate"},
		"http missing": {validTemplate, []func(*unstructured.Unstructured){remove("spec", "http")},
			"spec.http", "Required value"},
		"unknown routing": {validTemplate, []func(*unstructured.Unstructured){set("Host", "spec", "http", "routing")},
			"spec.http.routing", `supported values: "Path", "Subdomain"`},
		"volume name not a DNS label": {validTemplate, []func(*unstructured.Unstructured){set(vol(map[string]any{"name": "Home_Dir"}), "spec", "volumes")},
			"spec.volumes[0].name", "DNS-1123 label"},
		"duplicate volume names": {validTemplate, []func(*unstructured.Unstructured){set([]any{
			map[string]any{"name": "home", "mountPath": "/a"}, map[string]any{"name": "home", "mountPath": "/b"},
		}, "spec", "volumes")}, "spec.volumes[1]", "Duplicate value"},
		"relative mountPath": {validTemplate, []func(*unstructured.Unstructured){set(vol(map[string]any{"mountPath": "home"}), "spec", "volumes")},
			"spec.volumes[0].mountPath", "absolute path"},
		"duplicate mountPath": {validTemplate, []func(*unstructured.Unstructured){set([]any{
			map[string]any{"name": "a", "mountPath": "/data"}, map[string]any{"name": "b", "mountPath": "/data"},
		}, "spec", "volumes")}, "spec.volumes", "mountPath must be unique"},
		"volume for an unknown container": {validTemplate, []func(*unstructured.Unstructured){set(vol(map[string]any{"containers": []any{"nope"}}), "spec", "volumes")},
			"spec.volumes", "must be a container of podTemplate"},
		"unknown reclaimPolicy": {validTemplate, []func(*unstructured.Unstructured){set(vol(map[string]any{"reclaimPolicy": "Recycle"}), "spec", "volumes")},
			"spec.volumes[0].reclaimPolicy", `supported values: "Retain", "Delete"`},
		"unknown access mode": {validTemplate, []func(*unstructured.Unstructured){set(vol(map[string]any{"accessModes": []any{"ReadWriteSometimes"}}), "spec", "volumes")},
			"spec.volumes[0].accessModes[0]", "supported values"},
		"size that is not a quantity": {validTemplate, []func(*unstructured.Unstructured){set(vol(map[string]any{"size": "lots"}), "spec", "volumes")},
			"spec.volumes[0].size", "should match"},
		"too many volumes": {validTemplate, []func(*unstructured.Unstructured){func(u *unstructured.Unstructured) {
			var vs []any
			for i := range 17 {
				vs = append(vs, map[string]any{"name": "v" + strings.Repeat("x", i), "mountPath": "/v" + strings.Repeat("x", i)})
			}
			set(vs, "spec", "volumes")(u)
		}}, "spec.volumes", "must have at most 16 items"},
		"idle timeout under a minute": {validTemplate, []func(*unstructured.Unstructured){set("30s", "spec", "idle", "timeout")},
			"spec.idle.timeout", "at least 1m"},
		"idle timeout not a duration": {validTemplate, []func(*unstructured.Unstructured){set("soon", "spec", "idle", "timeout")},
			"spec.idle.timeout", "must be a duration"},
		"idle without timeout": {validTemplate, []func(*unstructured.Unstructured){set(map[string]any{}, "spec", "idle")},
			"spec.idle.timeout", "Required value"},
		"unknown rollout policy": {validTemplate, []func(*unstructured.Unstructured){set("Eventually", "spec", "rollout", "policy")},
			"spec.rollout.policy", `supported values: "Immediate", "WhenIdle", "OnRestart"`},
		"maxUnavailable zero": {validTemplate, []func(*unstructured.Unstructured){set(int64(0), "spec", "rollout", "maxUnavailable")},
			"spec.rollout.maxUnavailable", "positive integer or a percentage"},
		"maxUnavailable above 100%": {validTemplate, []func(*unstructured.Unstructured){set("150%", "spec", "rollout", "maxUnavailable")},
			"spec.rollout.maxUnavailable", "positive integer or a percentage"},
		"maxUnavailable words": {validTemplate, []func(*unstructured.Unstructured){set("a quarter", "spec", "rollout", "maxUnavailable")},
			"spec.rollout.maxUnavailable", "positive integer or a percentage"},
		"e-mail domain with spaces": {validTemplate, []func(*unstructured.Unstructured){set([]any{"Not A Domain"}, "spec", "autoProvision", "emailDomains")},
			"spec.autoProvision.emailDomains[0]", "should match"},
		"displayName too long": {validTemplate, []func(*unstructured.Unstructured){set(strings.Repeat("x", 65), "spec", "displayName")},
			"spec.displayName", "may not be more than 64"},
		"pod template with 17 containers": {validTemplate, []func(*unstructured.Unstructured){
			set(containers(17), "spec", "podTemplate", "spec", "containers"), remove("spec", "volumes"),
		}, "spec.podTemplate.spec.containers", "must have at most 16 items"},
		"unknown egress": {validTemplate, []func(*unstructured.Unstructured){set("Intranet", "spec", "network", "egress")},
			"spec.network.egress", `supported values: "Unrestricted", "Internet"`},
		"allowed CIDR that is not one": {validTemplate, []func(*unstructured.Unstructured){
			set("Internet", "spec", "network", "egress"), set([]any{"10.20.0.0/16", "campus-db"}, "spec", "network", "allowedCIDRs"),
		}, "spec.network.allowedCIDRs[1]", "CIDR notation"},
		"allowed CIDR with host bits": {validTemplate, []func(*unstructured.Unstructured){
			set("Internet", "spec", "network", "egress"), set([]any{"10.20.1.5/16"}, "spec", "network", "allowedCIDRs"),
		}, "spec.network.allowedCIDRs[0]", "no host bits"},
		"allowed CIDRs with unrestricted egress": {validTemplate, []func(*unstructured.Unstructured){
			set("Unrestricted", "spec", "network", "egress"), set([]any{"10.20.0.0/16"}, "spec", "network", "allowedCIDRs"),
		}, "spec.network.allowedCIDRs", "need egress Internet"},
		"no containers": {validTemplate, []func(*unstructured.Unstructured){set([]any{}, "spec", "podTemplate", "spec", "containers")},
			"spec.podTemplate.spec.containers", "must list at least one container"},
		"podTemplate without a pod spec": {validTemplate, []func(*unstructured.Unstructured){remove("spec", "podTemplate", "spec")},
			"spec.podTemplate.spec.containers", "must list at least one container"},
		"podTemplate missing": {validTemplate, []func(*unstructured.Unstructured){remove("spec", "podTemplate")},
			"spec.podTemplate", "Required value"},
		"cluster template port that no container serves": {strings.Replace(validTemplate, "kind: Template", "kind: ClusterTemplate", 1),
			[]func(*unstructured.Unstructured){set(int64(9090), "spec", "http", "port")},
			"spec.http.port", "containerPort of a container in podTemplate"},
		"cluster template bad volume name": {strings.Replace(validTemplate, "kind: Template", "kind: ClusterTemplate", 1),
			[]func(*unstructured.Unstructured){set(vol(map[string]any{"name": "-home"}), "spec", "volumes")},
			"spec.volumes[0].name", "DNS-1123 label"},

		"empty user": {validUserland, []func(*unstructured.Unstructured){set("", "spec", "user")},
			"spec.user", "at least 1 chars long"},
		"user with a newline": {validUserland, []func(*unstructured.Unstructured){set("alice\nadmin", "spec", "user")},
			"spec.user", "must not contain control characters"},
		"user too long": {validUserland, []func(*unstructured.Unstructured){set(strings.Repeat("a", 257), "spec", "user")},
			"spec.user", "may not be more than 256"},
		"user missing": {validUserland, []func(*unstructured.Unstructured){remove("spec", "user")},
			"spec.user", "Required value"},
		"template name not a DNS subdomain": {validUserland, []func(*unstructured.Unstructured){set("Bad_Name", "spec", "templateRef", "name")},
			"spec.templateRef.name", "DNS subdomain"},
		"unknown template kind": {validUserland, []func(*unstructured.Unstructured){set("PodTemplate", "spec", "templateRef", "kind")},
			"spec.templateRef.kind", `supported values: "Template", "ClusterTemplate"`},
		"templateRef missing": {validUserland, []func(*unstructured.Unstructured){remove("spec", "templateRef")},
			"spec.templateRef", "Required value"},
		"name too long for a Service": {validUserland, []func(*unstructured.Unstructured){set(strings.Repeat("a", 64), "metadata", "name")},
			"metadata.name", "may not be more than 63"},
		"name starting with a digit": {validUserland, []func(*unstructured.Unstructured){set("1st-year", "metadata", "name")},
			"metadata.name", "must start with a letter"},
		"unknown phase in status": {validUserland, []func(*unstructured.Unstructured){set("Sleeping", "status", "phase")},
			"", ""}, // status is dropped on create: accepted, see below.
	}
	// Status is ignored on create (status subresource), so that one case is
	// asserted separately in TestSpecAndStatusAreSeparate.
	delete(cases, "unknown phase in status")

	if len(cases) < 25 {
		t.Fatalf("only %d invalid cases; the API promises at least 25", len(cases))
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t)
			obj := parse(t, tc.base)
			if obj.GetKind() != "ClusterTemplate" {
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
				t.Fatalf("the API server accepted the manifest; want it rejected at %q", tc.field)
			}
			assertFieldError(t, err, tc.field, tc.message)
		})
	}
}

// assertFieldError checks that err is an Invalid error with a cause at field
// whose message contains message.
func assertFieldError(t *testing.T, err error, field, message string) {
	t.Helper()
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsInvalid(err) {
		t.Fatalf("got %v, want an Invalid error", err)
	}
	var got []string
	for _, c := range status.Status().Details.Causes {
		if c.Field == field && strings.Contains(c.Message, message) {
			return
		}
		got = append(got, c.Field+": "+c.Message)
	}
	t.Errorf("no cause at %q containing %q; causes:\n  %s", field, message, strings.Join(got, "\n  "))
}

func TestValidManifestsAreAccepted(t *testing.T) {
	t.Parallel()
	for name, doc := range map[string]string{
		"template": validTemplate,
		"template without volumes, idle or rollout": `
apiVersion: userland.dev/v1alpha1
kind: Template
metadata: {name: minimal}
spec:
  podTemplate:
    spec:
      containers: [{name: app, image: example.org/app:1, ports: [{containerPort: 80}]}]
  http: {port: 80}
`,
		"userland":                                validUserland,
		"userland with maximal name":              strings.Replace(validUserland, "name: u", "name: "+strings.Repeat("a", 63), 1),
		"template with percentage maxUnavailable": strings.Replace(validTemplate, "maxUnavailable: 2", "maxUnavailable: 100%", 1),
		"template with 1m idle timeout":           strings.Replace(validTemplate, "timeout: 30m", "timeout: 1m", 1),
		"template with 1h30m idle timeout":        strings.Replace(validTemplate, "timeout: 30m", "timeout: 1h30m", 1),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			obj := parse(t, doc)
			obj.SetNamespace(env.Namespace(t))
			if err := env.Client.Create(context.Background(), obj); err != nil {
				t.Fatalf("create: %v", err)
			}
		})
	}
}

// The API server checks CEL rules only once the OpenAPI schema passes, so
// errors come back together within each of those two stages.
func TestErrorsAreReportedTogether(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		mutate []func(*unstructured.Unstructured)
		fields []string
	}{
		"schema errors": {
			[]func(*unstructured.Unstructured){
				set("Host", "spec", "http", "routing"), set("Eventually", "spec", "rollout", "policy"), set(int64(0), "spec", "http", "port"),
			},
			[]string{"spec.http.port", "spec.http.routing", "spec.rollout.policy"},
		},
		"rule errors": {
			[]func(*unstructured.Unstructured){
				set("30s", "spec", "idle", "timeout"), set(int64(0), "spec", "rollout", "maxUnavailable"), set(int64(9090), "spec", "http", "port"),
			},
			[]string{"spec.http.port", "spec.idle.timeout", "spec.rollout.maxUnavailable"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			obj := parse(t, validTemplate)
			obj.SetNamespace(env.Namespace(t))
			for _, m := range tc.mutate {
				m(obj)
			}
			err := env.Client.Create(context.Background(), obj)
			var status apierrors.APIStatus
			if !errors.As(err, &status) {
				t.Fatalf("got %v, want an API status error", err)
			}
			var fields []string
			for _, c := range status.Status().Details.Causes {
				// The server adds a note that rules were skipped after
				// schema errors; it names no field.
				if !strings.Contains(c.Message, "validation rules were not checked") {
					fields = append(fields, c.Field)
				}
			}
			slices.Sort(fields)
			if diff := cmp.Diff(tc.fields, fields); diff != "" {
				t.Errorf("fields in one response (-want +got):\n%s", diff)
			}
		})
	}
}

// TestATemplateWithoutContainersIsRefusedThere: the one cause names the
// containers; spec.http.port, which no container could serve, is not
// blamed as well.
func TestATemplateWithoutContainersIsRefusedThere(t *testing.T) {
	t.Parallel()
	obj := parse(t, validTemplate)
	obj.SetNamespace(env.Namespace(t))
	set([]any{}, "spec", "podTemplate", "spec", "containers")(obj)
	err := env.Client.Create(context.Background(), obj)
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsInvalid(err) {
		t.Fatalf("got %v, want an Invalid error", err)
	}
	var fields []string
	for _, c := range status.Status().Details.Causes {
		fields = append(fields, c.Field)
	}
	if diff := cmp.Diff([]string{"spec.podTemplate.spec.containers"}, fields); diff != "" {
		t.Errorf("fields named (-want +got):\n%s\n%v", diff, err)
	}
}
