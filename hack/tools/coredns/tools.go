//go:build tools

// Package tools records the coredns command as a dependency of this module.
package tools

import _ "github.com/coredns/coredns"
