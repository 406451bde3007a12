// Package chartrender renders the Helm chart with Helm's own Go SDK, as
// `helm template` does: values are checked against values.schema.json and
// templates run exactly as at install. Tests and hack/kustomize-default use
// it, so the kustomize entry point is the chart's output.
package chartrender

import (
	"context"
	"fmt"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
)

// KubeVersion is the Kubernetes version charts render for offline.
const KubeVersion = "v1.37.1"

// Render returns the chart's manifests (without CRDs) for values, as
// release name in namespace.
func Render(chartDir, name, namespace string, values map[string]any) (string, error) {
	chrt, err := loader.Load(chartDir)
	if err != nil {
		return "", fmt.Errorf("loading the chart: %w", err)
	}
	cfg := &action.Configuration{Releases: storage.Init(driver.NewMemory()), Capabilities: common.DefaultCapabilities}
	install := action.NewInstall(cfg)
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName, install.Namespace = name, namespace
	install.Replace = true
	// The Kubernetes version the project builds and tests against; Helm's
	// offline default is far older than the chart's kubeVersion.
	if install.KubeVersion, err = common.ParseKubeVersion(KubeVersion); err != nil {
		return "", err
	}
	rel, err := install.RunWithContext(context.Background(), chrt, values)
	if err != nil {
		return "", err
	}
	r, ok := rel.(*releasev1.Release)
	if !ok {
		return "", fmt.Errorf("unexpected release type %T", rel)
	}
	return r.Manifest, nil
}

// Lint runs `helm lint` on the chart with values and returns its messages
// of warning severity or worse.
func Lint(chartDir string, values map[string]any) []string {
	result := action.NewLint().Run([]string{chartDir}, values)
	var out []string
	for _, m := range result.Messages {
		if m.Severity >= support.WarningSev {
			out = append(out, m.Error())
		}
	}
	for _, err := range result.Errors {
		out = append(out, err.Error())
	}
	return out
}
