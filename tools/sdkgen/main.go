// sdkgen writes the TypeScript, Go and Python SDKs of the together Pulumi package from its schema.
//
//	go run . -schema ../../provider/schema.json -languages languages.json -out ../../sdk -version 0.1.0
//
// (scripts/gen-sdks runs it with the version of pyproject.toml.)//
// The schema (provider/schema.json, written by provider/package_schema.py) says what the resources are;
// languages.json here says how each SDK is packaged (package names, the Go import path, pack support). The
// two are merged (languages.json wins on the keys it sets), bound and validated by Pulumi's own binder, and
// handed to pkg/v3/codegen/{nodejs,go,python} at the version pinned in go.mod. Each language's folder under
// -out is replaced whole, so a file the schema no longer makes is removed. The output depends on nothing but
// the two files and the pinned codegen: the same inputs give the same bytes (the drift test relies on it).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/blang/semver"
	gogen "github.com/pulumi/pulumi/pkg/v3/codegen/go"
	"github.com/pulumi/pulumi/pkg/v3/codegen/nodejs"
	"github.com/pulumi/pulumi/pkg/v3/codegen/python"
	"github.com/pulumi/pulumi/pkg/v3/codegen/schema"
)

// tool is the generator's name written into each file's "do not edit" header.
const tool = "together-sdkgen"

func main() {
	schemaPath := flag.String("schema", "provider/schema.json", "the package schema")
	languagesPath := flag.String("languages", "tools/sdkgen/languages.json", "per-language packaging, merged over the schema")
	out := flag.String("out", "sdk", "where the SDKs go: one folder per language (nodejs, go, python)")
	only := flag.String("language", "", "generate one language only (nodejs, go or python)")
	version := flag.String("version", "", "the package's version (the plugin's, which the SDKs ask the engine for)")
	flag.Parse()
	if *version == "" {
		fmt.Fprintln(os.Stderr, "sdkgen: -version is required (the together plugin's version, pyproject.toml's)")
		os.Exit(2)
	}
	if err := run(*schemaPath, *languagesPath, *out, *only, *version); err != nil {
		fmt.Fprintf(os.Stderr, "sdkgen: %v\n", err)
		os.Exit(1)
	}
}

func run(schemaPath, languagesPath, out, only, version string) error {
	spec, err := loadSpec(schemaPath, languagesPath)
	if err != nil {
		return err
	}
	spec.Version = version
	generators := map[string]func(*schema.Package) (map[string][]byte, error){
		"nodejs": func(pkg *schema.Package) (map[string][]byte, error) {
			return nodejs.GeneratePackage(tool, pkg, nil, nil, false, noPackages{})
		},
		"go": func(pkg *schema.Package) (map[string][]byte, error) {
			return gogen.GeneratePackage(tool, pkg, nil)
		},
		"python": func(pkg *schema.Package) (map[string][]byte, error) {
			return python.GeneratePackage(tool, pkg, nil, noPackages{})
		},
	}
	languages := []string{"nodejs", "go", "python"}
	if only != "" {
		if _, ok := generators[only]; !ok {
			return fmt.Errorf("unknown language %q (nodejs, go or python)", only)
		}
		languages = []string{only}
	}
	for _, lang := range languages {
		// Each generator records its language's info on the package: bind afresh for each.
		pkg, err := bind(spec)
		if err != nil {
			return fmt.Errorf("%s: %w", schemaPath, err)
		}
		files, err := generators[lang](pkg)
		if err != nil {
			return fmt.Errorf("generating the %s SDK: %w", lang, err)
		}
		if err := writeTree(filepath.Join(out, lang), files); err != nil {
			return err
		}
	}
	return nil
}

// loadSpec reads the schema and merges the top-level keys of the languages file over it.
func loadSpec(schemaPath, languagesPath string) (schema.PackageSpec, error) {
	var spec schema.PackageSpec
	doc := map[string]json.RawMessage{}
	raw, err := os.ReadFile(schemaPath)
	if err != nil {
		return spec, err
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return spec, fmt.Errorf("%s: %w", schemaPath, err)
	}
	if languagesPath != "" {
		overlay := map[string]json.RawMessage{}
		raw, err := os.ReadFile(languagesPath)
		if err != nil {
			return spec, err
		}
		if err := json.Unmarshal(raw, &overlay); err != nil {
			return spec, fmt.Errorf("%s: %w", languagesPath, err)
		}
		for k, v := range overlay {
			doc[k] = v
		}
	}
	merged, err := json.Marshal(doc)
	if err != nil {
		return spec, err
	}
	if err := json.Unmarshal(merged, &spec); err != nil {
		return spec, fmt.Errorf("%s: %w", schemaPath, err)
	}
	return spec, nil
}

// noPackages is the loader of a package that references no other: asked for one, it says so (nothing is
// downloaded or read from a plugin cache).
type noPackages struct{}

func (noPackages) refuse(name string) error {
	return fmt.Errorf("the schema references package %q: sdkgen loads no other package", name)
}

func (l noPackages) LoadPackage(name string, _ *semver.Version) (*schema.Package, error) {
	return nil, l.refuse(name)
}

func (l noPackages) LoadPackageV2(_ context.Context, d *schema.PackageDescriptor) (*schema.Package, error) {
	return nil, l.refuse(d.Name)
}

func (l noPackages) LoadPackageReference(name string, _ *semver.Version) (schema.PackageReference, error) {
	return nil, l.refuse(name)
}

func (l noPackages) LoadPackageReferenceV2(
	_ context.Context, d *schema.PackageDescriptor,
) (schema.PackageReference, error) {
	return nil, l.refuse(d.Name)
}

// bind validates the spec with Pulumi's binder (the same checks `pulumi package get-schema` makes). The
// package references no other package, so the loader is never asked for one.
func bind(spec schema.PackageSpec) (*schema.Package, error) {
	pkg, diags, err := schema.BindSpec(spec, noPackages{}, schema.ValidationOptions{})
	if err != nil {
		return nil, err
	}
	if diags.HasErrors() {
		return nil, diags
	}
	return pkg, nil
}

// writeTree replaces dir with exactly files.
func writeTree(dir string, files map[string][]byte) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, files[name], 0o644); err != nil {
			return err
		}
	}
	return nil
}
