// Package config embeds the generated manifests, so `userland dev` installs
// exactly what the repository ships: CRDs, RBAC, the webhook configuration
// and the samples.
package config

import "embed"

// Manifests holds crd/bases, rbac, webhook and samples.
//
//go:embed crd/bases/*.yaml rbac/*.yaml webhook/manifests.yaml samples/*.yaml
var Manifests embed.FS
