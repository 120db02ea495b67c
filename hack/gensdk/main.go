// Command gensdk writes the typed SDKs of a Pulumi package schema: tfk8s's component package
// (package/schema.json) for Python, TypeScript and Go programs.
//
// `pulumi package gen-sdk` would ask each language's host to generate its SDK, and this machine
// cannot get the Node.js and Go hosts (the Go proxy refuses them), while tfk8s's Python host has no
// GeneratePackage. The generators themselves are plain functions of pkg/v3/codegen, pinned here to
// the CLI's release (go.mod), so this calls them directly: the same generators the official hosts
// of that release wrap (their arguments to them not checked here: the hosts' source is not served).
//
// Usage:
//
//	gensdk --schema package/schema.json --out DIR [--language python,nodejs,go] [--go-import-base PATH]
//
// Each language's SDK goes to DIR/<language>, which is emptied first (as gen-sdk does).
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	schemaPath := flag.String("schema", "", "the package schema (JSON), e.g. package/schema.json")
	out := flag.String("out", "", "the directory the SDKs go to, one DIR/<language> each (emptied first)")
	languages := flag.String("language", "python,nodejs", "comma-separated: "+knownLanguages())
	goImportBase := flag.String("go-import-base", "",
		"the Go SDK's import path, where the schema sets none (default: the codegen's, from the package name)")
	flag.Parse()
	if *schemaPath == "" || *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: gensdk --schema SCHEMA.json --out DIR [--language python,nodejs,go]")
		os.Exit(2)
	}
	if err := run(*schemaPath, *out, *languages, *goImportBase); err != nil {
		fmt.Fprintf(os.Stderr, "gensdk: %v\n", err)
		os.Exit(1)
	}
}

func run(schemaPath, out, languageList, goImportBase string) error {
	langs, err := parseLanguages(languageList)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(schemaPath)
	if err != nil {
		return err
	}
	for _, lang := range langs {
		files, err := generate(data, lang, options{goImportBase: goImportBase, warnings: os.Stderr})
		if err != nil {
			return fmt.Errorf("%s SDK of %s: %w", lang, schemaPath, err)
		}
		dir, err := write(out, lang, files)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "gensdk: %s SDK in %s (%d files)\n", lang, dir, len(files))
	}
	return nil
}
