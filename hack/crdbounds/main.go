// Command crdbounds adds size limits to the parts of the generated CRD schemas
// that come from Kubernetes' own types (the pod template), which controller-gen
// markers cannot reach.
//
// Why: the API server estimates the worst-case cost of every CEL rule from
// maxItems and maxLength. The TemplateSpec rules walk
// podTemplate.spec.containers[].ports; unbounded, the estimate exceeds the
// per-rule limit and the CRD is rejected. Bounds far above any real pod (16
// containers, 64 ports each) make the rules affordable.
//
// Usage: crdbounds DIR — rewrites every CRD in DIR in place; idempotent.
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// bound is one limit: the schema at path (property names from the root of
// the openAPIV3Schema; "[]" steps into array items) gets key set to value.
type bound struct {
	path  string
	key   string
	value int64
}

var bounds = []bound{
	{"spec.podTemplate.spec.containers", "maxItems", 16},
	{"spec.podTemplate.spec.containers.[].name", "maxLength", 63},
	{"spec.podTemplate.spec.containers.[].ports", "maxItems", 64},
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crdbounds DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "crdbounds:", err)
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
	versions, _ := dig(crd, "spec", "versions").([]any)
	for _, v := range versions {
		schema, _ := dig(v, "schema", "openAPIV3Schema").(map[string]any)
		if schema == nil {
			continue
		}
		for _, b := range bounds {
			if node := lookup(schema, b.path); node != nil {
				node[b.key] = b.value
			}
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
