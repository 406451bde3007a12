//go:build tools

// Package tools records the kube-router command as a dependency of this module.
package tools

import _ "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"
