package main

// What the CLI-driven tests (tests/langhost) do not reach: the toolchain options other than the
// project's pip virtualenv, the runner's argv, and how the runner's end is reported.

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/protobuf/types/known/structpb"
)

func project(t *testing.T, options map[string]any) Program {
	t.Helper()
	return Program{Root: t.TempDir(), Directory: "", EntryPoint: ".", Options: options}
}

func fakeVenv(t *testing.T, venv string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(venv, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(venv, "bin", "python"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestVirtualenvIsRelativeToTheRootAndUvDefaultsToDotVenv(t *testing.T) {
	for _, c := range []struct {
		options map[string]any
		want    string // relative to the root; "" none
	}{
		{map[string]any{"virtualenv": "venv"}, "venv"},
		{map[string]any{"toolchain": "uv"}, ".venv"},
		{map[string]any{"toolchain": "pip"}, ""},
		{map[string]any{}, ""},
	} {
		p := project(t, c.options)
		got, err := p.Virtualenv()
		if err != nil {
			t.Fatal(err)
		}
		want := ""
		if c.want != "" {
			want = filepath.Join(p.Root, c.want)
		}
		if got != want {
			t.Errorf("%v: virtualenv %q, want %q", c.options, got, want)
		}
	}
	absolute := project(t, map[string]any{"virtualenv": "/opt/venv"})
	if got, _ := absolute.Virtualenv(); got != "/opt/venv" {
		t.Errorf("an absolute virtualenv is kept: got %q", got)
	}
}

func TestAnUnknownToolchainNamesTheKeyAndTheChoices(t *testing.T) {
	p := project(t, map[string]any{"toolchain": "poetry"})
	_, err := p.Python()
	var toolchain *ToolchainError
	if !errors.As(err, &toolchain) {
		t.Fatalf("want a ToolchainError, got %v", err)
	}
	for _, part := range []string{`runtime.options.toolchain "poetry"`, filepath.Join(p.Root, "Pulumi.yaml"), "pip, uv"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("%q does not name %q", err, part)
		}
	}
}

func TestWithoutAVirtualenvThePythonCommandComesFromTheEnvironment(t *testing.T) {
	python3, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("no python3 on PATH: the host runs programs without a virtualenv with it")
	}
	t.Setenv("PULUMI_PYTHON_CMD", "")
	if got, err := project(t, nil).Python(); err != nil || got != python3 {
		t.Errorf("python %q (%v), want %q", got, err, python3)
	}
	t.Setenv("PULUMI_PYTHON_CMD", "no-such-python-tfk8s")
	if _, err := project(t, nil).Python(); err == nil || !strings.Contains(err.Error(), "no python3 on PATH") {
		t.Errorf("want the missing interpreter named, got %v", err)
	}
}

func TestResourcePluginsComeFromTheSDKsManifestsWithAVPrefix(t *testing.T) {
	p := project(t, map[string]any{"virtualenv": "venv"})
	site := filepath.Join(p.Root, "venv", "lib", "python3.11", "site-packages")
	manifests := map[string]string{
		"pulumi_kubernetes": `{"resource": true, "name": "kubernetes", "version": "4.25.0-alpha.1"}`,
		"pulumi_random":     `{"resource": true, "name": "random", "version": "v4.1.0", "server": "https://example.com"}`,
		"pulumi":            `{"resource": false, "name": "pulumi"}`,
	}
	for pkg, text := range manifests {
		if err := os.MkdirAll(filepath.Join(site, pkg), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(site, pkg, "pulumi-plugin.json"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := p.ResourcePlugins()
	if err != nil {
		t.Fatal(err)
	}
	want := []Plugin{
		{Name: "kubernetes", Version: "v4.25.0-alpha.1"},
		{Name: "random", Version: "v4.1.0", Server: "https://example.com"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("plugins %+v, want %+v", got, want)
	}
}

func TestInstallCreatesTheVirtualenvThenInstallsTheRequirements(t *testing.T) {
	p := project(t, map[string]any{"virtualenv": "venv"})
	if _, err := p.InstallCommands(); err == nil || !strings.Contains(err.Error(), "requirements.txt is missing") {
		t.Fatalf("want the missing requirements.txt named, got %v", err)
	}
	requirementsFile := filepath.Join(p.Root, "requirements.txt")
	if err := os.WriteFile(requirementsFile, []byte("pulumi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	commands, err := p.InstallCommands()
	if err != nil {
		t.Fatal(err)
	}
	venv := filepath.Join(p.Root, "venv")
	python := filepath.Join(venv, "bin", "python")
	if len(commands) != 2 || !reflect.DeepEqual(commands[0][1:], []string{"-m", "venv", venv}) ||
		!reflect.DeepEqual(commands[1], []string{python, "-m", "pip", "install", "-r", requirementsFile}) {
		t.Errorf("commands %q", commands)
	}
	fakeVenv(t, venv)
	if commands, _ := p.InstallCommands(); len(commands) != 1 {
		t.Errorf("an existing virtualenv is not created again: %q", commands)
	}
	uv := project(t, map[string]any{"toolchain": "uv"})
	if commands, _ := uv.InstallCommands(); !reflect.DeepEqual(commands, [][]string{{"uv", "sync"}}) {
		t.Errorf("uv: %q", commands)
	}
}

func TestTheRunnersArgvFollowsTheRunRequest(t *testing.T) {
	request := &pulumirpc.RunRequest{
		Project: "p", Stack: "s", Pwd: "/work/infra", Parallel: 4, MonitorAddress: "127.0.0.1:1",
		Organization: "org", DryRun: true, Args: []string{"a", "b"},
		Info: &pulumirpc.ProgramInfo{RootDirectory: "/work", EntryPoint: "."},
	}
	got := childCommand(request, "127.0.0.1:2", "/venv/bin/python", "/host/langhost/run_program.py")
	want := []string{
		"/venv/bin/python", "/host/langhost/run_program.py", "--monitor", "127.0.0.1:1", "--engine", "127.0.0.1:2",
		"--project", "p", "--stack", "s", "--pwd", "/work/infra", "--parallel", "4", "--root-directory", "/work",
		"--organization", "org", "--dry-run", ".", "--", "a", "b",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("argv\n %q\nwant\n %q", got, want)
	}
}

func TestProgramInfoFallsBackToTheWorkingDirectory(t *testing.T) {
	options, _ := structpb.NewStruct(map[string]any{"virtualenv": "venv"})
	got := programInfo(&pulumirpc.ProgramInfo{RootDirectory: "/r", Options: options}, "/pwd")
	if got.Root != "/r" || got.Directory != "/pwd" || got.EntryPoint != "." || got.option("virtualenv") != "venv" {
		t.Errorf("%+v", got)
	}
	if got := programInfo(nil, "/pwd"); got.Root != "/pwd" || got.Directory != "/pwd" {
		t.Errorf("%+v", got)
	}
}

func TestTheRunnersEndIsReportedAsTheCLIExpects(t *testing.T) {
	ended := func(script string) *pulumirpc.RunResponse {
		command := exec.Command("/bin/sh", "-c", script)
		_ = command.Run()
		return runResponse(command.ProcessState)
	}
	if r := ended("exit 0"); r.Error != "" || r.Bail {
		t.Errorf("exit 0: %+v", r)
	}
	if r := ended("exit 32"); !r.Bail || r.Error != "" {
		t.Errorf("exit 32 is a bail: %+v", r)
	}
	if r := ended("exit 3"); r.Error != "the program exited with code 3" {
		t.Errorf("exit 3: %+v", r)
	}
	if r := ended("kill -TERM $$"); r.Error != "the program was stopped by signal 15" {
		t.Errorf("SIGTERM: %+v", r)
	}
}

func TestTheEngineAddressIsTheLastArgumentAfterTheFlags(t *testing.T) {
	for args, want := range map[string]string{"-v=9 --tracing x 127.0.0.1:5": "127.0.0.1:5", "127.0.0.1:5": "127.0.0.1:5", "--logtostderr": "", "": ""} {
		if got := engineAddressFrom(strings.Fields(args)); got != want {
			t.Errorf("%q: %q, want %q", args, got, want)
		}
	}
}
