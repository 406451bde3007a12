// Command crdpatch finishes the CRD schemas controller-gen generates, where
// markers cannot reach:
//
//   - Size limits inside the pod template, which comes from Kubernetes' own
//     types. The API server estimates the worst-case cost of every CEL rule
//     from maxItems and maxLength; the TemplateSpec rules walk
//     podTemplate.spec.containers[].ports, and unbounded the estimate exceeds
//     the per-rule limit. Bounds far above any real pod (16 containers, 64
//     ports each) make the rules affordable.
//   - A schema for a Userland's metadata.name (the one metadata field a CRD
//     may constrain): it names a Service, so it must be a DNS-1035 label.
//     Declared here, errors name the field "metadata.name"; a rule on the
//     root object would report no field at all. A Course's name is a label
//     value on its Userlands, so it must be a DNS-1123 label.
//
// Usage: crdpatch DIR — rewrites every CRD in DIR in place; idempotent.
package main

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// patch sets fields on the schema at path (property names from the root of
// the openAPIV3Schema; "[]" steps into array items) in the CRDs of the given
// kinds.
type patch struct {
	kinds []string
	path  string
	set   map[string]any
}

var templateKinds = []string{"Template", "ClusterTemplate"}

var patches = []patch{
	{kinds: templateKinds, path: "spec.podTemplate.spec.containers", set: map[string]any{"maxItems": 16}},
	{kinds: templateKinds, path: "spec.podTemplate.spec.containers.[].name", set: map[string]any{"maxLength": 63}},
	{kinds: templateKinds, path: "spec.podTemplate.spec.containers.[].ports", set: map[string]any{"maxItems": 64}},
	labelName("Userland", "^[a-z]([-a-z0-9]*[a-z0-9])?$",
		"must start with a letter and contain only lower-case letters, digits and '-': it names the environment's Service"),
	labelName("Course", "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
		"must be a DNS-1123 label: it is the value of its Userlands' userland.dev/course label"),
}

// labelName limits kind's metadata.name to a 63-character label matching
// pattern.
func labelName(kind, pattern, message string) patch {
	return patch{kinds: []string{kind}, path: "metadata", set: map[string]any{
		"properties": map[string]any{"name": map[string]any{
			"type":      "string",
			"maxLength": 63,
			"x-kubernetes-validations": []any{map[string]any{
				"rule":    "self.matches('" + pattern + "')",
				"message": message,
			}},
		}},
	}}
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crdpatch DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "crdpatch:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return fmt.Errorf("listing %s: %w", dir, err)
	}
	for _, f := range files {
		if err := rewrite(f); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	return nil
}

func rewrite(file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var crd map[string]any
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return fmt.Errorf("parsing: %w", err)
	}
	kind, _ := dig(crd, "spec", "names", "kind").(string)
	versions, _ := dig(crd, "spec", "versions").([]any)
	for _, v := range versions {
		schema, _ := dig(v, "schema", "openAPIV3Schema").(map[string]any)
		if schema == nil {
			continue
		}
		for _, p := range patches {
			if !slices.Contains(p.kinds, kind) {
				continue
			}
			node := lookup(schema, p.path)
			if node == nil {
				return fmt.Errorf("%s schema has no %s", kind, p.path)
			}
			maps.Copy(node, p.set)
		}
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		return fmt.Errorf("encoding: %w", err)
	}
	out = append([]byte("---\n"), out...)
	if bytes.Equal(out, data) {
		return nil
	}
	return os.WriteFile(file, out, 0o644)
}

// lookup walks a dotted path of property names through an OpenAPI schema.
func lookup(schema map[string]any, path string) map[string]any {
	node := schema
	for _, step := range strings.Split(path, ".") {
		var next any
		if step == "[]" {
			next = node["items"]
		} else {
			next = dig(node, "properties", step)
		}
		m, ok := next.(map[string]any)
		if !ok {
			return nil
		}
		node = m
	}
	return node
}

func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}
