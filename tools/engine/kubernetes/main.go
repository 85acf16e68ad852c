// Command pulumi-resource-kubernetes serves the pulumi-kubernetes resource provider.
//
// The upstream main package embeds files that its release build generates (they are not part of the Go
// module), so it cannot be built from the module as is. This small main of ours serves the same provider
// from the module's library package. scripts/install-engine builds it in a staging copy of this folder
// (.engine/src/kubernetes), next to the provider module's schema.json and terraform-mapping.json so they
// can be embedded; the package version is written into the schema at start-up, as upstream's generator
// does at build time.
package main

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

//go:embed schema.json
var schema []byte

//go:embed terraform-mapping.json
var terraformMapping []byte

// versionedSchema returns the schema with its top-level "version" set to v, leaving every other field as is.
func versionedSchema(raw []byte, v string) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, fmt.Errorf("parsing embedded schema: %w", err)
	}
	encoded, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	fields["version"] = encoded
	return json.Marshal(fields)
}

// compactMapping re-encodes the terraform mapping without whitespace, as upstream's generator does.
func compactMapping(raw []byte) ([]byte, error) {
	var mapping any
	if err := json.Unmarshal(raw, &mapping); err != nil {
		return nil, fmt.Errorf("parsing embedded terraform mapping: %w", err)
	}
	return json.Marshal(mapping)
}

func main() {
	// version.Version is set at build time with
	// -ldflags "-X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=<version>".
	if version.Version == "" {
		fmt.Fprintln(os.Stderr, "pulumi-resource-kubernetes: built without a version (see scripts/install-engine)")
		os.Exit(1)
	}
	s, err := versionedSchema(schema, version.Version)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	m, err := compactMapping(terraformMapping)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	provider.Serve("kubernetes", version.Version, s, m)
}
