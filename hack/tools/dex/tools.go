//go:build tools

// Package tools records the dex command as a dependency of this module.
package tools

import _ "github.com/dexidp/dex/cmd/dex"
