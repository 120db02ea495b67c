package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseLanguages(t *testing.T) {
	for _, tc := range []struct {
		name, list string
		want       []string
		err        string
	}{
		{name: "the default", list: "python,nodejs", want: []string{"python", "nodejs"}},
		{name: "typescript is nodejs", list: "typescript", want: []string{"nodejs"}},
		{name: "each once, in order, spaces ignored", list: " go , python,go,,", want: []string{"go", "python"}},
		{name: "unknown", list: "python,java", err: `--language "java": no such language; choose from go, nodejs, python`},
		{name: "empty", list: " , ", err: "names no language"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseLanguages(tc.list)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("parseLanguages(%q) = %v, %v; want an error with %q", tc.list, got, err, tc.err)
				}
				return
			}
			if err != nil || strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("parseLanguages(%q) = %v, %v; want %v", tc.list, got, err, tc.want)
			}
		})
	}
}

// tiny is a component package with a builtin reference (pulumi.json#/Any), which binds without a loader.
const tiny = `{
  "name": "tiny", "version": "0.1.0",
  "resources": {"tiny:index:Thing": {
    "isComponent": true,
    "inputProperties": {"size": {"type": "integer", "plain": true}},
    "requiredInputs": ["size"],
    "properties": {"status": {"type": "object", "additionalProperties": {"$ref": "pulumi.json#/Any"}}},
    "required": ["status"]
  }}
}`

func TestEachLanguageWritesTheComponent(t *testing.T) {
	for lang, want := range map[string]string{
		"python": "pulumi_tiny/thing.py",
		"nodejs": "thing.ts",
		"go":     "tiny/thing.go",
	} {
		t.Run(lang, func(t *testing.T) {
			files, err := generate([]byte(tiny), lang, options{})
			if err != nil {
				t.Fatal(err)
			}
			content, ok := files[want]
			if !ok {
				t.Fatalf("no %s among %v", want, keys(files))
			}
			if !strings.Contains(string(content), "tiny:index:Thing") {
				t.Fatalf("%s does not declare the token tiny:index:Thing:\n%s", want, content)
			}
		})
	}
}

func TestTheRealSchemaGeneratesTheTrainingCluster(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "package", "schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	for lang, want := range map[string]string{
		"python": "pulumi_tfk8s/training_cluster.py",
		"nodejs": "trainingCluster.ts",
		"go":     "tfk8s/trainingCluster.go",
	} {
		files, err := generate(data, lang, options{})
		if err != nil {
			t.Fatalf("%s: %v", lang, err)
		}
		if _, ok := files[want]; !ok {
			t.Errorf("%s: no %s among %v", lang, want, keys(files))
		}
	}
}

func TestAReferenceToAnotherPackageIsRefusedByName(t *testing.T) {
	withRef := strings.Replace(tiny, `"pulumi.json#/Any"`,
		`"/kubernetes/v4.25.0/schema.json#/types/kubernetes:core/v1:PodSpec"`, 1)
	_, err := generate([]byte(withRef), "python", options{})
	if err == nil || !strings.Contains(err.Error(), "references package kubernetes@4.25.0") {
		t.Fatalf("generate = %v; want the loader's refusal, naming the kubernetes package", err)
	}
}

func TestASchemaThatDoesNotBindSaysWhy(t *testing.T) {
	_, err := generate([]byte(`{"name": "tiny", "resources": {"tiny:index:Thing": {"isComponent": true,
		"inputProperties": {"size": {"type": "integr"}}}}}`), "nodejs", options{})
	if err == nil || !strings.Contains(err.Error(), "unknown type kind integr") {
		t.Fatalf("generate = %v; want an error naming the bad type", err)
	}
}

func TestTheGoImportBaseIsSetOnlyWhereTheSchemaHasNone(t *testing.T) {
	files, err := generate([]byte(tiny), "go", options{goImportBase: "example.com/me/sdk/tiny"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(files["tiny/init.go"]), `"example.com/me/sdk/tiny/internal"`) {
		t.Fatalf("init.go does not import the internal package under the import base:\n%s", files["tiny/init.go"])
	}

	var spec map[string]any
	if err := json.Unmarshal([]byte(tiny), &spec); err != nil {
		t.Fatal(err)
	}
	spec["language"] = map[string]any{"go": map[string]any{"importBasePath": "example.com/theirs/tiny"}}
	own, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	files, err = generate(own, "go", options{goImportBase: "example.com/me/sdk/tiny"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(files["tiny/init.go"]), `"example.com/theirs/tiny/internal"`) {
		t.Fatalf("the schema's own importBasePath was overridden:\n%s", files["tiny/init.go"])
	}
}

func TestWriteReplacesTheLanguageDirectoryOnly(t *testing.T) {
	out := t.TempDir()
	stale := filepath.Join(out, "python", "stale.py")
	sibling := filepath.Join(out, "nodejs", "keep.ts")
	for _, path := range []string{stale, sibling} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir, err := write(out, "python", map[string][]byte{"pkg/mod.py": []byte("y")})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "pkg", "mod.py")); string(got) != "y" {
		t.Fatalf("pkg/mod.py = %q", got)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the previous SDK's file survived: %v", err)
	}
	if _, err := os.Stat(sibling); err != nil {
		t.Fatalf("another language's SDK was touched: %v", err)
	}
}

func TestWriteRefusesAPathOutsideItsDirectoryBeforeRemovingAnything(t *testing.T) {
	out := t.TempDir()
	previous := filepath.Join(out, "go", "old.go")
	if err := os.MkdirAll(filepath.Dir(previous), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(previous, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := write(out, "go", map[string][]byte{"../escape.go": nil}); err == nil {
		t.Fatal("write accepted ../escape.go")
	}
	if _, err := os.Stat(previous); err != nil {
		t.Fatalf("the previous SDK was removed although nothing was written: %v", err)
	}
}

func keys(files map[string][]byte) []string {
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	return names
}
