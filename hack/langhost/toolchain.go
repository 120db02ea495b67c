package main

// Which Python runs a project, and how its dependencies get installed: Pulumi.yaml's runtime options.
//
// Honours the options the official host documents for `runtime: {name: python, options: ...}`:
// `toolchain` (`pip`, the default, or `uv`) and `virtualenv` (relative to the project root). With
// `uv` and no `virtualenv`, uv's own default `.venv` is used; a source-based plugin with pip and no
// `virtualenv` gets `venv`, as the official host gives it. Without a virtualenv the program runs with
// `PULUMI_PYTHON_CMD` or `python3` from PATH.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

var toolchains = []string{"pip", "uv"}

// pip's toolchain installs from this file only (as Pulumi's does); tfk8s generates it from
// pyproject.toml (hack/requirements.py) and a test keeps it current.
const requirements = "requirements.txt"

// ToolchainError: the project's Python cannot be found or set up; the message says what to do.
type ToolchainError struct{ message string }

func (e *ToolchainError) Error() string { return e.message }

func toolchainError(format string, args ...any) error {
	return &ToolchainError{fmt.Sprintf(format, args...)}
}

// Plugin is a resource plugin an installed SDK asks for.
type Plugin struct {
	Name, Version, Server string
}

// Program is the project as the CLI describes it (ProgramInfo).
type Program struct {
	Root       string
	Directory  string
	EntryPoint string
	Options    map[string]any
	// IsPlugin: a source-based plugin (PulumiPlugin.yaml: a resource, converter or tool plugin),
	// neither a program nor a policy pack. The CLI says so in InstallDependencies (IsPlugin) and
	// RunPlugin (any Kind but "analyzer").
	IsPlugin bool
}

func (p Program) option(name string) string {
	value, _ := p.Options[name].(string)
	return value
}

func (p Program) toolchain() (string, error) {
	name := p.option("toolchain")
	if name == "" {
		name = "pip"
	}
	for _, known := range toolchains {
		if name == known {
			return name, nil
		}
	}
	return "", toolchainError(
		"runtime.options.toolchain %q in %s is not supported by tfk8s's language host: use one of %s, or the official Pulumi installers",
		name, filepath.Join(p.Root, "Pulumi.yaml"), strings.Join(toolchains, ", "))
}

// Virtualenv is the project's virtualenv directory, or "" when it has none. A plugin always has
// one: the official host defaults pip's to `venv` ("We don't support running plugins using the
// global or ambient Python environment", pulumi-language-python's parseOptions at v3.259.0), and
// both hosts must find a plugin's environment in the same place.
func (p Program) Virtualenv() (string, error) {
	configured := p.option("virtualenv")
	if configured == "" {
		name, err := p.toolchain()
		if err != nil {
			return "", err
		}
		switch {
		case name == "uv":
			configured = ".venv"
		case p.IsPlugin:
			configured = "venv"
		}
	}
	if configured == "" || filepath.IsAbs(configured) {
		return configured, nil
	}
	return filepath.Join(p.Root, configured), nil
}

// Python is the interpreter that runs the program.
func (p Program) Python() (string, error) {
	venv, err := p.Virtualenv()
	if err != nil {
		return "", err
	}
	if venv == "" {
		command := os.Getenv("PULUMI_PYTHON_CMD")
		if command == "" {
			command = "python3"
		}
		found, err := exec.LookPath(command)
		if err != nil {
			return "", toolchainError("no python3 on PATH: install Python 3 or set runtime.options.virtualenv in Pulumi.yaml")
		}
		return found, nil
	}
	python := filepath.Join(venv, "bin", "python")
	if _, err := os.Stat(python); err != nil {
		return "", toolchainError(
			"the project's virtualenv %s does not exist: run `pulumi install` (or `make venv`) in %s", venv, p.Root)
	}
	return python, nil
}

// ResourcePlugins are the resource plugins the installed SDKs ask for (each ships a
// pulumi-plugin.json), as the official host reports them: by name, the last found winning, in the
// order first found.
func (p Program) ResourcePlugins() ([]Plugin, error) {
	venv, err := p.Virtualenv()
	if err != nil {
		return nil, err
	}
	var directories []string
	if venv != "" { // a virtualenv's layout is fixed: no interpreter start needed to find it
		directories, _ = filepath.Glob(filepath.Join(venv, "lib", "python3*", "site-packages"))
	} else {
		python, err := p.Python()
		if err != nil {
			return nil, err
		}
		script := "import json, site; print(json.dumps(site.getsitepackages() + [site.getusersitepackages()]))"
		out, err := exec.Command(python, "-c", script).Output()
		if err != nil {
			return nil, fmt.Errorf("listing %s's site-packages: %w", python, err)
		}
		if err := json.Unmarshal(out, &directories); err != nil {
			return nil, fmt.Errorf("listing %s's site-packages: %w", python, err)
		}
	}
	var order []string
	found := map[string]Plugin{}
	for _, directory := range directories {
		manifests, _ := filepath.Glob(filepath.Join(directory, "*", "pulumi-plugin.json"))
		for _, manifest := range manifests {
			text, err := os.ReadFile(manifest)
			if err != nil {
				return nil, err
			}
			var data struct {
				Resource bool   `json:"resource"`
				Name     string `json:"name"`
				Version  string `json:"version"`
				Server   string `json:"server"`
			}
			if err := json.Unmarshal(text, &data); err != nil {
				return nil, fmt.Errorf("%s: %w", manifest, err)
			}
			if !data.Resource || data.Name == "" {
				continue
			}
			version := data.Version
			if version != "" && !strings.HasPrefix(version, "v") {
				version = "v" + version
			}
			if _, seen := found[data.Name]; !seen {
				order = append(order, data.Name)
			}
			found[data.Name] = Plugin{Name: data.Name, Version: version, Server: data.Server}
		}
	}
	plugins := make([]Plugin, 0, len(order))
	for _, name := range order {
		plugins = append(plugins, found[name])
	}
	return plugins, nil
}

// InstallCommands is what `pulumi install` runs for this toolchain.
func (p Program) InstallCommands() ([][]string, error) {
	name, err := p.toolchain()
	if err != nil {
		return nil, err
	}
	if name == "uv" {
		return [][]string{{"uv", "sync"}}, nil
	}
	venv, err := p.Virtualenv()
	if err != nil {
		return nil, err
	}
	requirementsFile := filepath.Join(p.Root, requirements)
	if _, err := os.Stat(requirementsFile); err != nil {
		return nil, toolchainError("%s is missing: the pip toolchain installs from it", requirementsFile)
	}
	var commands [][]string
	python := "python3"
	if venv != "" {
		if _, err := os.Stat(filepath.Join(venv, "bin", "python")); errors.Is(err, os.ErrNotExist) {
			creator, err := exec.LookPath("python3")
			if err != nil {
				creator = "python3"
			}
			commands = append(commands, []string{creator, "-m", "venv", venv})
		}
		python = filepath.Join(venv, "bin", "python")
	}
	return append(commands, []string{python, "-m", "pip", "install", "-r", requirementsFile}), nil
}
