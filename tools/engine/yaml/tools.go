//go:build tools

// Package tools pins the YAML language host: scripts/install-engine builds
// github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml from this module.
package tools

import _ "github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml"
